package stock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// usersOn returns count numeric user IDs, from from upwards, whose shard
// of n is k.
func usersOn(n, k, count int, from int64) []string {
	return usersOnID(n, k, count, from, uid[int64])
}

// usersOnID is usersOn for the user IDs id(from), id(from+1), …
func usersOnID(n, k, count int, from int64, id func(int64) string) []string {
	out := make([]string, 0, count)
	for u := from; len(out) < count; u++ {
		if s := id(u); shardOf(s, n) == k {
			out = append(out, s)
		}
	}
	return out
}

// shardCount is a sharded activity read straight from Redis (HGET, HGETALL
// on every shard's hashes), not through the Deductor.
type shardCount struct {
	stock      []int64            // meta stock per shard
	held       int64              // units in held (R) ledger entries, all shards
	heldBy     []map[string]int64 // per shard: user -> units held per the ledger
	buyers     []map[string]int64 // per shard: the buyers hash
	entries    map[string]int     // reservation ID -> shard of its held or freed entry
	records    map[string]string  // reservation ID -> that entry
	inTransfer int64              // units of pending records not applied at their recipient
	counters   int64              // Σ out - Σ in of the meta counters
	pending    int                // pending transfer records
}

func countShards(t testing.TB, rdb redis.UniversalClient, prefix, activity string, n int) shardCount {
	t.Helper()
	c := shardCount{stock: make([]int64, n), heldBy: make([]map[string]int64, n), buyers: make([]map[string]int64, n),
		entries: map[string]int{}, records: map[string]string{}}
	xins := make([]map[string]string, n)
	for k := range n {
		ks := shardKeys(prefix, activity, n, k)
		meta := hgetall(t, rdb, ks.meta)
		c.stock[k] = atoi(t, meta["stock"])
		c.counters += atoi(t, meta["out"]) - atoi(t, meta["in"])
		c.heldBy[k] = map[string]int64{}
		for id, rec := range hgetall(t, rdb, ks.ledger) {
			r, err := parseRecord(id, rec)
			require.NoError(t, err)
			if r.State == Held {
				c.held += r.Qty
				c.heldBy[k][r.User] += r.Qty
			}
			if r.State != Tombstone {
				_, dup := c.entries[id]
				require.False(t, dup, "reservation ID %s has an entry in two shards", id)
				c.entries[id], c.records[id] = k, rec
			}
		}
		c.buyers[k] = map[string]int64{}
		for u, q := range hgetall(t, rdb, ks.buyers) {
			require.True(t, ValidID(u), "buyer %q", u)
			c.buyers[k][u] = atoi(t, q)
		}
		xins[k] = hgetall(t, rdb, ks.xin)
	}
	for k := range n {
		for id, rec := range hgetall(t, rdb, shardKeys(prefix, activity, n, k).xout) {
			c.pending++
			to, q, _, err := parseTransfer(rec, n)
			require.NoError(t, err)
			if !strings.HasPrefix(xins[to][id], "A") {
				c.inTransfer += q
			}
		}
	}
	return c
}

func atoi(t testing.TB, s string) int64 {
	t.Helper()
	if s == "" {
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, s)
	return v
}

// requireConserved checks, on the counted state, that no unit was created
// or lost: Σ remaining + Σ held + units in transfer = loaded; that the meta
// counters agree with the transfer records; and that each shard's buyers
// hash is what its ledger holds.
func requireConserved(t testing.TB, c shardCount, loaded int64) {
	t.Helper()
	var remaining int64
	for _, s := range c.stock {
		require.GreaterOrEqual(t, s, int64(0), "a shard's stock went negative")
		remaining += s
	}
	require.Equal(t, loaded, remaining+c.held+c.inTransfer,
		"remaining %d + held %d + in transfer %d", remaining, c.held, c.inTransfer)
	require.Equal(t, c.inTransfer, c.counters, "Σ out - Σ in of the meta counters")
	for k := range c.buyers {
		require.Equal(t, c.heldBy[k], c.buyers[k], "shard %d: buyers hash vs ledger", k)
	}
}

