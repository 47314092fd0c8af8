package order_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
)

// cartMsg is message i: a cart of user with one line per (activity, qty)
// pair, filed under activity parent.
func cartMsg(i int, parent, user string, lines ...any) order.Message {
	m := msg(i, parent, user)
	m.Version, m.Qty, m.Price = order.MessageVersion, 0, 0
	for k := 0; k < len(lines); k += 2 {
		m.Lines = append(m.Lines, order.Line{ActivityID: lines[k].(string), Qty: int64(lines[k+1].(int))})
	}
	return m
}

// lineRows reads the line rows of orderNo, in line order.
func lineRows(t testing.TB, db *gorm.DB, orderNo string) []order.Line {
	t.Helper()
	var ls []order.Line
	require.NoError(t, db.Table(defaultTables().Line).Where("order_no = ?", orderNo).Order("line_no").Find(&ls).Error)
	return ls
}

func countRows(t testing.TB, db *gorm.DB, table, where string, args ...any) int64 {
	t.Helper()
	var n int64
	q := db.Table(table)
	if where != "" {
		q = q.Where(where, args...)
	}
	require.NoError(t, q.Count(&n).Error)
	return n
}

// addCartActivities adds the activities of the cart tests: "s" (the sale,
// no stock of its own), its variants "s/M" and "s/L", and "b".
func addCartActivities(t testing.TB, db *gorm.DB, stock, limit int64) {
	t.Helper()
	addActivity(t, db, "s", 0, limit)
	for _, a := range []string{"s/M", "s/L", "b"} {
		addActivity(t, db, a, stock, limit)
	}
}

// A 3-line order is written in one transaction: the order row (qty 0),
// three line rows with their reservations "<id>#<i>", the dedup rows, and
// each line's units taken from its activity's DB stock; the TxHook sees the
// lines. A redelivery writes nothing more; a cart one of whose lines the
// DB cannot serve writes nothing at all.
func TestCartWrittenAtomically(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addCartActivities(t, db, 10, 10)
		var hooked []order.Order
		p := newProc(t, db, order.WithTxHook(func(_ context.Context, _ *gorm.DB, os []order.Order) error {
			hooked = append(hooked, os...)
			return nil
		}))
		m := cartMsg(1, "s", "u1", "s/M", 1, "s/L", 2, "b", 3)
		m.Lines[2].Price = 500
		out, err := p.Handle(ctx, m)
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status, out.Reason)

		require.EqualValues(t, 1, countOrders(t, db, "order_no = ? AND qty = 0 AND price = 0", out.OrderNo))
		ls := lineRows(t, db, out.OrderNo)
		require.Len(t, ls, 3)
		for i, want := range []struct {
			act   string
			qty   int64
			price order.Cents
		}{{"s/M", 1, 990}, {"s/L", 2, 990}, {"b", 3, 500}} {
			assert.Equal(t, i, ls[i].LineNo)
			assert.Equal(t, "r-1#"+strconv.Itoa(i), ls[i].ReservationID)
			assert.Equal(t, "u1", ls[i].UserID)
			assert.Equal(t, want.act, ls[i].ActivityID)
			assert.Equal(t, want.qty, ls[i].Qty)
			assert.Equal(t, want.price, ls[i].Price)
			assert.Empty(t, ls[i].Status, "a new line follows its order")
		}
		assert.EqualValues(t, 9, dbStock(t, db, "s/M"))
		assert.EqualValues(t, 8, dbStock(t, db, "s/L"))
		assert.EqualValues(t, 7, dbStock(t, db, "b"))
		assert.EqualValues(t, 0, dbStock(t, db, "s"))
		assert.EqualValues(t, 4, countRows(t, db, defaultTables().Dedup, "order_no = ? AND outcome = ?", out.OrderNo, order.StatusSuccess),
			"the message's row and one per line")
		require.Len(t, hooked, 1)
		require.Len(t, hooked[0].Lines, 3, "the TxHook sees the lines")
		assert.Equal(t, "b", hooked[0].Lines[2].ActivityID)
		assert.Equal(t, "r-1#2", hooked[0].Lines[2].ReservationID)

		again, err := p.Handle(ctx, m)
		require.NoError(t, err)
		assert.True(t, again.Duplicate)
		assert.Equal(t, out.OrderNo, again.OrderNo)
		assert.EqualValues(t, 3, countRows(t, db, defaultTables().Line, ""))
		assert.EqualValues(t, 9, dbStock(t, db, "s/M"))

		// Line 2 wants more than the DB holds: nothing of the cart is written.
		big := cartMsg(2, "s", "u2", "s/M", 1, "s/L", 1, "b", 8)
		out, err = p.Handle(ctx, big)
		require.NoError(t, err)
		assert.Equal(t, order.StatusFailed, out.Status)
		assert.Equal(t, order.ReasonSoldOut, out.Reason)
		assert.EqualValues(t, 1, countOrders(t, db, ""))
		assert.EqualValues(t, 3, countRows(t, db, defaultTables().Line, ""))
		assert.EqualValues(t, 9, dbStock(t, db, "s/M"))
		assert.EqualValues(t, 8, dbStock(t, db, "s/L"))
		assert.EqualValues(t, 7, dbStock(t, db, "b"))
		assert.EqualValues(t, 0, countRows(t, db, defaultTables().Dedup, "reservation_id LIKE ?", "r-2#%"))
		assert.Len(t, hooked, 2, "the hook ran in the rolled-back transaction too")

		// An unknown line activity refuses the cart.
		out, err = p.Handle(ctx, cartMsg(3, "s", "u3", "s/M", 1, "s/XL", 1))
		require.NoError(t, err)
		assert.Equal(t, order.ReasonUnknownActivity, out.Reason)
		assert.EqualValues(t, 9, dbStock(t, db, "s/M"))
	})
}

