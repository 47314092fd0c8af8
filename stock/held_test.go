package stock_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/stock"
)

// Held follows the buyers hash through reserve and release, and agrees with
// what the hash holds when read directly.
func TestHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			prefix := testenv.Prefix(t) + string(kind) + ":"
			d, err := stock.New(rdb, stock.WithKeyPrefix(prefix), stock.WithoutSoldOutCache())
			require.NoError(t, err)
			_, err = d.Held(ctx, "1", "7")
			require.ErrorIs(t, err, stock.ErrNotLoaded)
			_, err = d.Load(ctx, stock.Activity{ID: "1", Stock: 10, PerUserLimit: 3})
			require.NoError(t, err)

			held := func() int64 {
				n, err := d.Held(ctx, "1", "7")
				require.NoError(t, err)
				raw, err := rdb.HGet(ctx, fmt.Sprintf("%s{a:1}:buyers", prefix), "7").Int64()
				if err != nil {
					raw = 0
				}
				assert.Equal(t, raw, n, "Held = the buyers hash")
				return n
			}
			assert.Zero(t, held())
			res, err := d.Reserve(ctx, stock.Request{Activity: "1", User: "7", Qty: 2, ReservationID: "a"})
			require.NoError(t, err)
			require.True(t, (res.Status == stock.Reserved))
			assert.EqualValues(t, 2, held())
			_, err = d.Release(ctx, "1", "a")
			require.NoError(t, err)
			assert.Zero(t, held(), "a released reservation holds nothing")
			_, err = d.Held(ctx, "", "7")
			require.ErrorIs(t, err, stock.ErrInvalidArgument)
			_, err = d.Held(ctx, "1", "7:1")
			require.ErrorIs(t, err, stock.ErrInvalidArgument)
		})
	}
}
