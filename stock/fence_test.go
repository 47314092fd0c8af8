package stock

import (
	"context"
	"fmt"
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

// recoveryStub is a Recovery whose answer the test sets.
type recoveryStub struct {
	mu    sync.Mutex
	live  []Reservation
	ready bool
	err   error
	calls int
}

func (r *recoveryStub) Recover(_ context.Context, _ Activity) ([]Reservation, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return append([]Reservation(nil), r.live...), r.ready, r.err
}

func (r *recoveryStub) set(live []Reservation, ready bool) {
	r.mu.Lock()
	r.live, r.ready = live, ready
	r.mu.Unlock()
}

func reserveOK(t *testing.T, d *Deductor, activity, user string, qty int64, id string) Result {
	t.Helper()
	res, err := d.Reserve(context.Background(), Request{Activity: activity, User: user, Qty: qty, ReservationID: id})
	require.NoError(t, err)
	require.Equal(t, Reserved, res.Status, "reserve %s", id)
	return res
}

func reserveStatus(t *testing.T, d *Deductor, activity, user string, qty int64, id string) Status {
	t.Helper()
	res, err := d.Reserve(context.Background(), Request{Activity: activity, User: user, Qty: qty, ReservationID: id})
	require.NoError(t, err)
	return res.Status
}

// wipe deletes the activity's keys, as a Redis restart without persistence
// would (only this test's own keys: never FLUSH a shared server).
func wipe(t *testing.T, rdb redis.UniversalClient, k keys) {
	t.Helper()
	require.NoError(t, rdb.Del(context.Background(), k.list()...).Err())
	n, err := rdb.Exists(context.Background(), k.list()...).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestDataLossWipe is the wipe scenario on every Redis available (miniredis,
// and the real standalone server and Cluster in the integration tier): a
// sale runs, Redis loses the keys, and
//   - the old path (set-if-absent Load by a fresh process) reopens the sale
//     at full stock: the bug, still there without WithRecovery;
//   - a Deductor that saw the sale detects it, answers Frozen and freezes;
//   - with WithRecovery the activity stays frozen until Recover is ready,
//     then Rebuild restores remaining = total - live and ledger = live, and
//     a Release of a live reservation returns its units.
//
// Every figure is read from the Redis hashes with HGETALL.
func TestDataLossWipe(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()

		t.Run("old path reloads full stock", func(t *testing.T) {
			var losses lossLog
			d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
			a := Activity{ID: "1", Stock: 10, PerUserLimit: 2}
			k := activityKeys(prefix, a.ID)
			mustLoad(t, d, a)
			reserveOK(t, d, "1", "1", 2, "r1")
			reserveOK(t, d, "1", "2", 1, "r2")
			require.EqualValues(t, 7, hint(t, rdb, k.meta, "stock"))

			wipe(t, rdb, k)
			// A process started after the loss knows nothing: its preloader
			// (no recovery) loads the activity at full stock.
			fresh := newTestDeductor(t, rdb, prefix)
			p, err := NewPreloader(fresh, (&table{acts: []Activity{a}}).Upcoming)
			require.NoError(t, err)
			n, err := p.Tick(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			meta := hgetall(t, rdb, k.meta)
			assert.Equal(t, "10", meta["stock"], "the sale reopened at full stock although 3 units are sold")
			assert.Empty(t, hgetall(t, rdb, k.ledger), "and the reservations are forgotten")
			assert.Equal(t, "1", meta["origin"], "made by Load")

			// The Deductor that saw the sale is not fooled.
			res, err := d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "r3"})
			require.NoError(t, err)
			assert.Equal(t, Frozen, res.Status)
			assert.ErrorIs(t, res.Err(), ErrFrozen)
			assert.False(t, d.SoldOut("1"), "Frozen does not set the sold-out cache")
			require.Len(t, losses.get("1"), 1)
			assert.Contains(t, losses.get("1")[0], "Load")
			assert.Equal(t, "1", hgetall(t, rdb, k.meta)["frozen"])
			// The call that revealed the loss ran on the reloaded copy (its
			// entry is there) but was answered Frozen: no order follows, and
			// a Rebuild from the database drops it.
			assert.Equal(t, []string{"r3"}, keysOf(hgetall(t, rdb, k.ledger)))
			assert.Equal(t, Frozen, reserveStatus(t, fresh, "1", "4", 1, "r4"), "frozen for every process")
			assert.Len(t, losses.get("1"), 1, "reported once")
		})

		t.Run("recovery rebuilds from the truth", func(t *testing.T) {
			var losses lossLog
			d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
			a := Activity{ID: "2", Stock: 10, PerUserLimit: 2}
			k := activityKeys(prefix, a.ID)
			rec := &recoveryStub{ready: true} // a new activity: nothing in the database
			var events []string
			p, err := NewPreloader(d, (&table{acts: []Activity{a}}).Upcoming, WithRecovery(rec.Recover),
				WithOnRecover(func(_ context.Context, activity string, rebuilt bool) {
					events = append(events, fmt.Sprintf("%s %v", activity, rebuilt))
				}))
			require.NoError(t, err)
			n, err := p.Tick(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n, "the first load goes through Rebuild with no live reservations")
			assert.Equal(t, "10", hgetall(t, rdb, k.meta)["stock"])

			r1 := reserveOK(t, d, "2", "1", 2, "r1")
			r2 := reserveOK(t, d, "2", "2", 1, "r2")
			reserveOK(t, d, "2", "3", 1, "r3")
			rr, err := d.Release(ctx, "2", "r3") // its order was cancelled
			require.NoError(t, err)
			require.Equal(t, ReleaseDone, rr.Status)
			before := hgetall(t, rdb, k.meta)
			assert.Equal(t, "7", before["stock"])
			assert.Equal(t, "4", before["seq"], "3 reservations and 1 release")
			n, err = p.Tick(ctx)
			require.NoError(t, err)
			assert.Zero(t, n, "a live activity is left alone")
			assert.Equal(t, before, hgetall(t, rdb, k.meta))

			wipe(t, rdb, k)
			// The Deductor that saw the sale: not loaded before the expiry
			// it saw is a loss.
			assert.Equal(t, Frozen, reserveStatus(t, d, "2", "4", 1, "r4"))
			require.Len(t, losses.get("2"), 1)
			assert.Contains(t, losses.get("2")[0], "gone")
			assert.Equal(t, Frozen, reserveStatus(t, d, "2", "4", 1, "r4"), "still frozen")
			assert.Len(t, losses.get("2"), 1, "reported once")

			// The pipeline still has messages in flight: not ready. The
			// preloader writes a frozen placeholder, so every process
			// answers Frozen (not NotLoaded, which a fresh one would say).
			rec.set(nil, false)
			n, err = p.Tick(ctx)
			require.NoError(t, err)
			assert.Zero(t, n)
			meta := hgetall(t, rdb, k.meta)
			assert.Equal(t, "1", meta["frozen"])
			assert.Equal(t, "0", meta["stock"])
			assert.Equal(t, "4", meta["origin"], "a placeholder")
			fresh := newTestDeductor(t, rdb, prefix)
			assert.Equal(t, Frozen, reserveStatus(t, fresh, "2", "5", 1, "r5"))
			assert.Equal(t, Frozen, reserveStatus(t, d, "2", "5", 1, "r5"))
			n, err = p.Tick(ctx)
			require.NoError(t, err)
			assert.Zero(t, n, "not ready yet: still frozen")
			assert.Equal(t, "1", hgetall(t, rdb, k.meta)["frozen"])

			// Ready: the database holds two live orders, r1 and r2.
			live := []Reservation{
				{ID: "r1", User: "1", Qty: 2, ReservedAt: r1.ReservedAt},
				{ID: "r2", User: "2", Qty: 1, ReservedAt: r2.ReservedAt},
			}
			rec.set(live, true)
			n, err = p.Tick(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			assert.Equal(t, []string{"2 true", "2 false", "2 false", "2 true"}, events)

			meta = hgetall(t, rdb, k.meta)
			assert.Equal(t, "7", meta["stock"], "remaining = total - live")
			assert.Equal(t, "10", meta["total"])
			assert.Equal(t, "2", meta["limit"])
			assert.Equal(t, "0", meta["frozen"])
			assert.Equal(t, "0", meta["seq"])
			assert.Equal(t, "3", meta["origin"])
			assert.NotEqual(t, before["epoch"], meta["epoch"], "a new epoch")
			assert.Equal(t, map[string]string{
				"r1": "1:2:R:" + strconv.FormatInt(r1.ReservedAt.UnixMilli(), 10),
				"r2": "2:1:R:" + strconv.FormatInt(r2.ReservedAt.UnixMilli(), 10),
			}, hgetall(t, rdb, k.ledger), "ledger = live")
			assert.Equal(t, map[string]string{"1": "2", "2": "1"}, hgetall(t, rdb, k.buyers))
			sum, _ := heldSum(ledger(t, d, "2"))
			assert.EqualValues(t, 10, hint(t, rdb, k.meta, "stock")+sum, "conservation")

			// Both processes accept the rebuilt epoch; a Release of a live
			// reservation returns its units.
			rr, err = d.Release(ctx, "2", "r1")
			require.NoError(t, err)
			assert.Equal(t, ReleaseDone, rr.Status)
			assert.EqualValues(t, 2, rr.Qty)
			assert.Equal(t, "9", hgetall(t, rdb, k.meta)["stock"])
			assert.NotContains(t, hgetall(t, rdb, k.buyers), "1")
			reserveOK(t, fresh, "2", "5", 1, "r5")
			reserveOK(t, d, "2", "6", 1, "r6")
			replay := reserveOK(t, d, "2", "2", 1, "r2")
			assert.True(t, replay.Replayed)
			assert.Len(t, losses.get("2"), 1, "the rebuild is not a loss")
			sum, _ = heldSum(ledger(t, d, "2"))
			assert.EqualValues(t, 10, hint(t, rdb, k.meta, "stock")+sum, "conservation")
		})
	})
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// hashes reads the activity's three hashes straight from Redis.
func hashes(t *testing.T, rdb redis.UniversalClient, k keys) [3]map[string]string {
	t.Helper()
	return [3]map[string]string{hgetall(t, rdb, k.meta), hgetall(t, rdb, k.buyers), hgetall(t, rdb, k.ledger)}
}

// keySnap is a saved copy of one key, for a rollback.
type keySnap struct {
	key  string
	dump string            // DUMP payload (real servers)
	hash map[string]string // HGETALL (miniredis: its DUMP handles strings only)
	pttl time.Duration
	// absent: the key did not exist; restoring deletes it.
	absent bool
}

func saveKeys(t *testing.T, kind testenv.RedisKind, rdb redis.UniversalClient, k keys) []keySnap {
	t.Helper()
	ctx := context.Background()
	var out []keySnap
	for _, key := range k.list() {
		s := keySnap{key: key}
		n, err := rdb.Exists(ctx, key).Result()
		require.NoError(t, err)
		if n == 0 {
			s.absent = true // (ever, adj: not written by these tests)
			out = append(out, s)
			continue
		}
		s.pttl, err = rdb.PTTL(ctx, key).Result()
		require.NoError(t, err)
		if kind == testenv.KindMiniredis {
			s.hash = hgetall(t, rdb, key)
		} else {
			s.dump, err = rdb.Dump(ctx, key).Result()
			require.NoError(t, err)
		}
		out = append(out, s)
	}
	return out
}

// restoreKeys puts an older copy back, as a failover to a lagging replica
// or a restore from an old snapshot would.
func restoreKeys(t *testing.T, rdb redis.UniversalClient, snaps []keySnap) {
	t.Helper()
	ctx := context.Background()
	for _, s := range snaps {
		ttl := s.pttl
		if ttl < 0 {
			ttl = 0
		}
		if s.absent {
			require.NoError(t, rdb.Del(ctx, s.key).Err())
			continue
		}
		if s.hash == nil {
			require.NoError(t, rdb.RestoreReplace(ctx, s.key, ttl, s.dump).Err())
			continue
		}
		require.NoError(t, rdb.Del(ctx, s.key).Err())
		for f, v := range s.hash {
			require.NoError(t, rdb.HSet(ctx, s.key, f, v).Err())
		}
		if ttl > 0 {
			require.NoError(t, rdb.PExpire(ctx, s.key, ttl).Err())
		}
	}
}

// TestDataLossRollback: the keys go back to an older copy (DUMP/RESTORE;
// on miniredis HGETALL/HSET); the Deductor that saw the newer writes
// answers Frozen on its next Reserve, freezes the activity and reports it.
func TestDataLossRollback(t *testing.T) {
	forEachRedisKind(t, func(t *testing.T, kind testenv.RedisKind, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()

		t.Run("seq goes back", func(t *testing.T) {
			var losses lossLog
			d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
			k := activityKeys(prefix, "1")
			mustLoad(t, d, Activity{ID: "1", Stock: 10})
			reserveOK(t, d, "1", "1", 1, "a")
			reserveOK(t, d, "1", "2", 1, "b")
			old := saveKeys(t, kind, rdb, k)
			reserveOK(t, d, "1", "3", 1, "c")
			reserveOK(t, d, "1", "4", 1, "d")
			require.EqualValues(t, 4, hint(t, rdb, k.meta, "seq"))

			restoreKeys(t, rdb, old)
			require.EqualValues(t, 2, hint(t, rdb, k.meta, "seq"), "the older copy is back")
			res, err := d.Reserve(ctx, Request{Activity: "1", User: "5", Qty: 1, ReservationID: "e"})
			require.NoError(t, err)
			assert.Equal(t, Frozen, res.Status, "never Reserved on a rolled-back ledger")
			require.Len(t, losses.get("1"), 1)
			assert.Contains(t, losses.get("1")[0], "rolled back")
			meta := hgetall(t, rdb, k.meta)
			assert.Equal(t, "1", meta["frozen"])
			assert.Equal(t, Frozen, reserveStatus(t, d, "1", "6", 1, "f"))
			assert.Len(t, losses.get("1"), 1, "reported once")

			// A replay of an entry the older copy holds still answers from
			// the ledger; a Release still works while frozen.
			res, err = d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})
			require.NoError(t, err)
			assert.Equal(t, Reserved, res.Status)
			assert.True(t, res.Replayed)
			rr, err := d.Release(ctx, "1", "b")
			require.NoError(t, err)
			assert.Equal(t, ReleaseDone, rr.Status)
			assert.Len(t, losses.get("1"), 1)
		})

		t.Run("older epoch comes back", func(t *testing.T) {
			var losses lossLog
			d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
			k := activityKeys(prefix, "2")
			a := Activity{ID: "2", Stock: 10}
			mustLoad(t, d, a)
			reserveOK(t, d, "2", "1", 1, "a")
			old := saveKeys(t, kind, rdb, k)
			// A deliberate rebuild (another process's recovery) is adopted.
			require.NoError(t, d.Freeze(ctx, "2"))
			_, err := d.Rebuild(ctx, a, []Reservation{{ID: "a", User: "1", Qty: 1}})
			require.NoError(t, err)
			reserveOK(t, d, "2", "2", 1, "b")
			assert.Empty(t, losses.get("2"))

			restoreKeys(t, rdb, old)
			assert.Equal(t, Frozen, reserveStatus(t, d, "2", "3", 1, "c"))
			require.Len(t, losses.get("2"), 1)
			assert.Contains(t, losses.get("2")[0], "rolled back")
			assert.Equal(t, "1", hgetall(t, rdb, k.meta)["frozen"])
		})
	})
}

