package status

import (
	"context"
	"testing"

	"github.com/seckillkit/seckill/order"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func TestOrdersReadAndAct(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "sale", 10, 2)
		clock := newClock()
		p := newProc(t, db, order.WithClock(clock))
		m3 := msg(3, "sale", "ann")
		m3.Ext = []byte(`{"coupon":"X1"}`)
		outs := mustProcess(t, p, []order.Message{msg(1, "sale", "ann"), msg(2, "sale", "bob")})
		o3, err := p.Handle(ctx, m3)
		require.NoError(t, err)
		rel := newLedger()
		c, err := NewCanceller(db, nil, rel, WithClock(clock))
		require.NoError(t, err)
		orders, err := NewOrders(db)
		require.NoError(t, err)

		got, err := orders.Get(ctx, outs[0].OrderNo)
		require.NoError(t, err)
		assert.Equal(t, [5]string{outs[0].OrderNo, "r-1", "ann", "sale", order.OrderCreated},
			[5]string{got.OrderNo, got.ReservationID, got.UserID, got.ActivityID, got.Status})
		assert.EqualValues(t, 990, got.Price)
		assert.Nil(t, got.Headers)
		byResv, err := orders.ByReservation(ctx, "r-3")
		require.NoError(t, err)
		assert.Equal(t, o3.OrderNo, byResv.OrderNo)
		assert.JSONEq(t, `{"coupon":"X1"}`, string(byResv.Ext))
		_, err = orders.Get(ctx, "404")
		assert.ErrorIs(t, err, ErrOrderNotFound)
		_, err = orders.ByReservation(ctx, "")
		assert.ErrorIs(t, err, ErrOrderNotFound)

		// Paid and cancelled through the canceller: Orders reads the rows.
		require.NoError(t, c.Pay(ctx, outs[0].OrderNo))
		assert.ErrorIs(t, c.Pay(ctx, outs[0].OrderNo), ErrAlreadyPaid)
		require.NoError(t, c.Cancel(ctx, o3.OrderNo))
		assert.EqualValues(t, 1, rel.calls, "the cancel released the reservation")
		anns, err := orders.ByUser(ctx, "sale", "ann")
		require.NoError(t, err)
		require.Len(t, anns, 2)
		assert.Equal(t, [2]string{outs[0].OrderNo, o3.OrderNo}, [2]string{anns[0].OrderNo, anns[1].OrderNo})
		assert.Equal(t, [2]string{order.OrderPaid, order.OrderCancelled}, [2]string{anns[0].Status, anns[1].Status})
		assert.EqualValues(t, 1, rowCount(t, db, defaultTables().Order, "status = ?", order.OrderPaid))
		assert.EqualValues(t, 1, rowCount(t, db, defaultTables().Order, "status = ?", order.OrderCancelled))
		checkConservation(t, db, "sale", 10)
		none, err := orders.ByUser(ctx, "sale", "nobody")
		require.NoError(t, err)
		assert.Empty(t, none)
		_, err = orders.ByUser(ctx, "sale", "bad user")
		assert.ErrorIs(t, err, order.ErrInvalidID)

		assert.EqualValues(t, 1, rowCount(t, db, defaultTables().Order, "status = ?", order.OrderCreated))
		_, err = NewOrders(nil)
		assert.ErrorIs(t, err, order.ErrInvalidConfig)
	})
}

// Orders reads the tables WithTables names.
func TestOrdersWithTables(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		opt := order.WithTables(otherTables)
		require.NoError(t, order.AutoMigrate(ctx, db, opt))
		addActivityIn(t, db, otherTables, "1", 5, 1)
		p := newProc(t, db, opt)
		o, err := p.Handle(ctx, msg(1, "1", "u"))
		require.NoError(t, err)
		other, err := NewOrders(db, WithTables(otherTables))
		require.NoError(t, err)
		got, err := other.Get(ctx, o.OrderNo)
		require.NoError(t, err)
		assert.Equal(t, "u", got.UserID)
		def, err := NewOrders(db)
		require.NoError(t, err)
		_, err = def.Get(ctx, o.OrderNo)
		assert.ErrorIs(t, err, ErrOrderNotFound)
	})
}
