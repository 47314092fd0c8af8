package payment

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/seckillkit/seckill/order"
)

// The capture of an order with lines takes its live lines at their prices
// (a line cancelled before the capture is not charged); a plain order its
// units at its price.
func TestAuthOfLines(t *testing.T) {
	cart := order.Order{ActivityID: "s", UserID: "7", ReservationID: "r", Lines: []order.Line{
		{ActivityID: "s/M", Qty: 1, Price: 990}, {ActivityID: "b", Qty: 2, Price: 500, Status: order.OrderCancelled},
		{ActivityID: "b", Qty: 3, Price: 100}}}
	assert.Equal(t, order.Cents(990+300), authOf(cart).Amount)
	assert.Equal(t, order.Cents(1980), authOf(order.Order{Qty: 2, Price: 990}).Amount)
}