// TestFreezeUnfreeze: Frozen refuses new reservations without touching the
// sold-out cache, replays still answer from the ledger, Release works, and
// Rebuild refuses a live activity.
func TestFreezeUnfreeze(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		k := activityKeys(prefix, "1")
		assert.ErrorIs(t, d.Freeze(ctx, "1"), ErrNotLoaded)
		assert.ErrorIs(t, d.Unfreeze(ctx, "1"), ErrNotLoaded)
		n, err := rdb.Exists(ctx, k.list()...).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "nothing written for an activity that is not loaded")
		assert.ErrorIs(t, d.Freeze(ctx, "a{b"), ErrInvalidArgument)

		a := Activity{ID: "1", Stock: 1}
		mustLoad(t, d, a)
		reserveOK(t, d, "1", "1", 1, "a")
		live := hashes(t, rdb, k)
		_, err = d.Rebuild(ctx, a, nil)
		assert.ErrorIs(t, err, ErrLive, "a live activity is never rebuilt")
		assert.Equal(t, live, hashes(t, rdb, k), "nothing written")

		require.NoError(t, d.Freeze(ctx, "1"))
		require.NoError(t, d.Freeze(ctx, "1"), "idempotent")
		assert.Equal(t, "1", hgetall(t, rdb, k.meta)["frozen"])
		st, err := d.Stats(ctx, "1")
		require.NoError(t, err)
		assert.True(t, st.Frozen)

		res, err := d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "b"})
		require.NoError(t, err)
		assert.Equal(t, Frozen, res.Status)
		assert.Equal(t, "frozen", res.Status.String())
		assert.False(t, res.Local)
		assert.False(t, d.SoldOut("1"), "stock 0 but frozen: not sold out")
		res, err = d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status, "a replay answers from the ledger")
		assert.True(t, res.Replayed)

		rr, err := d.Release(ctx, "1", "a")
		require.NoError(t, err)
		assert.Equal(t, ReleaseDone, rr.Status, "release works while frozen")
		assert.Equal(t, "1", hgetall(t, rdb, k.meta)["stock"])
		assert.Equal(t, Frozen, reserveStatus(t, d, "1", "2", 1, "b"), "stock came back, still frozen")
		assert.Empty(t, hgetall(t, rdb, k.buyers))

		require.NoError(t, d.Unfreeze(ctx, "1"))
		require.NoError(t, d.Unfreeze(ctx, "1"), "idempotent")
		assert.Equal(t, "0", hgetall(t, rdb, k.meta)["frozen"])
		reserveOK(t, d, "1", "2", 1, "b")
	})
}

