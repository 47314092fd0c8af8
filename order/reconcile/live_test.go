package reconcile

import (
	"context"
	"testing"

	"github.com/seckillkit/seckill/order"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func TestLiveReservations(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		p, err := order.NewProcessor(db, newGen(t, 1))
		require.NoError(t, err)
		for i := 0; i < 4; i++ {
			_, err := p.Handle(ctx, msg(i, "1", num(10+i)))
			require.NoError(t, err)
		}
		require.NoError(t, db.Exec("UPDATE seckill_order SET status = ?, live_slot = NULL WHERE reservation_id = ?", order.OrderCancelled, "r-1").Error)
		require.NoError(t, db.Exec("UPDATE seckill_order SET status = ? WHERE reservation_id = ?", order.OrderPaid, "r-2").Error)
		live, err := LiveReservations(ctx, db, "1")
		require.NoError(t, err)
		ids := map[string]string{}
		for _, r := range live {
			ids[r.ID] = r.User
			assert.EqualValues(t, 1, r.Qty)
		}
		assert.Equal(t, map[string]string{"r-0": "10", "r-2": "12", "r-3": "13"}, ids, "created and paid, not cancelled")
	})
}
