package stock

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLookupWhileFrozen: a frozen activity's ledger may have lost entries
// with the rest of Redis's state (a restart, a failover), so an ID it does
// not hold is not "never reserved": Lookup fails with ErrFrozen instead of
// answering absent, and answers again after Unfreeze. An entry it does hold
// is returned as usual. Before, Lookup answered "not found" while frozen,
// and the reference service then refused the retry of an attempt whose
// message was still in Kafka, which became an order (crash test
// TestKillServiceEmbedded, seen in CI: "1 refused attempts became orders").
func TestLookupWhileFrozen(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		for _, shards := range []int{1, 3} {
			t.Run("shards="+strconv.Itoa(shards), func(t *testing.T) {
				d := newTestDeductor(t, rdb, prefix)
				a := Activity{ID: "lf" + strconv.Itoa(shards), Stock: 10, PerUserLimit: 1, Shards: shards}
				mustLoad(t, d, a)
				reserveOK(t, d, a.ID, "1", 1, "held-1")

				_, ok, err := d.Lookup(ctx, a.ID, "never")
				require.NoError(t, err)
				require.False(t, ok)

				require.NoError(t, d.Freeze(ctx, a.ID))
				r, ok, err := d.Lookup(ctx, a.ID, "held-1")
				require.NoError(t, err, "an entry the ledger holds is an answer")
				require.True(t, ok)
				assert.Equal(t, "held-1", r.ID)
				_, ok, err = d.Lookup(ctx, a.ID, "never")
				require.ErrorIs(t, err, ErrFrozen, "absence from a frozen ledger proves nothing")
				assert.False(t, ok)

				require.NoError(t, d.Unfreeze(ctx, a.ID))
				_, ok, err = d.Lookup(ctx, a.ID, "never")
				require.NoError(t, err)
				assert.False(t, ok)
			})
		}
	})
}