// TestRebuildRejectsBadInput: every bad input is an ErrInvalidArgument and
// writes nothing (the activity is frozen, so Rebuild would otherwise run).
func TestRebuildRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	d := newTestDeductor(t, rdb, prefix)
	a := Activity{ID: "1", Stock: 5, PerUserLimit: 2}
	mustLoad(t, d, a)
	reserveOK(t, d, "1", "9", 1, "x")
	require.NoError(t, d.Freeze(ctx, "1"))
	before := snapshot(t, rdb, prefix)

	r := func(id, user string, qty int64) Reservation { return Reservation{ID: id, User: user, Qty: qty} }
	for name, tc := range map[string]struct {
		a    Activity
		live []Reservation
	}{
		"more live than stock": {a, []Reservation{r("a", "1", 2), r("b", "2", 2), r("c", "3", 2)}},
		"duplicate ID":         {a, []Reservation{r("a", "1", 1), r("a", "2", 1)}},
		"zero qty":             {a, []Reservation{r("a", "1", 0)}},
		"negative qty":         {a, []Reservation{r("a", "1", -1)}},
		"qty above 2^53-1":     {Activity{ID: "1", Stock: MaxQuantity, PerUserLimit: MaxQuantity}, []Reservation{r("a", "1", MaxQuantity+1)}},
		"user above limit":     {a, []Reservation{r("a", "1", 1), r("b", "1", 2)}},
		"empty user":           {a, []Reservation{r("a", "", 1)}},
		"user with ':'":        {a, []Reservation{r("a", "1:1", 1)}},
		"user over 64 bytes":   {a, []Reservation{r("a", strings.Repeat("7", MaxIDLen+1), 1)}},
		"empty ID":             {a, []Reservation{r("", "1", 1)}},
		"long ID":              {a, []Reservation{r(string(make([]byte, 129)), "1", 1)}},
		"freed entry":          {a, []Reservation{{ID: "a", User: "1", Qty: 1, State: Freed}}},
		"reserved before 1970": {a, []Reservation{{ID: "a", User: "1", Qty: 1, ReservedAt: time.Unix(-5, 0)}}},
		"bad activity":         {Activity{ID: "1", Stock: -1}, nil},
		"stock above 2^53-1":   {Activity{ID: "1", Stock: MaxQuantity + 1}, nil},
	} {
		_, err := d.Rebuild(ctx, tc.a, tc.live)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	assert.Equal(t, before, snapshot(t, rdb, prefix))

	// Exactly the stock, and exactly the limit, are fine.
	st, err := d.Rebuild(ctx, a, []Reservation{r("a", "1", 2), r("b", "2", 2), r("c", "3", 1)})
	require.NoError(t, err)
	assert.Zero(t, st.Remaining)
	assert.EqualValues(t, 3, st.Buyers)
	assert.EqualValues(t, 3, st.LedgerEntries)
	assert.False(t, st.Frozen)
	assert.NotZero(t, st.Epoch)
	assert.Equal(t, "0", hgetall(t, rdb, activityKeys(prefix, "1").meta)["stock"])
	assert.NotContains(t, hgetall(t, rdb, activityKeys(prefix, "1").ledger), "x", "the old ledger is gone")
}

