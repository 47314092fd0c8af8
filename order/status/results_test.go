package status

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
)

func TestResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			eachDB(t, func(t *testing.T, db *gorm.DB) {
				addActivity(t, db, "1", 10, 1)
				clock := newClock()
				r, err := NewResults(rdb, db, WithKeyPrefix(testenv.Prefix(t)+string(kind)+":"), WithClock(clock), WithResultTTL(time.Minute))
				require.NoError(t, err)

				got, err := r.Get(ctx, "1", "7")
				require.NoError(t, err)
				assert.Equal(t, order.StatusNone, got.Status)

				require.NoError(t, r.Set(ctx, order.Result{Activity: "1", User: "7", Status: order.StatusQueued, ReservationID: "r-1"}))
				got, err = r.Get(ctx, "1", "7")
				require.NoError(t, err)
				assert.Equal(t, order.StatusQueued, got.Status)
				assert.Equal(t, clock.Now().UnixMilli(), got.At.UnixMilli())

				require.NoError(t, r.Set(ctx, order.Result{Activity: "1", User: "7", Status: order.StatusSuccess, OrderNo: "42", ReservationID: "r-1"}))
				// a late QUEUED of the same reservation does not hide SUCCESS
				require.NoError(t, r.Set(ctx, order.Result{Activity: "1", User: "7", Status: order.StatusQueued, ReservationID: "r-1"}))
				got, err = r.Get(ctx, "1", "7")
				require.NoError(t, err)
				assert.Equal(t, order.StatusSuccess, got.Status)
				assert.Equal(t, "42", got.OrderNo)
				// a new reservation's QUEUED does
				require.NoError(t, r.Set(ctx, order.Result{Activity: "1", User: "7", Status: order.StatusQueued, ReservationID: "r-2"}))
				got, err = r.Get(ctx, "1", "7")
				require.NoError(t, err)
				assert.Equal(t, order.StatusQueued, got.Status)

				// DB fallback: Redis knows nothing of user 8 and 9
				p := newProc(t, db)
				out, err := p.Handle(ctx, msg(8, "1", uuidUser(8)))
				require.NoError(t, err)
				got, err = r.Get(ctx, "1", uuidUser(8))
				require.NoError(t, err)
				assert.Equal(t, order.StatusSuccess, got.Status)
				assert.Equal(t, out.OrderNo, got.OrderNo)

				_, err = p.Handle(ctx, msg(9, "99", "9")) // unknown activity: FAILED dedup row
				require.NoError(t, err)
				got, err = r.Get(ctx, "99", "9")
				require.NoError(t, err)
				assert.Equal(t, order.StatusFailed, got.Status)
				assert.Equal(t, order.ReasonUnknownActivity, got.Reason)
			})
		})
	}
}

func TestResultsTTLAndRedisDown(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		rdb, mr := testenv.Miniredis(t)
		addActivity(t, db, "1", 10, 1)
		r, err := NewResults(rdb, db, WithResultTTL(time.Minute))
		require.NoError(t, err)
		require.NoError(t, r.Set(ctx, order.Result{Activity: "1", User: "7", Status: order.StatusQueued, ReservationID: "r-7"}))
		mr.FastForward(2 * time.Minute)
		got, err := r.Get(ctx, "1", "7")
		require.NoError(t, err)
		assert.Equal(t, order.StatusNone, got.Status, "expired")

		_, err = newProc(t, db).Handle(ctx, msg(7, "1", "7"))
		require.NoError(t, err)
		mr.SetError("LOADING")
		got, err = r.Get(ctx, "1", "7")
		require.NoError(t, err, "the DB answers when Redis fails")
		assert.Equal(t, order.StatusSuccess, got.Status)
		assert.Error(t, r.Set(ctx, order.Result{Activity: "1", User: "7", Status: order.StatusQueued}))

		r2, err := NewResults(rdb, nil)
		require.NoError(t, err)
		_, err = r2.Get(ctx, "1", "7")
		assert.Error(t, err)
		assert.False(t, errors.Is(err, ErrOrderNotFound))
	})
}

// TestResultsOfCancelledOrder pins how a cancelled order reads, by the
// buyer (Get) and by its reservation (Reservation): FAILED with
// ReasonCancelled and its OrderNo kept — what tells "the order was
// cancelled" from "no order was made" (the fullstack service answers
// "cancelled" from it).
func TestResultsOfCancelledOrder(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		rdb, _ := testenv.Miniredis(t)
		addActivity(t, db, "1", 10, 1)
		r, err := NewResults(rdb, db, WithResultTTL(time.Minute))
		require.NoError(t, err)
		m := msg(1, "1", "7")
		o, err := newProc(t, db).Handle(ctx, m)
		require.NoError(t, err)
		require.NoError(t, r.Set(ctx, order.Result{Activity: "1", User: "7", Status: order.StatusSuccess, OrderNo: o.OrderNo, ReservationID: m.ReservationID}))
		require.NoError(t, db.Exec("UPDATE seckill_order SET status = ?, live_slot = NULL WHERE order_no = ?", order.OrderCancelled, o.OrderNo).Error)

		byUser, err := r.Get(ctx, "1", "7")
		require.NoError(t, err)
		byResv, err := r.Reservation(ctx, ResultQuery{Activity: "1", User: "7", ReservationID: m.ReservationID})
		require.NoError(t, err)
		for name, got := range map[string]order.Result{"Get": byUser, "Reservation": byResv} {
			assert.Equal(t, order.StatusFailed, got.Status, name)
			assert.Equal(t, ReasonCancelled, got.Reason, name)
			assert.Equal(t, o.OrderNo, got.OrderNo, name+": the cancelled order keeps its number")
			assert.Equal(t, m.ReservationID, got.ReservationID, name)
		}
	})
}
