package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Compile-time checks: New accepts every go-redis client kind, including the
// failover (Sentinel) ones, which are a *Client and a *ClusterClient.
var (
	_ redis.Scripter = (*redis.Client)(nil)
	_ redis.Scripter = (*redis.ClusterClient)(nil)
	_ redis.Scripter = (*redis.Ring)(nil)
	_ redis.Scripter = redis.UniversalClient(nil)
	_ subscriber     = (*redis.Client)(nil)
	_ subscriber     = (*redis.ClusterClient)(nil)
	_ subscriber     = (*redis.Ring)(nil)
)

func TestNewAcceptsEveryClientKind(t *testing.T) {
	t.Parallel()
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	failoverCluster := redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _, _, _, _ = failover.Close(), failoverCluster.Close(), ring.Close(), cluster.Close() })
	for _, c := range []redis.Scripter{failover, failoverCluster, ring, cluster} {
		_, err := New(c)
		require.NoError(t, err)
	}
	_, err := New(nil)
	require.Error(t, err)
	_, err = New(failover, WithRecheckInterval(0))
	require.Error(t, err)
	_, err = New(failover, WithClock(nil))
	require.Error(t, err)
	_, err = New(failover, WithKeyPrefix("x{y}:"))
	require.Error(t, err, "a brace in the prefix would move the hash tag")
}

// TestReserveTenThousandBuyers: 10,000 goroutines, distinct users with
// UUID IDs, stock 100 → exactly 100 reserved, remaining 0, no user twice;
// counted from the results and from the ledger.
func TestReserveTenThousandBuyers(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		const activity, stock, n = "42", 100, 10000
		mustLoad(t, d, Activity{ID: activity, Stock: stock})

		var (
			wg        sync.WaitGroup
			start     = make(chan struct{})
			reserved  atomic.Int64
			soldOut   atomic.Int64
			local     atomic.Int64
			mu        sync.Mutex
			winners   = map[string]string{}
			firstErrs []error
		)
		sem := make(chan struct{}, inflight)
		for i := range n {
			wg.Add(1)
			go func(user string) {
				defer wg.Done()
				<-start
				sem <- struct{}{}
				defer func() { <-sem }()
				res, err := d.Reserve(ctx, Request{Activity: activity, User: user, Qty: 1, ReservationID: "r" + user})
				if err != nil {
					mu.Lock()
					firstErrs = append(firstErrs, err)
					mu.Unlock()
					return
				}
				switch res.Status {
				case Reserved:
					reserved.Add(1)
					mu.Lock()
					if _, dup := winners[user]; dup {
						firstErrs = append(firstErrs, fmt.Errorf("user %s won twice", user))
					}
					winners[user] = "r" + user
					mu.Unlock()
				case SoldOut:
					soldOut.Add(1)
					if res.Local {
						local.Add(1)
					}
				default:
					mu.Lock()
					firstErrs = append(firstErrs, fmt.Errorf("unexpected status %v", res.Status))
					mu.Unlock()
				}
			}(uuidOf(i + 1))
		}
		close(start)
		wg.Wait()
		require.Empty(t, firstN(firstErrs, 5), "%d failures", len(firstErrs))
		assert.EqualValues(t, stock, reserved.Load())
		assert.EqualValues(t, n-stock, soldOut.Load())
		t.Logf("%d refused in-process without a Redis call", local.Load())

		rem, err := d.Remaining(ctx, activity)
		require.NoError(t, err)
		assert.Zero(t, rem)

		l := ledger(t, d, activity)
		require.Len(t, l, stock)
		sum, per := heldSum(l)
		assert.EqualValues(t, stock, sum)
		assert.Len(t, per, stock, "a user appears twice in the ledger")
		for _, r := range l {
			assert.Equal(t, winners[r.User], r.ID, "ledger entry without a matching Reserved result")
			assert.EqualValues(t, 1, r.Qty)
		}
		st, err := d.Stats(ctx, activity)
		require.NoError(t, err)
		assert.EqualValues(t, stock, st.Buyers)
	})
}