// TestRebuildTenThousand: 10,000 live reservations in one Rebuild call, on
// every Redis available (the real Cluster too: all keys in one slot).
func TestRebuildTenThousand(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		k := activityKeys(prefix, "1")
		const n, users = 10000, 4000
		a := Activity{ID: "1", Stock: 30000, PerUserLimit: 6} // users 2, 4, … hold 3 × 2
		live := make([]Reservation, n)
		var sum int64
		per := map[string]int64{}
		for i := range live {
			u := uid(i%users + 1)
			q := int64(i%2 + 1)
			live[i] = Reservation{ID: fmt.Sprintf("order-%06d", i), User: u, Qty: q}
			sum += q
			per[u] += q
		}
		st, err := d.Rebuild(ctx, a, live) // meta absent
		require.NoError(t, err)
		assert.EqualValues(t, a.Stock-sum, st.Remaining)
		assert.EqualValues(t, n, st.LedgerEntries)
		assert.EqualValues(t, users, st.Buyers)

		assert.EqualValues(t, a.Stock-sum, hint(t, rdb, k.meta, "stock"))
		led := hgetall(t, rdb, k.ledger)
		require.Len(t, led, n)
		assert.Regexp(t, `^1:1:R:\d+$`, led["order-000000"])
		assert.Regexp(t, `^4000:2:R:\d+$`, led["order-003999"])
		buyers := hgetall(t, rdb, k.buyers)
		require.Len(t, buyers, users)
		for u, q := range per {
			assert.Equal(t, strconv.FormatInt(q, 10), buyers[u])
		}
		for _, key := range k.list()[:3] { // ever and adj are not written by a rebuild
			ttl, err := rdb.PTTL(ctx, key).Result()
			require.NoError(t, err)
			assert.Greater(t, ttl, defaultTTL-time.Hour, "%s expires like a loaded activity", key)
		}
		sumL, _ := heldSum(ledger(t, d, "1"))
		assert.EqualValues(t, a.Stock, hint(t, rdb, k.meta, "stock")+sumL, "conservation")

		// The rebuilt activity sells and releases normally.
		rr, err := d.Release(ctx, "1", "order-000001")
		require.NoError(t, err)
		assert.Equal(t, ReleaseDone, rr.Status)
		assert.EqualValues(t, 2, rr.Qty)
		reserveOK(t, d, "1", "2", 1, "new")
		assert.Equal(t, LimitReached, reserveStatus(t, d, "1", "1", 5, "big"), "user 1 holds 3 of 6")
	})
}

