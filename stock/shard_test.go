package stock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardLedger reads every shard's ledger straight from Redis: reservation ID ->
// shard -> record.
func shardLedger(t *testing.T, rdb redis.UniversalClient, prefix, activity string, n int) map[string]map[int]string {
	t.Helper()
	out := map[string]map[int]string{}
	for k := range n {
		for id, rec := range hgetall(t, rdb, shardKeys(prefix, activity, n, k).ledger) {
			if out[id] == nil {
				out[id] = map[int]string{}
			}
			out[id][k] = rec
		}
	}
	return out
}

func keysExist(t *testing.T, rdb redis.UniversalClient, l *layout) int64 {
	t.Helper()
	var n int64
	for _, ks := range l.lists {
		for _, k := range ks {
			c, err := rdb.Exists(context.Background(), k).Result()
			require.NoError(t, err)
			n += c
		}
	}
	return n
}

// TestShardedReleaseLookupReservations: the calls that do not know the
// buyer find the entry in its shard; an unknown ID is tombstoned in every
// shard, so its late Reserve deducts nothing on whatever shard; a Deductor
// that never saw the activity learns its layout from the first call.
func TestShardedReleaseLookupReservations(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		const n = 3
		d := newTestDeductor(t, rdb, prefix)
		mustLoad(t, d, Activity{ID: "5", Stock: 30, PerUserLimit: 2, Shards: n})
		who := map[string]string{}
		for k := range n {
			for _, u := range usersOn(n, k, 4, 100) {
				id := fmt.Sprint("r", u)
				reserveOK(t, d, "5", u, 1, id)
				who[id] = u
			}
		}

		fresh := newTestDeductor(t, rdb, prefix)
		for id, u := range who {
			r, ok, err := fresh.Lookup(ctx, "5", id)
			require.NoError(t, err)
			require.True(t, ok, id)
			assert.Equal(t, Held, r.State)
			assert.Equal(t, u, r.User)
		}
		_, ok, err := fresh.Lookup(ctx, "5", "nope")
		require.NoError(t, err)
		assert.False(t, ok)
		rem, err := newTestDeductor(t, rdb, prefix).Remaining(ctx, "5")
		require.NoError(t, err)
		assert.EqualValues(t, 30-12, rem)
		u0 := usersOn(n, 0, 1, 100)[0]
		held, err := newTestDeductor(t, rdb, prefix).Held(ctx, "5", u0)
		require.NoError(t, err)
		assert.EqualValues(t, 1, held)

		// Release of a held reservation: back to its shard, exactly once.
		id := fmt.Sprint("r", u0)
		before := countShards(t, rdb, prefix, "5", n)
		rr, err := newTestDeductor(t, rdb, prefix).Release(ctx, "5", id)
		require.NoError(t, err)
		assert.Equal(t, ReleaseDone, rr.Status)
		assert.Equal(t, u0, rr.User)
		assert.EqualValues(t, 1, rr.Qty)
		after := countShards(t, rdb, prefix, "5", n)
		assert.Equal(t, before.stock[0]+1, after.stock[0])
		assert.Equal(t, before.stock[1:], after.stock[1:])
		rr, err = d.Release(ctx, "5", id)
		require.NoError(t, err)
		assert.Equal(t, ReleaseDuplicate, rr.Status)
		r, ok, err := d.Lookup(ctx, "5", id)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, Freed, r.State)
		held, err = d.Held(ctx, "5", u0)
		require.NoError(t, err)
		assert.Zero(t, held)
		requireConserved(t, after, 30)

		// An unknown ID: tombstoned in every shard.
		rr, err = d.Release(ctx, "5", "ghost")
		require.NoError(t, err)
		assert.Equal(t, ReleaseUnknown, rr.Status)
		l := shardLedger(t, rdb, prefix, "5", n)
		require.Len(t, l["ghost"], n)
		for k, rec := range l["ghost"] {
			p, err := parseRecord("ghost", rec)
			require.NoError(t, err)
			assert.Equal(t, Tombstone, p.State, "shard %d", k)
		}
		rr, err = d.Release(ctx, "5", "ghost")
		require.NoError(t, err)
		assert.Equal(t, ReleaseDuplicate, rr.Status)
		for k := range n {
			res, err := d.Reserve(ctx, Request{Activity: "5", User: usersOn(n, k, 1, 5000)[0], Qty: 1, ReservationID: "ghost"})
			require.NoError(t, err)
			assert.Equal(t, Released, res.Status, "late reserve on shard %d", k)
		}
		r, ok, err = d.Lookup(ctx, "5", "ghost")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, Tombstone, r.State)
		requireConserved(t, countShards(t, rdb, prefix, "5", n), 30)

		// Reservations walks every shard, in small pages.
		got := map[string]State{}
		var cursor uint64
		for i := 0; ; i++ {
			require.Less(t, i, 1000)
			page, next, err := newTestDeductor(t, rdb, prefix).Reservations(ctx, "5", cursor, 2)
			require.NoError(t, err)
			for _, r := range page {
				got[r.ID] = r.State
			}
			if next == 0 {
				break
			}
			cursor = next
		}
		want := map[string]State{}
		for id, per := range shardLedger(t, rdb, prefix, "5", n) {
			for _, rec := range per {
				p, err := parseRecord(id, rec)
				require.NoError(t, err)
				if s, ok := want[id]; !ok || s == Tombstone {
					want[id] = p.State
				}
			}
		}
		assert.Equal(t, want, got)
		_, _, err = d.Reservations(ctx, "5", uint64(n)<<56, 10)
		assert.ErrorIs(t, err, ErrInvalidArgument)

		st, err := newTestDeductor(t, rdb, prefix).Stats(ctx, "5")
		require.NoError(t, err)
		require.Len(t, st.Shards, n)
		assert.True(t, st.Loaded)
		assert.EqualValues(t, 30, st.Total)
		assert.EqualValues(t, 2, st.Limit)
		assert.EqualValues(t, 30-11, st.Remaining)
		assert.EqualValues(t, 11, st.Buyers)
		assert.EqualValues(t, 12+n, st.LedgerEntries, "12 entries and a tombstone per shard")
		for k, s := range st.Shards {
			assert.EqualValues(t, 10, s.Total, "shard %d", k)
			assert.NotZero(t, s.Epoch)
		}
	})
}