// TestShardedSale: 12,000 buyers (3,000 for multi-quantity) against 1,000
// units over 3 and 6 shards, the buyers skewed so that most of them hash to
// shard 0 (drained early, it must borrow), one-by-one and coalesced, on
// every Redis available. Counted from Redis: exactly the stock is sold, no
// shard goes negative, every buyer within the cap (each buyer's units in
// one shard), nothing in transfer and nothing pending at the end, Σ
// remaining + Σ held + in transfer = loaded after each phase. Then 100
// releases go back to the reservation's own shard, exactly, and 100 new
// buyers of other shards buy them again by borrowing.
func TestShardedSale(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		for _, sc := range []struct {
			name     string
			n        int
			limit    int64
			buyers   int
			coalesce bool
			user     func(int64) string
		}{
			{"3 shards", 3, 1, 12000, false, uid[int64]},
			{"6 shards uuid users", 6, 1, 12000, false, uuidOf[int64]},
			{"3 shards coalesced uuid users", 3, 1, 12000, true, uuidOf[int64]},
			{"6 shards cap 3 qty 1-3", 6, 3, 3000, false, uid[int64]},
		} {
			t.Run(sc.name, func(t *testing.T) {
				runShardedSale(t, rdb, prefix+strconv.Itoa(sc.n)+strconv.FormatBool(sc.coalesce)+strconv.FormatInt(sc.limit, 10)+":",
					sc.n, sc.limit, sc.buyers, sc.coalesce, sc.user)
			})
		}
	})
}