// TestFenceObserve covers the verdicts one by one, including the orderings
// concurrency produces.
func TestFenceObserve(t *testing.T) {
	t.Parallel()
	const e1, e2 = 111, 222
	base := fenceReply{epoch: e1, seq: 5, exp: 10_000, born: 1_000, origin: originLoad}
	at := func(r fenceReply, seq int64) fenceReply { r.seq = seq; return r }
	newer := func(origin int64) fenceReply {
		return fenceReply{epoch: e2, seq: 0, exp: 20_000, born: 2_000, origin: origin}
	}

	t.Run("first reply is adopted", func(t *testing.T) {
		var s actState
		assert.Equal(t, verdict{}, s.observe(s.snap(), base))
		assert.Equal(t, fenceSnap{known: true, epoch: e1, seq: 5, exp: 10_000, born: 1_000}, s.snap())
	})
	t.Run("replies out of order are not a rollback", func(t *testing.T) {
		var s actState
		s.observe(s.snap(), base)
		sn := s.snap() // two calls sent now
		assert.Equal(t, verdict{}, s.observe(sn, at(base, 7)))
		assert.Equal(t, verdict{}, s.observe(sn, at(base, 6)), "6 was written before 7, both after 5")
		assert.EqualValues(t, 7, s.snap().seq)
	})
	t.Run("a call sent after seq 7 was seen that answers 6 is a rollback", func(t *testing.T) {
		var s actState
		s.observe(s.snap(), at(base, 7))
		sn := s.snap()
		v := s.observe(sn, at(base, 6))
		assert.True(t, v.frozen)
		assert.True(t, v.freeze)
		assert.Contains(t, v.reason, "rolled back")
		// Another call in flight at the same time sees the same loss: Frozen, not reported twice.
		v = s.observe(sn, at(base, 6))
		assert.Equal(t, verdict{frozen: true}, v)
		// Calls sent after the report judge against the new baseline.
		assert.Equal(t, verdict{}, s.observe(s.snap(), at(base, 7)))
	})
	t.Run("a newer Load is a loss, a newer Rebuild, Reset or placeholder is not", func(t *testing.T) {
		for origin, lost := range map[int64]bool{originLoad: true, originReset: false, originRebuild: false, originPlaceholder: false} {
			var s actState
			s.observe(s.snap(), base)
			v := s.observe(s.snap(), newer(origin))
			assert.Equal(t, lost, v.frozen, "origin %d", origin)
			assert.EqualValues(t, e2, s.snap().epoch, "origin %d: the reply is the new baseline either way", origin)
		}
	})
	t.Run("a Load after the old copy expired is a new sale", func(t *testing.T) {
		var s actState
		s.observe(s.snap(), base)
		later := newer(originLoad)
		later.born = base.exp
		assert.Equal(t, verdict{}, s.observe(s.snap(), later))
		assert.EqualValues(t, e2, s.snap().epoch)
	})
	t.Run("an older epoch is a rollback whatever made it", func(t *testing.T) {
		var s actState
		s.observe(s.snap(), newer(originRebuild))
		older := base
		older.origin = originRebuild
		v := s.observe(s.snap(), older)
		assert.True(t, v.frozen)
		assert.Contains(t, v.reason, "rolled back")
	})
	t.Run("a reply sent before a rebuild does not undo it", func(t *testing.T) {
		var s actState
		s.observe(s.snap(), base)
		sn := s.snap()
		assert.Equal(t, verdict{}, s.observe(s.snap(), newer(originRebuild)))
		assert.Equal(t, verdict{}, s.observe(sn, at(base, 6)), "ran before the rebuild")
		assert.EqualValues(t, e2, s.snap().epoch)
	})
	t.Run("gone before exp is a loss, at exp it is the end", func(t *testing.T) {
		var s actState
		s.observe(s.snap(), base)
		v := s.observeGone(s.snap(), base.exp-1)
		assert.True(t, v.frozen)
		assert.False(t, v.freeze, "nothing left to freeze")
		assert.Contains(t, v.reason, "gone")
		assert.Equal(t, verdict{frozen: true}, s.observeGone(s.snap(), base.exp-1), "reported once")
		assert.Equal(t, verdict{}, s.observeGone(s.snap(), base.exp), "expired: forgotten")
		assert.False(t, s.snap().known)
		assert.Equal(t, verdict{}, s.observeGone(s.snap(), base.exp+1))
	})
	t.Run("a reload after the keys were gone is a loss; a placeholder is not", func(t *testing.T) {
		var s actState
		s.observe(s.snap(), base)
		s.observeGone(s.snap(), 5_000)
		assert.True(t, s.observe(s.snap(), newer(originLoad)).frozen)
		var p actState
		p.observe(p.snap(), base)
		p.observeGone(p.snap(), 5_000)
		assert.Equal(t, verdict{}, p.observe(p.snap(), newer(originPlaceholder)))
	})
	t.Run("meta without a fence is not judged", func(t *testing.T) {
		var s actState
		assert.Equal(t, verdict{}, s.observe(s.snap(), fenceReply{}))
		assert.False(t, s.snap().known)
		assert.Equal(t, verdict{}, s.observeGone(s.snap(), 1))
	})
}