// TestReserveMultiQty: qty 1–3, cap 3, users sending several requests:
// stock is conserved, no user holds more than 3, every SoldOut was right.
func TestReserveMultiQty(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		const activity, stock, n, users = "7", 100, 10000, 2500
		mustLoad(t, d, Activity{ID: activity, Stock: stock, PerUserLimit: 3})

		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			mu    sync.Mutex
			got   = map[string]int64{} // user -> units from Reserved results
			total int64
			fails []error
		)
		sem := make(chan struct{}, inflight)
		for i := range n {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				sem <- struct{}{}
				defer func() { <-sem }()
				req := Request{Activity: activity, User: uid(i%users + 1), Qty: int64(i%3 + 1), ReservationID: fmt.Sprintf("q%d", i)}
				res, err := d.Reserve(ctx, req)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					fails = append(fails, err)
				case res.Status == Reserved:
					got[req.User] += req.Qty
					total += req.Qty
				case res.Status == SoldOut:
					if res.Remaining >= req.Qty {
						fails = append(fails, fmt.Errorf("sold out with %d left for qty %d", res.Remaining, req.Qty))
					}
				case res.Status == LimitReached:
					if res.Held+req.Qty <= 3 {
						fails = append(fails, fmt.Errorf("limit reached with %d held for qty %d", res.Held, req.Qty))
					}
				default:
					fails = append(fails, fmt.Errorf("unexpected status %v", res.Status))
				}
			}(i)
		}
		close(start)
		wg.Wait()
		require.Empty(t, firstN(fails, 5), "%d failures", len(fails))
		for u, q := range got {
			assert.LessOrEqual(t, q, int64(3), "user %s holds %d", u, q)
		}
		rem, err := d.Remaining(ctx, activity)
		require.NoError(t, err)
		assert.EqualValues(t, stock, rem+total, "results: remaining + reserved != stock")
		assert.Less(t, rem, int64(3))

		sum, per := heldSum(ledger(t, d, activity))
		assert.EqualValues(t, stock, rem+sum, "ledger: remaining + held != stock")
		assert.Equal(t, got, per)
	})
}

// TestReserveRetriesOneReservationID: 1,000 concurrent retries of one reservation ID
// deduct once and all see the same outcome.
func TestReserveRetriesOneReservationID(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		mustLoad(t, d, Activity{ID: "5", Stock: 100, PerUserLimit: 2})
		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			sem      = make(chan struct{}, inflight)
			first    atomic.Int64
			replayed atomic.Int64
			other    atomic.Int64
		)
		for range 1000 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				sem <- struct{}{}
				defer func() { <-sem }()
				res, err := d.Reserve(ctx, Request{Activity: "5", User: "9", Qty: 2, ReservationID: "same"})
				switch {
				case err != nil || res.Status != Reserved || res.Held != 2:
					other.Add(1)
				case res.Replayed:
					replayed.Add(1)
				default:
					first.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		assert.Zero(t, other.Load())
		assert.EqualValues(t, 1, first.Load())
		assert.EqualValues(t, 999, replayed.Load())
		rem, err := d.Remaining(ctx, "5")
		require.NoError(t, err)
		assert.EqualValues(t, 98, rem)
		assert.Len(t, ledger(t, d, "5"), 1)
	})
}

// TestReleaseRacesReserve: reserves, releases and repeated releases of the
// same IDs race; afterwards remaining + held (ledger) = initial, each ID was
// released at most once, and the buyers hash agrees with the ledger.
func TestReleaseRacesReserve(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		const activity, stock, ids = "3", 60, 200
		mustLoad(t, d, Activity{ID: activity, Stock: stock})

		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			sem      = make(chan struct{}, inflight)
			done     [ids]atomic.Int64 // ReleaseDone per ID
			reserved [ids]atomic.Bool
			failures atomic.Int64
		)
		for i := range ids {
			id := fmt.Sprintf("x%d", i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				sem <- struct{}{}
				defer func() { <-sem }()
				res, err := d.Reserve(ctx, Request{Activity: activity, User: uid(i + 1), Qty: 1, ReservationID: id})
				if err != nil {
					failures.Add(1)
					return
				}
				if res.Status == Reserved && !res.Replayed {
					reserved[i].Store(true)
				}
			}()
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					sem <- struct{}{}
					defer func() { <-sem }()
					rr, err := d.Release(ctx, activity, id)
					if err != nil {
						failures.Add(1)
						return
					}
					if rr.Status == ReleaseDone {
						done[i].Add(1)
					}
				}()
			}
		}
		close(start)
		wg.Wait()
		require.Zero(t, failures.Load())

		rem, err := d.Remaining(ctx, activity)
		require.NoError(t, err)
		l := ledger(t, d, activity)
		sum, per := heldSum(l)
		assert.EqualValues(t, stock, rem+sum, "conservation: remaining %d + held %d", rem, sum)
		var released int64
		for i := range ids {
			n := done[i].Load()
			assert.LessOrEqual(t, n, int64(1), "id %d released %d times", i, n)
			if n == 1 {
				released++
				assert.True(t, reserved[i].Load(), "id %d released without a reservation", i)
			}
		}
		var reservedCount int64
		for i := range ids {
			if reserved[i].Load() {
				reservedCount++
			}
		}
		assert.EqualValues(t, reservedCount-released, sum, "held = reserved - released")
		st, err := d.Stats(ctx, activity)
		require.NoError(t, err)
		assert.EqualValues(t, len(per), st.Buyers, "buyers hash disagrees with ledger")
		assert.EqualValues(t, ids, st.LedgerEntries, "every ID ends in the ledger: held, freed or tombstone")
	})
}