// TestShardedFreezeRebuild: Freeze and Unfreeze act on every shard; Rebuild
// refuses a live activity, then rebuilds every shard from the truth (each
// live reservation in its buyer's shard, the rest split evenly), including
// into another number of shards and back to one ledger; a Deductor that
// knew the old layout follows without reporting a loss.
func TestShardedFreezeRebuild(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		var losses lossLog
		d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
		a := Activity{ID: "9", Stock: 30, PerUserLimit: 2, Shards: 3}
		mustLoad(t, d, a)
		var live []Reservation
		for k := range 3 {
			for _, u := range usersOn(3, k, 3, 10) {
				id := fmt.Sprint("r", u)
				res := reserveOK(t, d, "9", u, 2, id)
				live = append(live, Reservation{ID: id, User: u, Qty: 2, ReservedAt: res.ReservedAt})
			}
		}
		// Some units borrowed, so that transfer records exist too.
		for _, u := range usersOn(3, 0, 3, 1000) {
			reserveOK(t, d, "9", u, 1, fmt.Sprint("b", u))
		}

		_, err := d.Rebuild(ctx, a, live)
		assert.ErrorIs(t, err, ErrLive)
		assert.Zero(t, losses.total())

		require.NoError(t, d.Freeze(ctx, "9"))
		l3 := d.layoutOf("9")
		for k := range 3 {
			assert.Equal(t, "1", hgetall(t, rdb, l3.keys[k].meta)["frozen"], "shard %d", k)
		}
		for k := range 3 {
			assert.Equal(t, Frozen, reserveStatus(t, d, "9", usersOn(3, k, 1, 5000)[0], 1, fmt.Sprint("f", k)))
		}
		rr, err := d.Release(ctx, "9", live[0].ID)
		require.NoError(t, err)
		assert.Equal(t, ReleaseDone, rr.Status, "release works while frozen")
		live = live[1:]
		require.NoError(t, d.Unfreeze(ctx, "9"))
		reserveOK(t, d, "9", usersOn(3, 1, 1, 7000)[0], 1, "thawed")
		require.NoError(t, d.Freeze(ctx, "9"))

		check := func(n int, epoch0 int64) {
			t.Helper()
			st, err := d.Stats(ctx, "9")
			require.NoError(t, err)
			assert.True(t, st.Loaded)
			assert.False(t, st.Frozen)
			assert.NotEqual(t, epoch0, st.Epoch)
			var sum int64
			for _, r := range live {
				sum += r.Qty
			}
			assert.EqualValues(t, 30-sum, st.Remaining)
			if n == 1 {
				assert.Empty(t, st.Shards)
				assert.Len(t, hgetall(t, rdb, activityKeys(prefix, "9").ledger), len(live))
				return
			}
			require.Len(t, st.Shards, n)
			c := countShards(t, rdb, prefix, "9", n)
			requireConserved(t, c, 30)
			assert.Zero(t, c.pending)
			assert.Len(t, c.entries, len(live))
			for _, r := range live {
				assert.Equal(t, shardOf(r.User, n), c.entries[r.ID], r.ID)
			}
			var shards []int64
			for _, s := range c.stock {
				shards = append(shards, s)
			}
			assert.LessOrEqual(t, slices.Max(shards)-slices.Min(shards), int64(1), "the rest split evenly: %v", shards)
		}

		st0, err := d.Stats(ctx, "9")
		require.NoError(t, err)
		_, err = d.Rebuild(ctx, a, live)
		require.NoError(t, err)
		check(3, st0.Epoch)
		for k := range 3 {
			assert.Empty(t, hgetall(t, rdb, l3.keys[k].xout))
			assert.Empty(t, hgetall(t, rdb, l3.keys[k].xin))
		}
		res, err := d.Reserve(ctx, Request{Activity: "9", User: live[0].User, Qty: 2, ReservationID: live[0].ID})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
		assert.True(t, res.Replayed, "a live reservation answers from the rebuilt ledger")

		// Into six shards: the old three are dropped.
		other := newTestDeductor(t, rdb, prefix)
		require.NoError(t, other.Freeze(ctx, "9"))
		st0, err = d.Stats(ctx, "9")
		require.NoError(t, err)
		a6 := a
		a6.Shards = 6
		_, err = other.Rebuild(ctx, a6, live)
		require.NoError(t, err)
		assert.Zero(t, keysExist(t, rdb, l3), "the old layout's keys are gone")
		check(6, st0.Epoch)
		u := usersOn(6, 4, 1, 9000)[0]
		reserveOK(t, d, "9", u, 1, "after6") // d knew 3 shards
		assert.Equal(t, 4, countShards(t, rdb, prefix, "9", 6).entries["after6"])

		// Back to one ledger.
		require.NoError(t, other.Freeze(ctx, "9"))
		st0, err = d.Stats(ctx, "9")
		require.NoError(t, err)
		a1 := a
		a1.Shards = 0
		_, err = other.Rebuild(ctx, a1, live)
		require.NoError(t, err)
		assert.Zero(t, keysExist(t, rdb, newLayout(prefix, "9", 6)))
		check(1, st0.Epoch)
		reserveOK(t, d, "9", u, 1, "after1") // d knew 6 shards
		assert.Contains(t, hgetall(t, rdb, activityKeys(prefix, "9").ledger), "after1")
		assert.Zero(t, losses.total(), "layout changes are not losses")
	})
}

