package checkouthttp

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/order"
)

// The buyer's view of an order with lines shows each line with its own
// state, and a stream sees a line's change as a change.
func TestViewShowsLines(t *testing.T) {
	h := &Handler{}
	res := order.Result{Activity: "s", User: "u", Status: order.StatusSuccess, OrderNo: "42", ReservationID: "r",
		Lines: []order.Line{{OrderNo: "42", ActivityID: "s/M", Qty: 1, Price: 990}, {OrderNo: "42", LineNo: 1, ActivityID: "b", Qty: 2, Price: 500,
			Status: order.OrderCancelled}}}
	v := h.view(context.Background(), res)
	b, err := json.Marshal(v)
	require.NoError(t, err)
	assert.JSONEq(t, `{"status":"created","reservation":"r","order_no":"42","lines":[{"activity":"s/M","qty":1,"price":990},`+
		`{"activity":"b","qty":2,"price":500,"status":"CANCELLED"}]}`, string(b))

	before := res
	before.Lines = append([]order.Line(nil), res.Lines...)
	before.Lines[1].Status = ""
	assert.False(t, v.same(h.view(context.Background(), before)), "a line's change is a change")
	assert.True(t, v.same(h.view(context.Background(), res)))

	// Queued, the lines still say what is held (a variant reservation's
	// one line, read from the stock ledger by checkout.Checkout.Result).
	res.Status = order.StatusQueued
	q := h.view(context.Background(), res)
	assert.Equal(t, res.Lines, q.Lines)
	assert.Empty(t, q.OrderNo)
}

// The view of a variant reservation names its variant: from its one line
// of a variant of the sale, queued or ordered; never from a cart's lines or
// another activity's line.
func TestViewShowsVariant(t *testing.T) {
	h := &Handler{}
	line := []order.Line{{ActivityID: "s/M", Qty: 1}}
	for _, tc := range []struct {
		res  order.Result
		want string
	}{
		{order.Result{Activity: "s", Status: order.StatusQueued, ReservationID: "r/M", Lines: line}, "M"},
		{order.Result{Activity: "s", Status: order.StatusSuccess, OrderNo: "1", ReservationID: "r/M", Lines: line}, "M"},
		{order.Result{Activity: "t", Status: order.StatusSuccess, OrderNo: "1", ReservationID: "r/M", Lines: line}, ""},
		{order.Result{Activity: "s", Status: order.StatusSuccess, OrderNo: "1", ReservationID: "r", Lines: append(line, order.Line{ActivityID: "s/L", Qty: 1})}, ""},
		{order.Result{Activity: "s", Status: order.StatusSuccess, OrderNo: "1", ReservationID: "r"}, ""},
	} {
		v := h.view(context.Background(), tc.res)
		assert.Equal(t, tc.want, v.Variant, "%+v", tc.res)
		b, err := json.Marshal(v)
		require.NoError(t, err)
		if tc.want == "" {
			assert.NotContains(t, string(b), `"variant"`)
		} else {
			assert.Contains(t, string(b), `"variant":"`+tc.want+`"`)
		}
	}
}