// inflight bounds how many of the started goroutines are inside Reserve or
// Release at once: more than the miniredis client's connection pool (20 on
// two cores), so calls really race on the server, but few enough that
// miniredis under -race on a loaded CI machine never keeps a caller waiting
// past go-redis's pool timeout. All goroutines exist and are released
// together; the semaphore only meters them.
const inflight = 64

func firstN(errs []error, n int) []error {
	if len(errs) > n {
		return errs[:n]
	}
	return errs
}

func TestReleaseSemantics(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		var hooked atomic.Int64
		d := newTestDeductor(t, rdb, prefix, WithOnRelease(func(context.Context, string, string, ReleaseResult, error) { hooked.Add(1) }))
		mustLoad(t, d, Activity{ID: "1", Stock: 5, PerUserLimit: 3})

		res, err := d.Reserve(ctx, Request{Activity: "1", User: "10", Qty: 3, ReservationID: "a"})
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)
		assert.EqualValues(t, 2, res.Remaining)
		assert.EqualValues(t, 3, res.Held)

		rr, err := d.Release(ctx, "1", "a")
		require.NoError(t, err)
		assert.Equal(t, ReleaseResult{Status: ReleaseDone, Qty: 3, User: "10", Remaining: 5}, rr)
		assert.True(t, (rr.Status == ReleaseDone))

		rr, err = d.Release(ctx, "1", "a")
		require.NoError(t, err)
		assert.Equal(t, ReleaseDuplicate, rr.Status)
		assert.EqualValues(t, 5, rr.Remaining)

		// A retry of the released request does not deduct again.
		res, err = d.Reserve(ctx, Request{Activity: "1", User: "10", Qty: 3, ReservationID: "a"})
		require.NoError(t, err)
		assert.Equal(t, Released, res.Status)
		assert.True(t, res.Replayed)
		assert.EqualValues(t, 5, res.Remaining)
		assert.ErrorIs(t, res.Err(), ErrReleased)

		// The buyer may buy again with a new reservation ID.
		res, err = d.Reserve(ctx, Request{Activity: "1", User: "10", Qty: 3, ReservationID: "b"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)

		// Release before Reserve: a tombstone; the late Reserve deducts nothing.
		rr, err = d.Release(ctx, "1", "late")
		require.NoError(t, err)
		assert.Equal(t, ReleaseUnknown, rr.Status)
		res, err = d.Reserve(ctx, Request{Activity: "1", User: "11", Qty: 1, ReservationID: "late"})
		require.NoError(t, err)
		assert.Equal(t, Released, res.Status)
		rem, err := d.Remaining(ctx, "1")
		require.NoError(t, err)
		assert.EqualValues(t, 2, rem)
		r, ok, err := d.Lookup(ctx, "1", "late")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, Tombstone, r.State)

		// Not loaded.
		rr, err = d.Release(ctx, "999", "a")
		require.NoError(t, err)
		assert.Equal(t, ReleaseNotLoaded, rr.Status)
		assert.EqualValues(t, 4, hooked.Load())
	})
}