// TestShardedResetAndLoad: Load is set-if-absent in any layout; a load cut
// short between the shards and the directory is completed; Reset changes
// the number of shards (the old shards are frozen first, then dropped) and
// a Deductor that knew the old layout follows without reporting a loss;
// bad shard counts are refused.
func TestShardedResetAndLoad(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		var losses lossLog
		d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
		for _, bad := range []int{-1, maxShards + 1} {
			_, err := d.Load(ctx, Activity{ID: "1", Stock: 10, Shards: bad})
			assert.ErrorIs(t, err, ErrInvalidArgument)
		}

		a := Activity{ID: "1", Stock: 10, Shards: 3}
		mustLoad(t, d, a)
		loaded, err := d.Load(ctx, a)
		require.NoError(t, err)
		assert.False(t, loaded)
		loaded, err = d.Load(ctx, Activity{ID: "1", Stock: 99})
		require.NoError(t, err)
		assert.False(t, loaded, "an un-sharded Load does not touch a sharded activity")
		loaded, err = d.Load(ctx, Activity{ID: "1", Stock: 99, Shards: 6})
		require.NoError(t, err)
		assert.False(t, loaded)
		u := usersOn(3, 2, 1, 1)[0]
		reserveOK(t, d, "1", u, 1, "a")
		assert.Equal(t, []int64{4, 3, 2}, countShards(t, rdb, prefix, "1", 3).stock)

		// Cut short: the directory never written.
		require.NoError(t, rdb.Del(ctx, activityKeys(prefix, "1").meta).Err())
		loaded, err = newTestDeductor(t, rdb, prefix).Load(ctx, a)
		require.NoError(t, err)
		assert.True(t, loaded)
		assert.Equal(t, []int64{4, 3, 2}, countShards(t, rdb, prefix, "1", 3).stock, "the shards are kept")

		// Reset to 6 shards, to one ledger, to 3 shards.
		l3 := d.layoutOf("1")
		require.NoError(t, newTestDeductor(t, rdb, prefix).Reset(ctx, Activity{ID: "1", Stock: 12, Shards: 6}))
		assert.Zero(t, keysExist(t, rdb, l3))
		reserveOK(t, d, "1", u, 1, "b")
		c := countShards(t, rdb, prefix, "1", 6)
		requireConserved(t, c, 12)
		assert.Equal(t, shardOf(u, 6), c.entries["b"])

		require.NoError(t, newTestDeductor(t, rdb, prefix).Reset(ctx, Activity{ID: "1", Stock: 5}))
		assert.Zero(t, keysExist(t, rdb, newLayout(prefix, "1", 6)))
		reserveOK(t, d, "1", u, 1, "c")
		assert.EqualValues(t, 4, hint(t, rdb, activityKeys(prefix, "1").meta, "stock"))

		require.NoError(t, newTestDeductor(t, rdb, prefix).Reset(ctx, Activity{ID: "1", Stock: 9, Shards: 3}))
		assert.NotContains(t, hgetall(t, rdb, activityKeys(prefix, "1").meta), "stock")
		reserveOK(t, d, "1", u, 1, "d")
		requireConserved(t, countShards(t, rdb, prefix, "1", 3), 9)
		assert.Zero(t, losses.total())

		// The preloader loads a sharded activity.
		p, err := NewPreloader(d, (&table{acts: []Activity{{ID: "2", Stock: 7, Shards: 4}}}).Upcoming)
		require.NoError(t, err)
		got, err := p.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, got)
		st, err := newTestDeductor(t, rdb, prefix).Stats(ctx, "2")
		require.NoError(t, err)
		assert.True(t, st.Loaded)
		assert.Len(t, st.Shards, 4)
		assert.EqualValues(t, 7, st.Remaining)
	})
}