var errInjected = errors.New("injected: the process dies between the order row and its lines")

// A failure between the order row and its line rows (injected into the
// lines' INSERT) leaves nothing: no order, no line, no dedup row, every
// stock as it was; the redelivery then writes the order whole.
func TestCartCrashBetweenOrderAndLines(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addCartActivities(t, db, 10, 5)
		fail := true
		require.NoError(t, db.Callback().Create().Before("gorm:create").Register("inject_line_failure", func(tx *gorm.DB) {
			if fail && tx.Statement.Table == defaultTables().Line {
				require.EqualValues(t, 1, countOrders(t, tx.Session(&gorm.Session{NewDB: true}), "reservation_id = ?", "r-1"), "the order row is written when the lines fail")
				_ = tx.AddError(errInjected)
			}
		}))
		p := newProc(t, db)
		m := cartMsg(1, "s", "u1", "s/M", 1, "s/L", 2, "b", 3)
		_, err := p.Handle(ctx, m)
		require.ErrorIs(t, err, errInjected)
		assert.Zero(t, countOrders(t, db, ""))
		assert.Zero(t, countRows(t, db, defaultTables().Line, ""))
		assert.Zero(t, countRows(t, db, defaultTables().Dedup, ""))
		for _, a := range []string{"s/M", "s/L", "b"} {
			assert.EqualValues(t, 10, dbStock(t, db, a), a)
		}
		// The batch path writes a cart on its own, and rolls it back whole too.
		_, err = p.Process(ctx, []order.Message{msg(5, "b", "u5"), m})
		require.ErrorIs(t, err, errInjected)
		assert.EqualValues(t, 1, countOrders(t, db, ""), "the plain message was written before the cart")
		assert.Zero(t, countRows(t, db, defaultTables().Line, ""))

		fail = false
		out, err := p.Handle(ctx, m)
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status)
		assert.Len(t, lineRows(t, db, out.OrderNo), 3)
		assert.EqualValues(t, 9, dbStock(t, db, "s/M"))
		assert.EqualValues(t, 8, dbStock(t, db, "s/L"))
		assert.EqualValues(t, 6, dbStock(t, db, "b"), "3 for the cart, 1 for the plain order")
	})
}