func TestReserveOutcomes(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix, WithoutSoldOutCache())
		mustLoad(t, d, Activity{ID: "1", Stock: 3, PerUserLimit: 2})

		res, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 2, ReservationID: "1"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
		assert.True(t, (res.Status == Reserved))
		assert.NoError(t, res.Err())
		assert.EqualValues(t, 2, res.Limit)

		res, err = d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "2"})
		require.NoError(t, err)
		assert.Equal(t, LimitReached, res.Status)
		assert.EqualValues(t, 2, res.Held)
		assert.ErrorIs(t, res.Err(), ErrLimitReached)

		res, err = d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 2, ReservationID: "3"})
		require.NoError(t, err)
		assert.Equal(t, SoldOut, res.Status, "1 left, 2 asked")
		assert.EqualValues(t, 1, res.Remaining)

		res, err = d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "4"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
		assert.Zero(t, res.Remaining)

		res, err = d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "5"})
		require.NoError(t, err)
		assert.Equal(t, SoldOut, res.Status)
		assert.ErrorIs(t, res.Err(), ErrSoldOut)

		res, err = d.Reserve(ctx, Request{Activity: "2", User: "3", Qty: 1, ReservationID: "6"})
		require.NoError(t, err)
		assert.Equal(t, NotLoaded, res.Status)
		assert.ErrorIs(t, res.Err(), ErrNotLoaded)

		// Same ID, other user or qty: conflict, nothing written.
		_, err = d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 2, ReservationID: "1"})
		assert.ErrorIs(t, err, ErrIDConflict)
		_, err = d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "1"})
		assert.ErrorIs(t, err, ErrIDConflict)
		assert.Len(t, ledger(t, d, "1"), 2)
	})
}

// TestWindowUsesRedisTime moves Redis time with miniredis SetTime while the
// application clock stays far away: the window follows Redis.
func TestWindowUsesRedisTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	// miniredis time (SetTime) and the app clock are both fake and never
	// meet real time: no real server, no real deadline.
	start := testenv.Epoch()
	app := testenv.NewEpochClock(-48 * time.Hour) // a badly skewed app server
	d := newTestDeductor(t, rdb, testenv.Prefix(t), WithClock(app))
	m.SetTime(start.Add(-time.Hour))
	mustLoad(t, d, Activity{ID: "1", Stock: 10, Start: start, End: start.Add(time.Hour)})

	req := func(id string) Result {
		res, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: id})
		require.NoError(t, err)
		return res
	}
	m.SetTime(start.Add(-time.Millisecond))
	assert.Equal(t, NotStarted, req("a").Status)
	assert.ErrorIs(t, req("a").Err(), ErrNotStarted)
	m.SetTime(start)
	res := req("b")
	assert.Equal(t, Reserved, res.Status)
	assert.Equal(t, start, res.ReservedAt.UTC())
	m.SetTime(start.Add(time.Hour - time.Millisecond))
	assert.Equal(t, LimitReached, req("c").Status)
	m.SetTime(start.Add(time.Hour))
	assert.Equal(t, Ended, req("d").Status)
	assert.ErrorIs(t, req("d").Err(), ErrEnded)
	// A replay of the reservation made in the window still answers Reserved.
	assert.Equal(t, Reserved, req("b").Status)
	rem, err := d.Remaining(ctx, "1")
	require.NoError(t, err)
	assert.EqualValues(t, 9, rem)
}

func TestLoadSetIfAbsentAndReset(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		a := Activity{ID: "8", Stock: 10}
		mustLoad(t, d, a)
		res, err := d.Reserve(ctx, Request{Activity: "8", User: "1", Qty: 1, ReservationID: "a"})
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)

		loaded, err := d.Load(ctx, Activity{ID: "8", Stock: 500, PerUserLimit: 5})
		require.NoError(t, err)
		assert.False(t, loaded, "a second Load must not reset a live sale")
		rem, err := d.Remaining(ctx, "8")
		require.NoError(t, err)
		assert.EqualValues(t, 9, rem)

		require.NoError(t, d.Reset(ctx, Activity{ID: "8", Stock: 20, PerUserLimit: 2}))
		st, err := d.Stats(ctx, "8")
		require.NoError(t, err)
		assert.True(t, st.Loaded)
		assert.EqualValues(t, 20, st.Remaining)
		assert.EqualValues(t, 20, st.Total)
		assert.EqualValues(t, 2, st.Limit)
		assert.Zero(t, st.Buyers)
		assert.Zero(t, st.LedgerEntries)
		assert.WithinDuration(t, time.Now().Add(defaultTTL), st.ExpiresAt, time.Minute)

		_, err = d.Remaining(ctx, "9")
		assert.ErrorIs(t, err, ErrNotLoaded)
		st, err = d.Stats(ctx, "9")
		require.NoError(t, err)
		assert.False(t, st.Loaded)
	})
}

func TestLoadExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	now := testenv.Epoch() // miniredis time only
	m.SetTime(now)
	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	mustLoad(t, d, Activity{ID: "1", Stock: 1, Start: now, End: now.Add(time.Hour), TTL: time.Hour})
	_, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})
	require.NoError(t, err)
	k := activityKeys(testenv.Prefix(t), "1")
	for _, key := range k.list()[:3] { // ever and adj are not written here
		assert.Equal(t, 2*time.Hour, m.TTL(key), key)
	}
	// Redis time moves on with the TTLs (FastForward alone expires keys but
	// leaves TIME where it was, which a real server never does).
	m.SetTime(now.Add(2 * time.Hour))
	m.FastForward(2 * time.Hour)
	res, err := d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "b"})
	require.NoError(t, err)
	assert.Equal(t, NotLoaded, res.Status, "expired as planned: not a data loss")
	// An activity whose keys would expire at once is refused.
	_, err = d.Load(ctx, Activity{ID: "2", Stock: 1, Start: now.Add(-3 * time.Hour), End: now.Add(-2 * time.Hour), TTL: time.Hour})
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// snapshot dumps every key under prefix (type-aware) for no-state-change checks.
func snapshot(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		v, err := rdb.HGetAll(ctx, k).Result()
		require.NoError(t, err)
		out[k] = fmt.Sprint(v)
	}
	return out
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	d := newTestDeductor(t, rdb, prefix)
	mustLoad(t, d, Activity{ID: "1", Stock: 10, PerUserLimit: 2})
	_, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "ok"})
	require.NoError(t, err)
	before := snapshot(t, rdb, prefix)

	long := string(make([]byte, 129))
	for name, req := range map[string]Request{
		"empty activity":       {Activity: "", User: "1", Qty: 1, ReservationID: "x"},
		"activity with ':'":    {Activity: "1:2", User: "1", Qty: 1, ReservationID: "x"},
		"empty user":           {Activity: "1", User: "", Qty: 1, ReservationID: "x"},
		"user with '}'":        {Activity: "1", User: "a}", Qty: 1, ReservationID: "x"},
		"empty reservation ID": {Activity: "1", User: "1", Qty: 1, ReservationID: ""},
		"long reservation ID":  {Activity: "1", User: "1", Qty: 1, ReservationID: long},
		"zero qty":             {Activity: "1", User: "1", Qty: 0, ReservationID: "x"},
		"negative qty":         {Activity: "1", User: "1", Qty: -3, ReservationID: "x"},
		"qty above cap":        {Activity: "1", User: "2", Qty: 3, ReservationID: "x"},
	} {
		_, err := d.Reserve(ctx, req)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	_, err = d.Release(ctx, "", "ok")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = d.Release(ctx, "1", "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = d.Lookup(ctx, "1", "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = d.Remaining(ctx, "{1}")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = d.Reservations(ctx, "1 ", 0, 10)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = d.Stats(ctx, "")
	assert.ErrorIs(t, err, ErrInvalidArgument)

	now := testenv.Epoch() // validation only: never reaches Redis
	for name, a := range map[string]Activity{
		"empty ID":          {ID: "", Stock: 1},
		"ID with ':'":       {ID: "a:b", Stock: 1},
		"negative stock":    {ID: "2", Stock: -1},
		"negative limit":    {ID: "2", Stock: 1, PerUserLimit: -1},
		"negative TTL":      {ID: "2", Stock: 1, TTL: -time.Second},
		"end before start":  {ID: "2", Stock: 1, Start: now, End: now.Add(-time.Second)},
		"end equal start":   {ID: "2", Stock: 1, Start: now, End: now},
		"reset bad on live": {ID: "1", Stock: -5},
	} {
		_, err := d.Load(ctx, a)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.ErrorIs(t, d.Reset(ctx, a), ErrInvalidArgument, name)
	}
	assert.Equal(t, before, snapshot(t, rdb, prefix))
}

func TestRedisUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	d := newTestDeductor(t, rdb, prefix)
	mustLoad(t, d, Activity{ID: "1", Stock: 10})
	_, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})
	require.NoError(t, err)
	before := snapshot(t, rdb, prefix)

	check := func(name string) {
		_, err := d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "b"})
		assert.ErrorIs(t, err, ErrUnavailable, name)
		_, err = d.Release(ctx, "1", "a")
		assert.ErrorIs(t, err, ErrUnavailable, name)
		_, err = d.Load(ctx, Activity{ID: "3", Stock: 1})
		assert.ErrorIs(t, err, ErrUnavailable, name)
		_, err = d.Remaining(ctx, "1")
		assert.ErrorIs(t, err, ErrUnavailable, name)
	}
	for _, msg := range []string{"LOADING Redis is loading the dataset in memory", "MASTERDOWN Link with MASTER is down", "CLUSTERDOWN The cluster is down"} {
		m.SetError(msg)
		check(msg)
	}
	m.SetError("")
	assert.Equal(t, before, snapshot(t, rdb, prefix))

	// A script error that is not an outage is not reported as unavailable.
	m.SetError("ERR Error running script: boom")
	_, err = d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "b"})
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrUnavailable)
	m.SetError("")

	// A timed-out context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = d.Reserve(cctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "b"})
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, context.Canceled)

	// A closed server.
	m.Close()
	check("closed")
	m.Restart()
	assert.Equal(t, before, snapshot(t, rdb, prefix))
	res, err := d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "b"})
	require.NoError(t, err)
	assert.Equal(t, Reserved, res.Status)
}

func TestFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	var calls atomic.Int64
	fb := func(_ context.Context, req Request) (Result, error) {
		calls.Add(1)
		if req.User == "66" {
			return Result{}, errors.New("db down too")
		}
		return Result{Status: Reserved, Remaining: 41}, nil
	}
	d := newTestDeductor(t, rdb, testenv.Prefix(t), WithFallback(fb))
	mustLoad(t, d, Activity{ID: "1", Stock: 10})

	res, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})
	require.NoError(t, err)
	assert.False(t, res.Fallback)
	assert.Zero(t, calls.Load(), "fallback is only for outages")

	m.SetError("LOADING Redis is loading the dataset in memory")
	res, err = d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "b"})
	require.NoError(t, err)
	assert.True(t, res.Fallback)
	assert.Equal(t, Reserved, res.Status)
	_, err = d.Reserve(ctx, Request{Activity: "1", User: "66", Qty: 1, ReservationID: "c"})
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorContains(t, err, "db down too")
	assert.EqualValues(t, 2, calls.Load())
	// Bad input never reaches the fallback.
	_, err = d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 0, ReservationID: "d"})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.EqualValues(t, 2, calls.Load())
}

// TestScriptFlushMidRun flushes the script cache while buyers race: EVALSHA
// answers NOSCRIPT, Script.Run falls back to EVAL, and the sale stays exact.
func TestScriptFlushMidRun(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix, WithoutSoldOutCache())
		const stock, n = 50, 600
		mustLoad(t, d, Activity{ID: "1", Stock: stock})
		require.NoError(t, rdb.ScriptFlush(ctx).Err())

		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			sem      = make(chan struct{}, inflight)
			stop     = make(chan struct{})
			reserved atomic.Int64
			errs     atomic.Int64
			flushes  atomic.Int64
			flusher  = make(chan struct{})
		)
		go func() {
			defer close(flusher)
			<-start
			for {
				select {
				case <-stop:
					return
				default:
				}
				if rdb.ScriptFlush(ctx).Err() == nil {
					flushes.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		}()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				sem <- struct{}{}
				defer func() { <-sem }()
				res, err := d.Reserve(ctx, Request{Activity: "1", User: uuidOf(i + 1), Qty: 1, ReservationID: strconv.Itoa(i)})
				if err != nil {
					errs.Add(1)
					return
				}
				if res.Status == Reserved {
					reserved.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(stop)
		<-flusher // a flush still in flight counts too
		assert.Zero(t, errs.Load())
		assert.EqualValues(t, stock, reserved.Load())
		assert.Positive(t, flushes.Load())
		rem, err := d.Remaining(ctx, "1")
		require.NoError(t, err)
		assert.Zero(t, rem)
		sum, _ := heldSum(ledger(t, d, "1"))
		assert.EqualValues(t, stock, sum)
	})
}