// TestShardLoss: one shard's keys are lost. The Deductor that saw it
// answers Frozen for that shard's buyers and reports the loss once; the
// other shards keep selling without borrowing from it. A Preloader with
// recovery freezes the whole activity until the truth is ready, then
// rebuilds every shard from it.
func TestShardLoss(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		var losses lossLog
		d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
		a := Activity{ID: "3", Stock: 9, Shards: 3}
		mustLoad(t, d, a)
		var live []Reservation
		for k := range 3 {
			u := usersOn(3, k, 1, 1)[0]
			res := reserveOK(t, d, "3", u, 1, fmt.Sprint("r", u))
			live = append(live, Reservation{ID: fmt.Sprint("r", u), User: u, Qty: 1, ReservedAt: res.ReservedAt})
		}
		l := d.layoutOf("3")
		require.NoError(t, rdb.Del(ctx, l.lists[1]...).Err())

		on1 := usersOn(3, 1, 3, 100)
		assert.Equal(t, Frozen, reserveStatus(t, d, "3", on1[0], 1, "x1"))
		require.Len(t, losses.get("3"), 1)
		assert.Contains(t, losses.get("3")[0], "shard 1 of 3")
		on0 := usersOn(3, 0, 5, 100)
		for i, u := range on0[:2] {
			assert.Equal(t, Reserved, reserveStatus(t, d, "3", u, 1, fmt.Sprint("y", i)))
		}
		res, err := d.Reserve(ctx, Request{Activity: "3", User: on0[2], Qty: 1, ReservationID: "y2"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status, "borrowed from shard 2")
		assert.Len(t, losses.get("3"), 1, "reported once")

		// Shard 2 frozen by hand with units left, shard 0 empty: its buyers
		// are told busy, not sold out.
		l2 := newTestDeductor(t, rdb, prefix)
		c := countShards(t, rdb, prefix, "3", 3)
		require.Zero(t, c.stock[0])
		require.Positive(t, c.stock[2])
		_, err = l2.freezeUnit(ctx, l.unit(2), l.keys[2].meta, true)
		require.NoError(t, err)
		res, err = d.Reserve(ctx, Request{Activity: "3", User: on0[3], Qty: 1, ReservationID: "busy"})
		require.NoError(t, err)
		assert.Equal(t, Frozen, res.Status)
		assert.False(t, d.SoldOut("3"))
		_, err = l2.freezeUnit(ctx, l.unit(2), l.keys[2].meta, false)
		require.NoError(t, err)
		// Shard 1 is still missing: a buyer of shard 2 who finds it short
		// after shard 2 is drained is not told sold out either.
		for i, u := range usersOn(3, 2, 10, 100) {
			res, err := d.Reserve(ctx, Request{Activity: "3", User: u, Qty: 1, ReservationID: fmt.Sprint("s2-", i)})
			require.NoError(t, err)
			if res.Status != Reserved {
				assert.Equal(t, Frozen, res.Status)
				break
			}
		}
		assert.False(t, d.SoldOut("3"), "a missing shard's units are unknown, not sold")
		live = append(live, ledgerLive(t, rdb, l, 2)...)

		rec := &recoveryStub{}
		p, err := NewPreloader(newTestDeductor(t, rdb, prefix), (&table{acts: []Activity{a}}).Upcoming, WithRecovery(rec.Recover))
		require.NoError(t, err)
		n, err := p.Tick(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		for k := range 3 {
			assert.Equal(t, "1", hgetall(t, rdb, l.keys[k].meta)["frozen"], "shard %d frozen while not ready", k)
		}
		assert.Equal(t, "0", hgetall(t, rdb, l.keys[1].meta)["stock"], "a frozen placeholder for the lost shard")
		assert.Equal(t, Frozen, reserveStatus(t, d, "3", on0[3], 1, "z"))

		live = append(live, Reservation{ID: "y0", User: on0[0], Qty: 1}, Reservation{ID: "y1", User: on0[1], Qty: 1},
			Reservation{ID: "y2", User: on0[2], Qty: 1})
		rec.set(live, true)
		n, err = p.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		c = countShards(t, rdb, prefix, "3", 3)
		requireConserved(t, c, 9)
		var held int64
		for _, r := range live {
			held += r.Qty
		}
		assert.Equal(t, held, c.held)
		for _, r := range live {
			assert.Equal(t, shardOf(r.User, 3), c.entries[r.ID])
		}
		assert.Equal(t, Reserved, reserveStatus(t, d, "3", on1[2], 1, "after"))
		assert.Len(t, losses.get("3"), 1, "the rebuild is not a loss")
	})
}