func runShardedSale(t *testing.T, rdb redis.UniversalClient, prefix string, n int, limit int64, buyers int, coalesce bool,
	user func(int64) string) {
	ctx := context.Background()
	const activity, stock = "7", 1000
	// The sold-out flag's re-check runs on a clock that stands still.
	opts := []DeductorOption{WithClock(testenv.NewEpochClock(0))}
	if coalesce {
		opts = append(opts, WithCoalescing(200*time.Microsecond, 32))
	}
	d := newTestDeductor(t, rdb, prefix, opts...)
	mustLoad(t, d, Activity{ID: activity, Stock: stock, PerUserLimit: limit, Shards: n})

	// Skew: 70% of the buyers on shard 0, the rest spread over the others.
	var users []string
	hot := buyers * 7 / 10
	users = append(users, usersOnID(n, 0, hot, 1, user)...)
	for k := 1; k < n; k++ {
		users = append(users, usersOnID(n, k, (buyers-hot)/(n-1), 1, user)...)
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(limit)))
	rng.Shuffle(len(users), func(i, j int) { users[i], users[j] = users[j], users[i] })

	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		sem       = make(chan struct{}, inflight)
		reserved  atomic.Int64
		mu        sync.Mutex
		errs      []error
		perBuyer  = map[string]int64{}
		reqShards = map[string]int{}
	)
	for i, u := range users {
		// Multi-quantity: each buyer asks until refused, 1..3 units at a time.
		for j := range int(limit) {
			qty := int64(1)
			if limit > 1 {
				qty = 1 + int64((i+j)%3)
			}
			id := fmt.Sprintf("r%s-%d", u, j)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				sem <- struct{}{}
				defer func() { <-sem }()
				res, err := d.Reserve(ctx, Request{Activity: activity, User: u, Qty: qty, ReservationID: id})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case res.Status == Reserved:
					reserved.Add(qty)
					perBuyer[u] += qty
					reqShards[id] = shardOf(u, n)
				case res.Status != SoldOut && res.Status != LimitReached:
					errs = append(errs, fmt.Errorf("%s: status %v", id, res.Status))
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	require.Empty(t, firstN(errs, 5))

	c := countShards(t, rdb, prefix, activity, n)
	requireConserved(t, c, stock)
	assert.EqualValues(t, stock, reserved.Load(), "sold = stock, from the answers")
	assert.EqualValues(t, stock, c.held, "sold = stock, from the ledgers")
	for k, s := range c.stock {
		assert.Zero(t, s, "shard %d left unsold", k)
	}
	assert.Zero(t, c.pending, "no transfer left pending")
	for u, q := range perBuyer {
		assert.LessOrEqual(t, q, limit, "buyer %s above the cap", u)
		assert.Equal(t, q, c.heldBy[shardOf(u, n)][u], "buyer %s holds in its own shard", u)
	}
	for id, k := range reqShards {
		assert.Equal(t, k, c.entries[id], "%s in its buyer's shard", id)
	}
	st, err := d.Stats(ctx, activity)
	require.NoError(t, err)
	assert.True(t, st.Loaded)
	assert.Zero(t, st.Remaining)
	assert.EqualValues(t, stock, st.Total)
	assert.Zero(t, st.InTransfer)
	require.Len(t, st.Shards, n)
	assert.Positive(t, st.Shards[0].TransfersIn, "the hot shard borrowed")
	assert.EqualValues(t, st.TransfersOut, st.TransfersIn)
	var alloc int64
	for _, s := range st.Shards {
		alloc += s.Total
	}
	assert.EqualValues(t, stock, alloc)
	rem, err := d.Remaining(ctx, activity)
	require.NoError(t, err)
	assert.Zero(t, rem)

	// Releases go back to the reservation's shard.
	ids := make([]string, 0, len(reqShards))
	for id := range reqShards {
		ids = append(ids, id)
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	back := make([]int64, n)
	var freed int64
	for _, id := range ids[:100] {
		rr, err := d.Release(ctx, activity, id)
		require.NoError(t, err)
		require.Equal(t, ReleaseDone, rr.Status, id)
		assert.Equal(t, reqShards[id], shardOf(rr.User, n))
		back[reqShards[id]] += rr.Qty
		freed += rr.Qty
	}
	c = countShards(t, rdb, prefix, activity, n)
	requireConserved(t, c, stock)
	assert.Equal(t, back, c.stock, "each released unit is back in its reservation's shard")
	assert.False(t, d.SoldOut(activity), "the release cleared the sold-out flag")

	// New buyers, all on the last shard, buy them again by borrowing.
	var again int64
	for _, u := range usersOnID(n, n-1, int(freed)+20, 1_000_000, user) {
		res, err := d.Reserve(ctx, Request{Activity: activity, User: u, Qty: 1, ReservationID: fmt.Sprint("again", u)})
		require.NoError(t, err)
		if res.Status == Reserved {
			again++
		} else {
			require.Equal(t, SoldOut, res.Status)
		}
	}
	assert.Equal(t, freed, again)
	c = countShards(t, rdb, prefix, activity, n)
	requireConserved(t, c, stock)
	assert.EqualValues(t, stock, c.held)
	assert.Zero(t, c.pending)
	assert.True(t, d.SoldOut(activity), "sold out once every shard is empty")
}

// loadThree loads an activity of 30 units over 3 shards (10 each) and
// returns the Deductor's layout of it.
func loadThree(t *testing.T, d *Deductor, activity string) *layout {
	t.Helper()
	mustLoad(t, d, Activity{ID: activity, Stock: 30, PerUserLimit: 5, Shards: 3})
	l := d.layoutOf(activity)
	require.NotNil(t, l)
	require.Equal(t, 3, l.n)
	return l
}

func shardEpoch(t *testing.T, rdb redis.UniversalClient, l *layout, k int) int64 {
	t.Helper()
	return hint(t, rdb, l.keys[k].meta, "epoch")
}

// TestTransferKilled kills a transfer between its steps (by running only
// the first ones) and recovers it, counting the units in Redis at each
// point: never created, never lost.
func TestTransferKilled(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)

		t.Run("after step 1: refunded", func(t *testing.T) {
			l := loadThree(t, d, "1")
			q, err := d.give(ctx, l, 0, 1, "t1", 4, shardEpoch(t, rdb, l, 1))
			require.NoError(t, err)
			require.EqualValues(t, 5, q, "half of 10")
			c := countShards(t, rdb, prefix, "1", 3)
			requireConserved(t, c, 30)
			assert.Equal(t, []int64{5, 10, 10}, c.stock)
			assert.EqualValues(t, 5, c.inTransfer)
			st, err := d.Stats(ctx, "1")
			require.NoError(t, err)
			assert.EqualValues(t, 5, st.InTransfer)
			assert.EqualValues(t, 1, st.PendingTransfers)
			rem, err := d.Remaining(ctx, "1")
			require.NoError(t, err)
			assert.EqualValues(t, 30, rem, "units in transfer are not sold")

			n, err := d.SettleTransfers(ctx, "1")
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			c = countShards(t, rdb, prefix, "1", 3)
			requireConserved(t, c, 30)
			assert.Equal(t, []int64{10, 10, 10}, c.stock, "refunded to the donor")
			assert.Zero(t, c.pending)
			assert.True(t, strings.HasPrefix(hgetall(t, rdb, l.keys[1].xin)["t1"], "V:"), "voided at the recipient")

			// The interrupted process wakes up and runs its step 2: refused.
			applied, err := d.credit(ctx, l, 1, 0, "t1", 5, shardEpoch(t, rdb, l, 1), true)
			require.NoError(t, err)
			assert.False(t, applied)
			require.NoError(t, d.settle(ctx, l, 0, "t1", applied))
			c = countShards(t, rdb, prefix, "1", 3)
			requireConserved(t, c, 30)
			assert.Equal(t, []int64{10, 10, 10}, c.stock, "a late step changes nothing")
			n, err = d.SettleTransfers(ctx, "1")
			require.NoError(t, err)
			assert.Zero(t, n)
		})

		t.Run("after step 2: kept where it went", func(t *testing.T) {
			l := loadThree(t, d, "2")
			e1 := shardEpoch(t, rdb, l, 1)
			q, err := d.give(ctx, l, 0, 1, "t2", 1, e1)
			require.NoError(t, err)
			applied, err := d.credit(ctx, l, 1, 0, "t2", q, e1, true)
			require.NoError(t, err)
			require.True(t, applied)
			applied, err = d.credit(ctx, l, 1, 0, "t2", q, e1, true)
			require.NoError(t, err)
			require.True(t, applied, "step 2 again: applied once")
			c := countShards(t, rdb, prefix, "2", 3)
			requireConserved(t, c, 30)
			assert.Equal(t, []int64{5, 15, 10}, c.stock)
			assert.Equal(t, 1, c.pending)
			assert.Zero(t, c.inTransfer, "credited, though not settled")

			n, err := d.SettleTransfers(ctx, "2")
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			c = countShards(t, rdb, prefix, "2", 3)
			requireConserved(t, c, 30)
			assert.Equal(t, []int64{5, 15, 10}, c.stock, "not refunded: it was applied")
			assert.Zero(t, c.pending)
		})

		t.Run("recipient replaced: refunded", func(t *testing.T) {
			l := loadThree(t, d, "3")
			_, err := d.give(ctx, l, 2, 0, "t3", 1, shardEpoch(t, rdb, l, 0)+1) // an epoch shard 0 does not have
			require.NoError(t, err)
			applied, err := d.credit(ctx, l, 0, 2, "t3", 5, shardEpoch(t, rdb, l, 0)+1, true)
			require.NoError(t, err)
			assert.False(t, applied, "a copy of another epoch never receives the units")
			require.NoError(t, d.settle(ctx, l, 2, "t3", applied))
			c := countShards(t, rdb, prefix, "3", 3)
			requireConserved(t, c, 30)
			assert.Equal(t, []int64{10, 10, 10}, c.stock)
		})

		t.Run("a sale finishes it", func(t *testing.T) {
			// Killed after step 1, with no grace: the next borrow finishes it.
			dz := newTestDeductor(t, rdb, prefix, WithTransferGrace(0))
			l := loadThree(t, dz, "4")
			_, err := dz.give(ctx, l, 0, 1, "t4", 1, shardEpoch(t, rdb, l, 1))
			require.NoError(t, err)
			sold := 0
			for _, u := range usersOn(3, 2, 40, 1) {
				for j := range 5 {
					res, err := dz.Reserve(ctx, Request{Activity: "4", User: u, Qty: 1, ReservationID: fmt.Sprint(u, "-", j)})
					require.NoError(t, err)
					if res.Status == Reserved {
						sold++
					}
				}
			}
			assert.Equal(t, 30, sold, "the units of the killed transfer were sold too")
			c := countShards(t, rdb, prefix, "4", 3)
			requireConserved(t, c, 30)
			assert.Zero(t, c.pending)
			assert.Equal(t, []int64{0, 0, 0}, c.stock)
		})
	})
}