// TestNoFalseLossUnderConcurrency: 2,000 reserves and releases racing on one
// activity report no loss: replies arrive out of order, and only a reply
// sent after a higher seq was seen may be judged a rollback.
func TestNoFalseLossUnderConcurrency(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		var losses lossLog
		d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook), WithoutSoldOutCache())
		mustLoad(t, d, Activity{ID: "1", Stock: 300})
		var (
			wg       sync.WaitGroup
			sem      = make(chan struct{}, inflight)
			frozen   atomic.Int64
			reserved atomic.Int64
			fails    atomic.Int64
		)
		for i := range 1000 {
			id := "c" + strconv.Itoa(i)
			for _, release := range []bool{false, true} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					if release {
						if _, err := d.Release(ctx, "1", id); err != nil {
							fails.Add(1)
						}
						return
					}
					res, err := d.Reserve(ctx, Request{Activity: "1", User: uuidOf(i + 1), Qty: 1, ReservationID: id})
					switch {
					case err != nil:
						fails.Add(1)
					case res.Status == Frozen:
						frozen.Add(1)
					case res.Status == Reserved:
						reserved.Add(1)
					}
				}()
			}
		}
		wg.Wait()
		assert.Zero(t, fails.Load())
		assert.Zero(t, frozen.Load())
		assert.Zero(t, losses.total(), "%v", losses.get("1"))
		k := activityKeys(prefix, "1")
		// Each ID is released once: a release or a tombstone, one write each.
		assert.EqualValues(t, reserved.Load()+1000, hint(t, rdb, k.meta, "seq"), "every reservation, release and tombstone counted")
		sum, _ := heldSum(ledger(t, d, "1"))
		assert.EqualValues(t, 300, hint(t, rdb, k.meta, "stock")+sum)
	})
}