func TestReservationsPages(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		mustLoad(t, d, Activity{ID: "4", Stock: 1000})
		for i := range 300 {
			_, err := d.Reserve(ctx, Request{Activity: "4", User: uid(i + 1), Qty: 1, ReservationID: fmt.Sprintf("p%d", i)})
			require.NoError(t, err)
		}
		for i := range 10 {
			_, err := d.Release(ctx, "4", fmt.Sprintf("p%d", i))
			require.NoError(t, err)
		}
		_, err := d.Release(ctx, "4", "ghost")
		require.NoError(t, err)
		l := ledger(t, d, "4")
		require.Len(t, l, 301)
		states := map[State]int{}
		for _, r := range l {
			states[r.State]++
		}
		assert.Equal(t, map[State]int{Held: 290, Freed: 10, Tombstone: 1}, states)
		assert.Equal(t, "1", l["p0"].User)
		assert.False(t, l["p0"].ReleasedAt.IsZero())
		assert.True(t, l["p299"].ReleasedAt.IsZero())
		r, ok, err := d.Lookup(ctx, "4", "p299")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, l["p299"], r)
		_, ok, err = d.Lookup(ctx, "4", "nope")
		require.NoError(t, err)
		assert.False(t, ok)
	})
}

// TestRing runs a sale on a Ring of two miniredis shards: the hash tag keeps
// an activity on one shard.
func TestRing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, m1 := testenv.Miniredis(t)
	_, m2 := testenv.Miniredis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": m1.Addr(), "b": m2.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	d := newTestDeductor(t, ring, testenv.Prefix(t))
	for i := 1; i <= 6; i++ {
		a := uid(i)
		if i%2 == 0 {
			a = uuidOf(i)
		}
		mustLoad(t, d, Activity{ID: a, Stock: 2})
		for u := 1; u <= 3; u++ {
			_, err := d.Reserve(ctx, Request{Activity: a, User: uid(u), Qty: 1, ReservationID: fmt.Sprint(u)})
			require.NoError(t, err)
		}
		rr, err := d.Release(ctx, a, "1")
		require.NoError(t, err)
		assert.Equal(t, ReleaseDone, rr.Status)
		rem, err := d.Remaining(ctx, a)
		require.NoError(t, err)
		assert.EqualValues(t, 1, rem)
	}
}

// scripted is a Scripter that answers every script with a fixed reply.
type scripted struct {
	redis.Scripter
	val any
	err error
}

func (s scripted) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return redis.NewCmdResult(s.val, s.err)
}

func (s scripted) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return redis.NewCmdResult(s.val, s.err)
}

func (s scripted) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return redis.NewCmdResult(s.val, s.err)
}

func (s scripted) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return redis.NewCmdResult(s.val, s.err)
}

func TestBadReplyIsAnErrorNotAPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, val := range map[string]any{
		"nil":          nil,
		"string":       "OK",
		"short":        []any{int64(1)},
		"wrong types":  []any{"1", int64(0), int64(0), int64(0), int64(0), int64(0)},
		"nested":       []any{[]any{}, int64(0), int64(0), int64(0), int64(0), int64(0)},
		"unknown code": []any{int64(99), int64(0), int64(0), int64(0), int64(0), int64(0)},
		"long":         []any{int64(1), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0)},
	} {
		d, err := New(scripted{val: val})
		require.NoError(t, err)
		req := Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"}
		assert.NotPanics(t, func() {
			_, err = d.Reserve(ctx, req)
			assert.Error(t, err, name)
			_, err = d.Release(ctx, "1", "a")
			assert.Error(t, err, name)
			_, err = d.Load(ctx, Activity{ID: "1", Stock: 1})
			assert.Error(t, err, name)
			_, err = d.Remaining(ctx, "1")
			assert.Error(t, err, name)
			_, err = d.Stats(ctx, "1")
			assert.Error(t, err, name)
			_, _, err = d.Reservations(ctx, "1", 0, 10)
			assert.Error(t, err, name)
			assert.Error(t, d.Freeze(ctx, "1"), name)
			_, err = d.Rebuild(ctx, Activity{ID: "1", Stock: 1}, nil)
			assert.Error(t, err, name)
		}, name)
	}
	d, err := New(scripted{val: []any{"0", []any{"id", "garbage"}}})
	require.NoError(t, err)
	_, _, err = d.Reservations(ctx, "1", 0, 10)
	assert.ErrorIs(t, err, ErrBadReply)
	d, err = New(scripted{val: "1:x:R:5"})
	require.NoError(t, err)
	_, _, err = d.Lookup(ctx, "1", "a")
	assert.ErrorIs(t, err, ErrBadReply)
	d, err = New(scripted{val: int64(7)})
	require.NoError(t, err)
	_, _, err = d.Lookup(ctx, "1", "a")
	assert.ErrorIs(t, err, ErrBadReply, "a non-string record is a bad reply")
	assert.NotErrorIs(t, err, ErrUnavailable)
	d, err = New(scripted{val: []any{int64(42), int64(0), int64(0), int64(0), int64(0), int64(0)}})
	require.NoError(t, err)
	_, err = d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})
	assert.ErrorIs(t, err, ErrBadReply)

	// Directory answers: a shard count out of range, or a shard answering
	// as a directory (every call here gets the same reply), are bad replies,
	// never a loop.
	zeros := func(head ...any) []any {
		out := append([]any(nil), head...)
		for len(out) < 11 {
			out = append(out, int64(0))
		}
		return out
	}
	for name, val := range map[string]any{
		"reserve: 999 shards":         zeros(int64(9), int64(maxShards+1)),
		"reserve: shard as directory": zeros(int64(9), int64(3)),
	} {
		d, err = New(scripted{val: val})
		require.NoError(t, err)
		_, err = d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})
		assert.ErrorIs(t, err, ErrBadReply, name)
	}
	d, err = New(scripted{val: []any{int64(6), int64(3), int64(0), "", int64(0), int64(0), int64(0), int64(0), int64(0), int64(0)}})
	require.NoError(t, err)
	_, err = d.Release(ctx, "1", "a")
	assert.ErrorIs(t, err, ErrBadReply, "release: a shard answering as a directory")
	d, err = New(scripted{val: []any{int64(2), int64(1)}})
	require.NoError(t, err)
	_, err = d.Held(ctx, "1", "1")
	assert.ErrorIs(t, err, ErrBadReply, "held: a directory of 1 shard")
}

// TestQuantitiesAboveLuaPrecision: stock, qty and per-user limit travel
// through Lua numbers (doubles), exact only up to 2^53-1. Above that they
// are refused at the Go boundary with the package's invalid-input sentinel,
// and nothing is written.
func TestQuantitiesAboveLuaPrecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	d := newTestDeductor(t, rdb, prefix)
	require.Equal(t, int64(9007199254740991), MaxQuantity)

	for name, a := range map[string]Activity{
		"stock 2^53":        {ID: "1", Stock: MaxQuantity + 1},
		"stock 2^63-1":      {ID: "1", Stock: 1<<63 - 1},
		"limit 2^53":        {ID: "1", Stock: 1, PerUserLimit: MaxQuantity + 1},
		"stock & limit big": {ID: "1", Stock: 1 << 60, PerUserLimit: 1 << 60},
	} {
		_, err := d.Load(ctx, a)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.ErrorContains(t, err, "2^53-1", name)
		assert.ErrorIs(t, d.Reset(ctx, a), ErrInvalidArgument, name)
		_, err = d.Rebuild(ctx, a, nil)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "nothing written")

	// The largest exact value works end to end, digit for digit.
	k := activityKeys(prefix, "2")
	mustLoad(t, d, Activity{ID: "2", Stock: MaxQuantity, PerUserLimit: MaxQuantity})
	res, err := d.Reserve(ctx, Request{Activity: "2", User: "1", Qty: MaxQuantity - 1, ReservationID: "big"})
	require.NoError(t, err)
	require.Equal(t, Reserved, res.Status)
	assert.EqualValues(t, 1, res.Remaining)
	assert.Equal(t, "1", hgetall(t, rdb, k.meta)["stock"])
	assert.Equal(t, "9007199254740990", hgetall(t, rdb, k.buyers)["1"])

	// A qty above it never reaches Redis: with every command failing, the
	// answer is still the input error, not ErrUnavailable.
	before := snapshot(t, rdb, prefix)
	m.SetError("LOADING should not be reached")
	_, err = d.Reserve(ctx, Request{Activity: "2", User: "2", Qty: MaxQuantity + 1, ReservationID: "huge"})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.NotErrorIs(t, err, ErrUnavailable)
	m.SetError("")
	assert.Equal(t, before, snapshot(t, rdb, prefix))
}