// TestShardedScriptsTouchOneSlot records the keys of every script call of a
// sharded sale (reserve, coalesced batches, borrowing, release, reads,
// rebuild) and checks that each call's keys share one hash tag: one slot.
func TestShardedScriptsTouchOneSlot(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	rec := &keyRecorder{}
	rdb.AddHook(rec)
	ctx := context.Background()
	prefix := testenv.Prefix(t)
	d := newTestDeductor(t, rdb, prefix, WithCoalescing(100*time.Microsecond, 8), WithClock(testenv.NewEpochClock(0)))
	a := Activity{ID: "4", Stock: 40, Shards: 4}
	mustLoad(t, d, a)
	var wg sync.WaitGroup
	for _, u := range usersOn(4, 0, 60, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = d.Reserve(ctx, Request{Activity: "4", User: u, Qty: 1, ReservationID: u})
		}()
	}
	wg.Wait()
	_, err := d.Release(ctx, "4", usersOn(4, 0, 1, 1)[0])
	require.NoError(t, err)
	_, _ = d.Release(ctx, "4", "unknown")
	_, _, _ = d.Lookup(ctx, "4", "unknown")
	_, _, _ = d.Reservations(ctx, "4", 0, 10)
	_, _ = d.Stats(ctx, "4")
	_, _ = d.Remaining(ctx, "4")
	require.NoError(t, d.Freeze(ctx, "4"))
	_, err = d.Rebuild(ctx, a, nil)
	require.NoError(t, err)
	_, err = d.SettleTransfers(ctx, "4")
	require.NoError(t, err)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Greater(t, rec.calls, 100)
	assert.Empty(t, rec.bad)
	assert.Positive(t, countShards(t, rdb, prefix, "4", 4).stock[0]+1, "sanity")
}

