package order

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order/orderid"
)

var (
	_ ResultsClient = (*redis.Client)(nil)
	_ ResultsClient = (*redis.ClusterClient)(nil)
	_ ResultsClient = (*redis.Ring)(nil)
	_ QueueClient   = (*redis.Client)(nil)
	_ QueueClient   = (*redis.ClusterClient)(nil)
	_ QueueClient   = (*redis.Ring)(nil)
	_ IDSource      = (*orderid.Generator)(nil)
	_ Scheduler     = (*Canceller)(nil)
	_ Ledger        = (*ledger)(nil)
)

var tagRe = regexp.MustCompile(`\{[^}]*\}`)

// Miniredis cannot check slots: assert every script's keys share one tag.
func TestScriptKeysShareTag(t *testing.T) {
	t.Parallel()
	for _, keys := range [][]string{
		{resultKey("seckill:", "42", "7")},
		{cancelQueueKey("seckill:")},
	} {
		tag := tagRe.FindString(keys[0])
		require.NotEmpty(t, tag, keys[0])
		for _, k := range keys[1:] {
			assert.Equal(t, tag, tagRe.FindString(k), k)
		}
	}
	assert.Equal(t, "seckill:{a:42}:result:7", resultKey("seckill:", "42", "7"))
}

func TestPruneDedupAndPrice(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		clock := newClock()
		p, err := NewProcessor(db, newGen(t, 1), WithClock(clock))
		require.NoError(t, err)
		m := msg(1, "1", "7")
		m.Price = 1234
		_, err = p.Handle(ctx, m)
		require.NoError(t, err)
		clock.Add(time.Hour)
		_, err = p.Handle(ctx, msg(2, "1", "8"))
		require.NoError(t, err)

		var orders []Order
		require.NoError(t, db.Order("user_id").Find(&orders).Error)
		require.Len(t, orders, 2)
		assert.Equal(t, Cents(1234), orders[0].Price, "message price")
		assert.Equal(t, Cents(990), orders[1].Price, "activity price")
		assert.Equal(t, "9.90", orders[1].Price.String())

		n, err := PruneDedup(ctx, db, clock.Now().Add(-time.Minute), 100)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		var left int64
		require.NoError(t, db.Model(&Dedup{}).Count(&left).Error)
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
		var rows []Dedup
		for i := 0; i < 15; i++ {
			at := base.Add(-time.Duration(i+1) * time.Hour) // 10 rows older than the horizon
			if i%3 == 0 {
				at = base.Add(time.Duration(i) * time.Minute) // 5 rows newer
			}
			rows = append(rows, Dedup{MsgID: fmt.Sprintf("z-%02d", 14-i), ReservationID: fmt.Sprintf("r-%d", i),
				ActivityID: "1", UserID: num(i + 1), Outcome: string(StatusSuccess), CreatedAt: at})
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
		var left []Dedup
		require.NoError(t, db.Find(&left).Error)
		require.Len(t, left, 5)
		for _, d := range left {
			assert.False(t, d.CreatedAt.Before(base), "a row newer than the horizon survives: %s %v", d.MsgID, d.CreatedAt)
		}
	})
}
