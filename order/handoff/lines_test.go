package handoff

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
)

// A cart whose hand-off failed (Kafka and the fallback down) is fenced as
// one reservation and released line by line, "<id>#<i>" in each line's
// activity, once; its message arriving late is refused and deducts
// nothing. Without a Fence the releaser gets the lines the same way.
func TestSubmitCartReleasesLines(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "s", 0, 10)
		addActivity(t, db, "s/M", 10, 10)
		addActivity(t, db, "b", 10, 10)
		led := newLedger()
		led.reserve("s/M", Reservation{ID: "r-1#0", User: "7", Qty: 1})
		led.reserve("b", Reservation{ID: "r-1#1", User: "7", Qty: 2})
		fence, err := NewFence(db, led)
		require.NoError(t, err)
		down := errors.New("down")
		fail := func(context.Context, order.Message) error { return down }
		m := order.Message{ReservationID: "r-1", ActivityID: "s", UserID: "7",
			Lines: []order.Line{{ActivityID: "s/M", Qty: 1}, {ActivityID: "b", Qty: 2}}}
		s, err := NewSubmitter(fail, fail, fence)
		require.NoError(t, err)
		_, err = s.Submit(ctx, m)
		require.ErrorIs(t, err, ErrRetry)
		assert.Equal(t, map[string]int{"r-1#0": 1, "r-1#1": 1}, led.releasedByID())

		m.Version, m.MsgID = order.MessageVersion, "late"
		p, err := order.NewProcessor(db, newGen(t, 1))
		require.NoError(t, err)
		out, err := p.Handle(ctx, m)
		require.NoError(t, err)
		assert.Equal(t, order.StatusFailed, out.Status)
		assert.Equal(t, ReasonHandoff, out.Reason)
		var n int64
		require.NoError(t, db.Table("seckill_order").Count(&n).Error)
		assert.Zero(t, n)

		led2 := newLedger()
		led2.reserve("s/M", Reservation{ID: "r-2#0", User: "7", Qty: 1})
		led2.reserve("b", Reservation{ID: "r-2#1", User: "7", Qty: 2})
		s, err = NewSubmitter(fail, fail, led2)
		require.NoError(t, err)
		m.ReservationID, m.MsgID = "r-2", ""
		_, err = s.Submit(ctx, m)
		require.ErrorIs(t, err, ErrRetry)
		assert.Equal(t, map[string]int{"r-2#0": 1, "r-2#1": 1}, led2.releasedByID())
	})
}
