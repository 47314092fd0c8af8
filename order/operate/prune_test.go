package operate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
)

func TestPruneDedupAndPrice(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		clock := newClock()
		p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
		require.NoError(t, err)
		m := msg(1, "1", "7")
		m.Price = 1234
		_, err = p.Handle(ctx, m)
		require.NoError(t, err)
		clock.Add(time.Hour)
		_, err = p.Handle(ctx, msg(2, "1", "8"))
		require.NoError(t, err)

		var orders []order.Order
		require.NoError(t, db.Order("user_id").Find(&orders).Error)
		require.Len(t, orders, 2)
		assert.Equal(t, order.Cents(1234), orders[0].Price, "message price")
		assert.Equal(t, order.Cents(990), orders[1].Price, "activity price")
		assert.Equal(t, "9.90", orders[1].Price.String())

		n, err := PruneDedup(ctx, db, clock.Now().Add(-time.Minute), 100)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		var left int64
		require.NoError(t, db.Model(&order.Dedup{}).Count(&left).Error)
		assert.EqualValues(t, 1, left)
		_, err = PruneDedup(ctx, db, clock.Now(), 0)
		assert.Error(t, err)
	})
}

// PruneDedup deletes only rows older than the horizon, at most limit per
// call, whatever their order in the table.
func TestPruneDedupLimitAndHorizon(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		base := testenv.Epoch()
		var rows []order.Dedup
		for i := 0; i < 15; i++ {
			at := base.Add(-time.Duration(i+1) * time.Hour) // 10 rows older than the horizon
			if i%3 == 0 {
				at = base.Add(time.Duration(i) * time.Minute) // 5 rows newer
			}
			rows = append(rows, order.Dedup{MsgID: fmt.Sprintf("z-%02d", 14-i), ReservationID: fmt.Sprintf("r-%d", i),
				ActivityID: "1", UserID: num(i + 1), Outcome: string(order.StatusSuccess), CreatedAt: at})
		}
		require.NoError(t, db.Create(&rows).Error)
		var got []int64
		for {
			n, err := PruneDedup(ctx, db, base, 4)
			require.NoError(t, err)
			got = append(got, n)
			if n == 0 {
				break
			}
		}
		assert.Equal(t, []int64{4, 4, 2, 0}, got)
		var left []order.Dedup
		require.NoError(t, db.Find(&left).Error)
		require.Len(t, left, 5)
		for _, d := range left {
			assert.False(t, d.CreatedAt.Before(base), "a row newer than the horizon survives: %s %v", d.MsgID, d.CreatedAt)
		}
	})
}