// The DB holds each line's activity to its per-user cap, counting the
// buyer's plain orders and cart lines together, cap 1 included.
func TestCartCaps(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addCartActivities(t, db, 10, 2)
		addActivity(t, db, "one", 10, 1)
		p := newProc(t, db)
		out, err := p.Handle(ctx, msg(1, "b", "u1")) // a plain order: 1 unit of b
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status)

		out, err = p.Handle(ctx, cartMsg(2, "s", "u1", "s/M", 1, "b", 2))
		require.NoError(t, err)
		assert.Equal(t, order.ReasonLimit, out.Reason, "1 + 2 units of b > 2")
		out, err = p.Handle(ctx, cartMsg(3, "s", "u1", "s/M", 2, "b", 1))
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status, out.Reason)
		out, err = p.Handle(ctx, cartMsg(4, "s", "u1", "s/M", 1))
		require.NoError(t, err)
		assert.Equal(t, order.ReasonLimit, out.Reason, "the lines of the first cart count")
		out, err = p.Handle(ctx, msg(5, "b", "u1"))
		require.NoError(t, err)
		assert.Equal(t, order.ReasonLimit, out.Reason, "a plain order counts the buyer's lines too (cap above 1)")

		out, err = p.Handle(ctx, cartMsg(6, "s", "u2", "one", 1, "one", 1))
		require.NoError(t, err)
		assert.Equal(t, order.ReasonLimit, out.Reason, "two lines of a cap-1 activity")
		out, err = p.Handle(ctx, msg(7, "one", "u2"))
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status)
		out, err = p.Handle(ctx, cartMsg(8, "s", "u2", "one", 1))
		require.NoError(t, err)
		assert.Equal(t, order.ReasonLimit, out.Reason, "a cart line over a cap-1 plain order")
		assert.EqualValues(t, 10-1-1, dbStock(t, db, "b"))
		assert.EqualValues(t, 10-2, dbStock(t, db, "s/M"))
		assert.EqualValues(t, 10-1, dbStock(t, db, "one"))
	})
}

// A line fenced as released (handoff.Fence, the reconciler's release of a
// line without an order) before its cart arrives refuses the cart; a line
// of a written cart is consumed: the fence releases nothing.
func TestCartLinesFenced(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addCartActivities(t, db, 10, 5)
		led := newLedger()
		fence, err := handoff.NewFence(db, led)
		require.NoError(t, err)
		p := newProc(t, db)
		for _, id := range []string{"r-1#1", "r-2#1"} {
			led.reserve("b", Reservation{ID: id, User: "u1", Qty: 1})
		}

		require.NoError(t, fence.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "b", User: "u1", ReservationID: "r-1#1"}))
		out, err := p.Handle(ctx, cartMsg(1, "s", "u1", "s/M", 1, "b", 1))
		require.NoError(t, err)
		assert.Equal(t, order.StatusFailed, out.Status)
		assert.Equal(t, handoff.ReasonReleased, out.Reason)
		assert.Zero(t, countOrders(t, db, ""))
		assert.EqualValues(t, 10, dbStock(t, db, "s/M"))

		out, err = p.Handle(ctx, cartMsg(2, "s", "u1", "s/M", 1, "b", 1))
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status)
		err = fence.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "b", User: "u1", ReservationID: "r-2#1"})
		assert.ErrorIs(t, err, handoff.ErrConsumed)
		assert.Equal(t, 1, led.releases(), "only the fenced line of the refused cart")
	})
}

// A cart travels as version 4 and decodes with its lines; a message
// without lines is still written as version 3; bad lines are refused.
func TestCartMessage(t *testing.T) {
	t.Parallel()
	m := cartMsg(1, "s", "u1", "s/M", 1, "b", 2)
	m.Lines[1].Price = 250
	b, err := m.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"v":4`)
	assert.Contains(t, string(b), `"lines":[{"activity":"s/M","qty":1},{"activity":"b","qty":2,"price":250}]`)
	got, err := order.Decode(b)
	require.NoError(t, err)
	assert.Equal(t, m, got)

	plain := msg(2, "b", "u1")
	plain.Version = 0
	b, err = plain.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"v":3`)

	for name, mut := range map[string]func(*order.Message){
		"version 3":        func(m *order.Message) { m.Version = 3 },
		"qty set":          func(m *order.Message) { m.Qty = 1 },
		"price set":        func(m *order.Message) { m.Price = 1 },
		"zero qty":         func(m *order.Message) { m.Lines[0].Qty = 0 },
		"negative price":   func(m *order.Message) { m.Lines[0].Price = -1 },
		"bad activity":     func(m *order.Message) { m.Lines[0].ActivityID = "s/M/x" },
		"empty variant":    func(m *order.Message) { m.Lines[0].ActivityID = "s/" },
		"status set":       func(m *order.Message) { m.Lines[0].Status = order.OrderCancelled },
		"too many lines":   func(m *order.Message) { m.Lines = make([]order.Line, 65) },
		"long activity":    func(m *order.Message) { m.Lines[0].ActivityID = "s/" + strings.Repeat("v", 63) },
		"no room for #<i>": func(m *order.Message) { m.ReservationID = strings.Repeat("r", 127) },
	} {
		bad := cartMsg(1, "s", "u1", "s/M", 1, "b", 2)
		mut(&bad)
		assert.ErrorIs(t, bad.Validate(), order.ErrInvalidMessage, name)
		_, err := bad.Encode()
		if name != "version 3" { // Encode writes the version itself
			assert.ErrorIs(t, err, order.ErrInvalidMessage, name)
		}
	}
	_, err = order.Decode([]byte(`{"v":3,"msg_id":"m","reservation_id":"r","activity_id":"s","user_id":"u","qty":0,"lines":[{"activity":"b","qty":1}]}`))
	assert.ErrorIs(t, err, order.ErrInvalidMessage, "lines in a version-3 message")
}