// TestStaleTransferByRedisTime: a transfer killed after step 1 holds its
// units until it is older than the grace, measured on Redis TIME; then the
// borrow of a buyer who needs them finishes it and sells them. miniredis's
// clock is moved, from testenv.Epoch, never the wall clock.
func TestStaleTransferByRedisTime(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	ctx := context.Background()
	now := testenv.Epoch()
	m.SetTime(now)
	d := newTestDeductor(t, rdb, testenv.Prefix(t), WithTransferGrace(2*time.Second), WithClock(testenv.NewEpochClock(0)))
	mustLoad(t, d, Activity{ID: "1", Stock: 4, Shards: 2}) // 2 + 2
	l := d.layoutOf("1")
	q, err := d.give(ctx, l, 0, 1, "killed", 1, shardEpoch(t, rdb, l, 1))
	require.NoError(t, err)
	require.EqualValues(t, 1, q)

	buy := func(u string) Result {
		res, err := d.Reserve(ctx, Request{Activity: "1", User: u, Qty: 1, ReservationID: fmt.Sprint(u)})
		require.NoError(t, err)
		return res
	}
	on1 := usersOn(2, 1, 10, 1)
	for _, u := range on1[:3] {
		require.Equal(t, Reserved, buy(u).Status) // 2 of shard 1, then 1 borrowed from shard 0
	}
	res := buy(on1[3])
	assert.Equal(t, SoldOut, res.Status)
	assert.EqualValues(t, 1, res.Remaining, "one unit in transfer: not sold out")
	assert.False(t, d.SoldOut("1"))

	m.SetTime(now.Add(1999 * time.Millisecond))
	assert.Equal(t, SoldOut, buy(on1[4]).Status, "younger than the grace: left to its owner")
	m.SetTime(now.Add(2 * time.Second))
	assert.Equal(t, Reserved, buy(on1[5]).Status, "stale: refunded to shard 0, then borrowed")
	res = buy(on1[6])
	assert.Equal(t, SoldOut, res.Status)
	assert.Zero(t, res.Remaining)
	assert.True(t, d.SoldOut("1"))
	c := countShards(t, rdb, d.o.prefix, "1", 2)
	requireConserved(t, c, 4)
	assert.EqualValues(t, 4, c.held)
}