// TestLegacyMetaIsNotJudged: meta written before the fence (no epoch) still
// sells, and its loss is not reported (there is nothing to compare).
func TestLegacyMetaIsNotJudged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	var losses lossLog
	d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
	k := activityKeys(prefix, "1")
	require.NoError(t, rdb.HSet(ctx, k.meta, "stock", 2, "total", 2, "limit", 1, "start", 0, "end", 0, "exp", 0).Err())
	reserveOK(t, d, "1", "1", 1, "a")
	rr, err := d.Release(ctx, "1", "a")
	require.NoError(t, err)
	assert.Equal(t, ReleaseDone, rr.Status)
	wipe(t, rdb, k)
	assert.Equal(t, NotLoaded, reserveStatus(t, d, "1", "2", 1, "b"))
	assert.Zero(t, losses.total())
}

// TestReleaseRevealsLoss: a Release is judged by the fence too; it changes
// nothing in its own answer, but reports the loss and freezes.
func TestReleaseRevealsLoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	var losses lossLog
	d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
	k := activityKeys(prefix, "1")
	a := Activity{ID: "1", Stock: 3}
	mustLoad(t, d, a)
	reserveOK(t, d, "1", "1", 1, "a")

	wipe(t, rdb, k)
	rr, err := d.Release(ctx, "1", "a")
	require.NoError(t, err)
	assert.Equal(t, ReleaseNotLoaded, rr.Status)
	require.Len(t, losses.get("1"), 1)
	assert.Contains(t, losses.get("1")[0], "gone")

	// A blind reload is then caught by the next Release too, and frozen.
	fresh := newTestDeductor(t, rdb, prefix)
	mustLoad(t, fresh, a)
	rr, err = d.Release(ctx, "1", "a")
	require.NoError(t, err)
	assert.Equal(t, ReleaseUnknown, rr.Status, "the reloaded copy does not know a")
	require.Len(t, losses.get("1"), 2)
	assert.Contains(t, losses.get("1")[1], "Load")
	assert.Equal(t, "1", hgetall(t, rdb, k.meta)["frozen"])
	assert.Equal(t, Frozen, reserveStatus(t, fresh, "1", "2", 1, "b"))
}
