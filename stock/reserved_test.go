package stock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loseWrite undoes reservation id in ledger k as a failover to a replica
// that missed the write would: the ledger entry is gone and its units are
// back in stock and off the buyer's held quantity.
func loseWrite(t *testing.T, rdb redis.UniversalClient, k keys, id, user string, qty int64) {
	t.Helper()
	ctx := context.Background()
	n, err := rdb.HDel(ctx, k.ledger, id).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "reservation %s not in %s", id, k.ledger)
	require.NoError(t, rdb.HIncrBy(ctx, k.meta, "stock", qty).Err())
	held, err := rdb.HIncrBy(ctx, k.buyers, user, -qty).Result()
	require.NoError(t, err)
	if held <= 0 {
		require.NoError(t, rdb.HDel(ctx, k.buyers, user).Err())
	}
}

// shardHolding returns the keys of the shard of a whose ledger holds id.
func shardHolding(t *testing.T, rdb redis.UniversalClient, prefix string, a Activity, id string) keys {
	t.Helper()
	for k := 0; k < a.Shards; k++ {
		sk := shardKeys(prefix, a.ID, a.Shards, k)
		if _, ok := hgetall(t, rdb, sk.ledger)[id]; ok {
			return sk
		}
	}
	t.Fatalf("reservation %s in no shard of %s", id, a.ID)
	return keys{}
}

// TestReleaseReservedLost is finding F12l: a failover lost an acknowledged
// reservation (its order exists) and the fence did not see seq go back.
// Release of it would write a tombstone ("released before reserved") and
// hide the loss; ReleaseReserved, told the reservation was made, freezes
// the activity, reports the loss once and answers ErrLost, writing
// nothing to the ledger. After a Rebuild (a copy newer than the
// reservation) the same call is a no-op: ReleaseRebuilt.
func TestReleaseReservedLost(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		for _, shards := range []int{1, 3} {
			t.Run("shards="+strconv.Itoa(shards), func(t *testing.T) {
				var losses lossLog
				d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
				a := Activity{ID: "rr" + strconv.Itoa(shards), Stock: 10, PerUserLimit: 2, Shards: shards}
				mustLoad(t, d, a)
				k := activityKeys(prefix, a.ID)
				res := reserveOK(t, d, a.ID, "1", 2, "r1")
				reserveOK(t, d, a.ID, "2", 1, "r2")
				if shards > 1 {
					k = shardHolding(t, rdb, prefix, a, "r1")
				}
				before := hint(t, rdb, k.meta, "seq")
				loseWrite(t, rdb, k, "r1", "1", 2)
				stockBefore := hint(t, rdb, k.meta, "stock")

				other := newTestDeductor(t, rdb, prefix) // a process that saw nothing

				p := ReleaseReservedParams{Activity: a.ID, ReservationID: "r1", ReservedBy: res.ReservedAt}
				out, err := d.ReleaseReserved(ctx, p)
				require.ErrorIs(t, err, ErrLost)
				assert.Zero(t, out.Status)
				_, ok := hgetall(t, rdb, k.ledger)["r1"]
				assert.False(t, ok, "no tombstone written")
				assert.Equal(t, before, hint(t, rdb, k.meta, "seq"), "seq not bumped")
				assert.Equal(t, stockBefore, hint(t, rdb, k.meta, "stock"), "stock unchanged")
				st, err := d.Stats(ctx, a.ID)
				require.NoError(t, err)
				assert.True(t, st.Frozen, "activity frozen")
				require.Len(t, losses.get(a.ID), 1)
				assert.Contains(t, losses.get(a.ID)[0], "r1")

				// A retry before the rebuild: still lost, reported once.
				_, err = d.ReleaseReserved(ctx, p)
				require.ErrorIs(t, err, ErrLost)
				assert.Len(t, losses.get(a.ID), 1, "reported once")
				// A fresh process sees it too (the evidence is in Redis).
				_, err = other.ReleaseReserved(ctx, p)
				require.ErrorIs(t, err, ErrLost)

				// The database's truth: r2 live, r1's order cancelled.
				_, err = d.Rebuild(ctx, a, []Reservation{{ID: "r2", User: "2", Qty: 1, ReservedAt: res.ReservedAt}})
				require.NoError(t, err)
				born := hint(t, rdb, activityKeys(prefix, a.ID).meta, "born")
				for k := 0; k < shards && shards > 1; k++ {
					b := hint(t, rdb, shardKeys(prefix, a.ID, shards, k).meta, "born")
					if k == 0 || b < born {
						born = b // the oldest shard decides
					}
				}
				// Made before the rebuild: nothing to release.
				p.ReservedBy = time.UnixMilli(born - 1)
				out, err = d.ReleaseReserved(ctx, p)
				require.NoError(t, err)
				assert.Equal(t, ReleaseRebuilt, out.Status)
				assert.Equal(t, "rebuilt", out.Status.String())
				for _, led := range ledgers(prefix, a) {
					_, ok := hgetall(t, rdb, led)["r1"]
					assert.False(t, ok, "no tombstone after the rebuild either")
				}
				st, err = d.Stats(ctx, a.ID)
				require.NoError(t, err)
				assert.False(t, st.Frozen)
				assert.EqualValues(t, 9, st.Remaining, "total 10 minus r2")
				assert.Len(t, losses.get(a.ID), 1, "no new report")

				// A held entry is released exactly once.
				r3 := reserveOK(t, d, a.ID, "3", 2, "r3")
				out, err = d.ReleaseReserved(ctx, ReleaseReservedParams{Activity: a.ID, ReservationID: "r3", ReservedBy: r3.ReservedAt})
				require.NoError(t, err)
				assert.Equal(t, ReleaseDone, out.Status)
				assert.EqualValues(t, 2, out.Qty)
				out, err = d.ReleaseReserved(ctx, ReleaseReservedParams{Activity: a.ID, ReservationID: "r3", ReservedBy: r3.ReservedAt})
				require.NoError(t, err)
				assert.Equal(t, ReleaseDuplicate, out.Status)
				st, err = d.Stats(ctx, a.ID)
				require.NoError(t, err)
				assert.EqualValues(t, 9, st.Remaining, "r3's units back once")
				assert.Len(t, losses.get(a.ID), 1)
			})
		}
	})
}

// ledgers returns the ledger keys of a's layout.
func ledgers(prefix string, a Activity) []string {
	if a.Shards <= 1 {
		return []string{activityKeys(prefix, a.ID).ledger}
	}
	out := make([]string, a.Shards)
	for k := range out {
		out[k] = shardKeys(prefix, a.ID, a.Shards, k).ledger
	}
	return out
}

func TestReleaseReservedInvalid(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		d := newTestDeductor(t, rdb, prefix)
		_, err := d.ReleaseReserved(context.Background(), ReleaseReservedParams{Activity: "1", ReservationID: "r1"})
		assert.ErrorIs(t, err, ErrInvalidArgument)
		_, err = d.ReleaseReserved(context.Background(), ReleaseReservedParams{Activity: "", ReservationID: "r1", ReservedBy: time.Unix(1, 0)})
		assert.ErrorIs(t, err, ErrInvalidArgument)
	})
}