// TestShardedSoldOutOnlyWhenAllEmpty: a buyer whose shard is empty is sold
// a unit of another shard; the in-process sold-out flag is set only once
// every shard is empty.
func TestShardedSoldOutOnlyWhenAllEmpty(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix, WithClock(testenv.NewEpochClock(0)))
		mustLoad(t, d, Activity{ID: "1", Stock: 3, Shards: 3}) // 1 + 1 + 1
		on0 := usersOn(3, 0, 5, 1)
		for i, u := range on0[:3] {
			res, err := d.Reserve(ctx, Request{Activity: "1", User: u, Qty: 1, ReservationID: fmt.Sprint(u)})
			require.NoError(t, err)
			require.Equal(t, Reserved, res.Status, "buyer %d", i)
			assert.False(t, d.SoldOut("1"))
		}
		res, err := d.Reserve(ctx, Request{Activity: "1", User: on0[3], Qty: 1, ReservationID: "late"})
		require.NoError(t, err)
		assert.Equal(t, SoldOut, res.Status)
		assert.Zero(t, res.Remaining)
		assert.False(t, res.Local)
		assert.True(t, d.SoldOut("1"))
		res, err = d.Reserve(ctx, Request{Activity: "1", User: usersOn(3, 2, 1, 1)[0], Qty: 1, ReservationID: "other"})
		require.NoError(t, err)
		assert.True(t, res.Local, "refused in-process, whatever the shard")
		res, err = d.Reserve(ctx, Request{Activity: "1", User: on0[0], Qty: 1, ReservationID: fmt.Sprint(on0[0])})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status, "a winner's retry still gets its reservation")
		assert.True(t, res.Replayed)
	})
}