// keyRecorder is a go-redis hook checking that the keys of each EVAL and
// EVALSHA share one hash tag.
type keyRecorder struct {
	mu    sync.Mutex
	calls int
	bad   []string
}

func (h *keyRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *keyRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *keyRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "eval", "evalsha", "eval_ro", "evalsha_ro":
			args := cmd.Args()
			n, _ := strconv.Atoi(fmt.Sprint(args[2]))
			tags := map[string]bool{}
			for _, k := range args[3 : 3+n] {
				tags[hashTag(fmt.Sprint(k))] = true
			}
			h.mu.Lock()
			h.calls++
			if len(tags) != 1 {
				h.bad = append(h.bad, fmt.Sprint(args[3:3+n]))
			}
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// scriptHold is a go-redis hook that stops the first call of one script
// until released.
type scriptHold struct {
	sha, src string
	in, out  chan struct{}
	once     sync.Once
}

func newScriptHold(s *redis.Script, src string) *scriptHold {
	return &scriptHold{sha: s.Hash(), src: src, in: make(chan struct{}), out: make(chan struct{})}
}

func (h *scriptHold) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 && (cmd.Name() == "evalsha" && args[1] == h.sha || cmd.Name() == "eval" && args[1] == h.src) {
			h.once.Do(func() {
				close(h.in)
				<-h.out
			})
		}
		return next(ctx, cmd)
	}
}

// TestResetToOtherShardCountFreezesFirst: while a Reset to another number of
// shards is between its steps (held before the new directory is written), a
// Deductor that still uses the old layout cannot reserve in the old shards,
// which are about to be dropped: it is answered Frozen; once the new layout
// is written it reserves there.
func TestResetToOtherShardCountFreezesFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, m := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	var losses lossLog
	d := newTestDeductor(t, c, prefix, WithOnLoss(losses.hook))
	mustLoad(t, d, Activity{ID: "1", Stock: 9, Shards: 3})
	u := usersOn(3, 1, 1, 1)[0]
	reserveOK(t, d, "1", u, 1, "before")

	admin := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = admin.Close() })
	hold := newScriptHold(directoryScript, directoryLua)
	admin.AddHook(hold)
	done := make(chan error, 1)
	go func() { done <- newTestDeductor(t, admin, prefix).Reset(ctx, Activity{ID: "1", Stock: 12, Shards: 6}) }()
	<-hold.in
	assert.Equal(t, Frozen, reserveStatus(t, d, "1", "1"+u, 1, "during"), "the old shards are frozen")
	close(hold.out)
	require.NoError(t, <-done)

	reserveOK(t, d, "1", u, 1, "after")
	c6 := countShards(t, c, prefix, "1", 6)
	requireConserved(t, c6, 12)
	assert.EqualValues(t, 1, c6.held)
	assert.Zero(t, keysExist(t, c, newLayout(prefix, "1", 3)))
	assert.Zero(t, losses.total())
}

// ledgerLive returns the held entries of shard k's ledger, read straight
// from Redis, as live reservations, leaving out those the test counts
// already (the first of the shard's buyers, from before the loss).
func ledgerLive(t *testing.T, rdb redis.UniversalClient, l *layout, k int) []Reservation {
	t.Helper()
	var out []Reservation
	for id, rec := range hgetall(t, rdb, l.keys[k].ledger) {
		r, err := parseRecord(id, rec)
		require.NoError(t, err)
		if r.State == Held && len(id) > 3 && id[:3] == "s2-" {
			out = append(out, Reservation{ID: id, User: r.User, Qty: r.Qty})
		}
	}
	return out
}