// The consumer writes carts among plain messages (the cart on its own) and
// releases every line of a refused cart, "<id>#<i>" in its activity, once.
func TestConsumerCartReleasesLines(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		addCartActivities(t, db, 3, 10)
		led := newLedger()
		msgs := []order.Message{msg(0, "b", "u0"), cartMsg(1, "s", "u1", "s/M", 1, "b", 1), msg(2, "b", "u2"),
			cartMsg(3, "s", "u3", "s/L", 1, "b", 1)} // b has 3 units: the second cart finds none left
		var recs []order.Record
		for i, m := range msgs {
			if len(m.Lines) == 0 {
				led.reserve("b", Reservation{ID: m.ReservationID, User: m.UserID, Qty: 1})
			}
			for k, l := range m.Lines {
				led.reserve(l.ActivityID, Reservation{ID: m.ReservationID + "#" + strconv.Itoa(k), User: m.UserID, Qty: l.Qty})
			}
			recs = append(recs, kmsg(t, int64(i), m))
		}
		c, err := order.NewConsumer(newProc(t, db), led, order.WithBatchSize(4))
		require.NoError(t, err)
		sess := &fakeSession{ctx: context.Background()}
		require.NoError(t, runClaim(t, c, sess, recs))
		assert.EqualValues(t, 3, countOrders(t, db, ""))
		assert.EqualValues(t, 2, countRows(t, db, defaultTables().Line, ""))
		assert.Equal(t, map[string]int{"r-3#0": 1, "r-3#1": 1}, led.releasedByID(), "both lines of the refused cart, once")
		assert.EqualValues(t, 0, dbStock(t, db, "b"))
		assert.EqualValues(t, 2, dbStock(t, db, "s/M"))
		assert.EqualValues(t, 3, dbStock(t, db, "s/L"))
	})
}

// The sale's cap holds over its variants in the database: a line of
// "s/<v>" counts against the sale row's cap with the buyer's live lines of
// every variant of s (Redis counts it so too), not only against the
// variant row's own cap. A refunded-to-sale or cancelled line frees it.
func TestCartSaleCapOverVariants(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "s", 0, 2) // the sale: 2 units per buyer over its variants
		for _, a := range []string{"s/M", "s/L", "s/XL"} {
			addActivity(t, db, a, 10, 2)
		}
		addActivity(t, db, "s_", 0, 1) // a LIKE wildcard in another sale's ID: not s's variant
		addActivity(t, db, "s_/M", 10, 1)
		p := newProc(t, db)
		out, err := p.Handle(ctx, cartMsg(1, "s", "u1", "s/M", 1))
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status, out.Reason)
		out, err = p.Handle(ctx, cartMsg(2, "s", "u1", "s/L", 1))
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status, out.Reason)
		out, err = p.Handle(ctx, cartMsg(3, "s", "u1", "s/XL", 1))
		require.NoError(t, err)
		assert.Equal(t, order.ReasonLimit, out.Reason, "1 of M + 1 of L + 1 of XL > the sale's 2")
		out, err = p.Handle(ctx, cartMsg(4, "s", "u2", "s/M", 1, "s/L", 2))
		require.NoError(t, err)
		assert.Equal(t, order.ReasonLimit, out.Reason, "one cart's lines over the sale's 2")
		out, err = p.Handle(ctx, cartMsg(5, "s_", "u1", "s_/M", 1))
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status, "s_'s variants are not s's: %s", out.Reason)
		assert.EqualValues(t, 9, dbStock(t, db, "s/M"))
		assert.EqualValues(t, 9, dbStock(t, db, "s/L"))
		assert.EqualValues(t, 10, dbStock(t, db, "s/XL"))
	})
}
