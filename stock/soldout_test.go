package stock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/lifecycle"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type soldOutEvents struct {
	mu sync.Mutex
	ev []bool
}

func (e *soldOutEvents) hook(_ context.Context, _ string, soldOut bool) {
	e.mu.Lock()
	e.ev = append(e.ev, soldOut)
	e.mu.Unlock()
}

func (e *soldOutEvents) get() []bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]bool(nil), e.ev...)
}

// sellOut loads activity 1 with one unit and sells it to user 1, then lets
// user 2 see SoldOut so the process sets its flag.
func sellOut(t *testing.T, d *Deductor) {
	t.Helper()
	ctx := context.Background()
	mustLoad(t, d, Activity{ID: "1", Stock: 1})
	res, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "win"})
	require.NoError(t, err)
	require.Equal(t, Reserved, res.Status)
	require.False(t, d.SoldOut("1"), "a Reserved answer does not set the flag")
	res, err = d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "lose"})
	require.NoError(t, err)
	require.Equal(t, SoldOut, res.Status)
	require.False(t, res.Local)
	require.True(t, d.SoldOut("1"))
}

// TestSoldOutRefusedInProcess proves the refusal does not reach Redis: with
// every Redis command failing, Reserve still answers SoldOut locally.
func TestSoldOutRefusedInProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	clock := testenv.NewEpochClock(0)
	var ev soldOutEvents
	d := newTestDeductor(t, rdb, testenv.Prefix(t), WithClock(clock), WithOnSoldOut(ev.hook))
	sellOut(t, d)

	m.SetError("LOADING down")
	res, err := d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "x"})
	require.NoError(t, err)
	assert.Equal(t, Result{Status: SoldOut, Local: true}, res)
	// Other activities are unaffected: they go to Redis (and fail here).
	_, err = d.Reserve(ctx, Request{Activity: "2", User: "3", Qty: 1, ReservationID: "x"})
	assert.ErrorIs(t, err, ErrUnavailable)
	m.SetError("")

	// Without Run the flag expires after the re-check interval on the clock.
	clock.Add(defaultRecheckInterval - time.Millisecond)
	assert.True(t, d.SoldOut("1"))
	clock.Add(time.Millisecond)
	assert.False(t, d.SoldOut("1"))
	res, err = d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "x"})
	require.NoError(t, err)
	assert.False(t, res.Local, "after the interval Redis is asked again")
	assert.Equal(t, SoldOut, res.Status)
	assert.True(t, d.SoldOut("1"), "and the flag is set again")

	// A Release in this process clears the flag at once.
	rr, err := d.Release(ctx, "1", "win")
	require.NoError(t, err)
	require.Equal(t, ReleaseDone, rr.Status)
	assert.False(t, d.SoldOut("1"))
	res, err = d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "y"})
	require.NoError(t, err)
	assert.Equal(t, Reserved, res.Status)
	assert.Equal(t, []bool{true, false, true, false}, ev.get())
}

// TestSoldOutWithQtyLeft: SoldOut for a qty larger than what is left must
// not make the process refuse smaller requests.
func TestSoldOutWithQtyLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	mustLoad(t, d, Activity{ID: "1", Stock: 1, PerUserLimit: 3})
	res, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 3, ReservationID: "a"})
	require.NoError(t, err)
	require.Equal(t, SoldOut, res.Status)
	assert.False(t, d.SoldOut("1"))
	res, err = d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "b"})
	require.NoError(t, err)
	assert.Equal(t, Reserved, res.Status)
}

func TestWithoutSoldOutCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, testenv.Prefix(t), WithoutSoldOutCache())
	mustLoad(t, d, Activity{ID: "1", Stock: 0})
	for range 3 {
		res, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})
		require.NoError(t, err)
		assert.Equal(t, SoldOut, res.Status)
		assert.False(t, res.Local)
	}
	assert.False(t, d.SoldOut("1"))
}

// numSub waits until the release channel has n subscribers.
func waitSubscribed(t *testing.T, rdb redis.UniversalClient, channel string) {
	t.Helper()
	require.Eventually(t, func() bool {
		m, err := rdb.PubSubNumSub(context.Background(), channel).Result()
		return err == nil && m[channel] >= 1
	}, 10*time.Second, 5*time.Millisecond)
}

// TestRunLearnsReleaseFromOtherProcess: process B sold out; process A
// releases; B's Run hears it on pub/sub and asks Redis again. The re-check
// interval is an hour, so only the message can clear the flag.
func TestRunLearnsReleaseFromOtherProcess(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		clock := testenv.NewEpochClock(0)
		a := newTestDeductor(t, rdb, prefix)
		b := newTestDeductor(t, rdb, prefix, WithClock(clock), WithRecheckInterval(time.Hour))
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- b.Run(runCtx) }()
		t.Cleanup(func() {
			cancel()
			assert.NoError(t, <-done)
		})
		waitSubscribed(t, rdb, releaseChannel(prefix))
		assert.ErrorIs(t, b.Run(ctx), ErrRunning, "one Run at a time")
		assert.ErrorIs(t, b.Run(ctx), lifecycle.ErrRunning, "the sentinel every package shares")

		sellOut(t, b)
		clock.Add(2 * time.Hour) // Run owns the flag: the clock alone does not clear it
		assert.True(t, b.SoldOut("1"))

		rr, err := a.Release(ctx, "1", "win")
		require.NoError(t, err)
		require.Equal(t, ReleaseDone, rr.Status)
		require.Eventually(t, func() bool { return !b.SoldOut("1") }, 10*time.Second, time.Millisecond)
		res, err := b.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "again"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
	})
}

// statsCounting counts the stats.lua calls (the sold-out re-check's) and
// hides the client's Subscribe, so the Deductor misses every release
// message another process publishes.
type statsCounting struct {
	redis.Scripter
	n atomic.Int64
}

func (c *statsCounting) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if sha == statsScript.Hash() {
		c.n.Add(1)
	}
	return c.Scripter.EvalShaRO(ctx, sha, keys, args...)
}

func (c *statsCounting) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if script == statsLua {
		c.n.Add(1)
	}
	return c.Scripter.EvalRO(ctx, script, keys, args...)
}

// runBackstop starts d.Run and returns its stop, which checks Run's error.
func runBackstop(t *testing.T, d *Deductor) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	require.Eventually(t, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.running }, 10*time.Second, time.Millisecond)
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}

// recheck moves the clock one interval and waits for Run's next re-check
// of the activity (the n-th stats.lua call).
func recheck(t *testing.T, clock *testenv.Clock, c *statsCounting, n int64) {
	t.Helper()
	clock.Add(5 * time.Millisecond)
	require.Eventually(t, func() bool { return c.n.Load() >= n }, 10*time.Second, time.Millisecond)
}

// TestRunBackstop: Run re-checks a flag once it is older than the re-check
// interval on the injected clock, and keeps it while Redis confirms it
// (nothing left, no ledger write since the flag's ID set was read). It
// drops the flag when a release it missed gave stock back, and when the
// ledger changed while the activity stayed sold out (a release and a new
// reservation, whose retry the flag's ID set does not know). Before, every
// flag was dropped on schedule, and a caller that checks SoldOut before
// refusals of its own let buys through until one reached Reserve.
func TestRunBackstop(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		clock := testenv.NewEpochClock(0)
		c := &statsCounting{Scripter: rdb}
		d := newTestDeductor(t, c, prefix, WithClock(clock), WithRecheckInterval(5*time.Millisecond))
		other := newTestDeductor(t, rdb, prefix) // another process
		stop := runBackstop(t, d)

		sellOut(t, d)
		time.Sleep(50 * time.Millisecond) // several ticks pass, but the clock has not moved
		assert.True(t, d.SoldOut("1"))
		assert.Zero(t, c.n.Load(), "no re-check before the interval")

		// Confirmed twice: the second re-check only happens if the first
		// kept the flag (a dropped flag is no longer Run's).
		recheck(t, clock, c, 1)
		recheck(t, clock, c, 2)
		assert.True(t, d.SoldOut("1"))
		res, err := d.Reserve(ctx, Request{Activity: "1", User: "5", Qty: 1, ReservationID: "late"})
		require.NoError(t, err)
		assert.Equal(t, Result{Status: SoldOut, Local: true}, res, "still refused in-process")

		// The ledger changed but nothing is left: another process released
		// the winner and sold the unit again. The flag goes, so the new
		// winner's retry is answered from the ledger, not refused.
		_, err = other.Release(ctx, "1", "win")
		require.NoError(t, err)
		res, err = other.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "second"})
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)
		// Each poll moves the clock by the interval, so Run re-checks on its
		// next tick whatever tick it is at (waiting for exactly the third
		// stats call hung in CI when Run's re-check came before the clock
		// was moved once more, or its flag was gone already).
		require.Eventually(t, func() bool { clock.Add(5 * time.Millisecond); return !d.SoldOut("1") }, 10*time.Second, time.Millisecond)
		res, err = d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "second"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
		assert.True(t, res.Replayed, "the new winner's retry got its reservation back")
		sellOutAgain(t, d)

		// A release this process missed gives stock back: the flag goes.
		_, err = other.Release(ctx, "1", "second")
		require.NoError(t, err)
		require.Eventually(t, func() bool { clock.Add(5 * time.Millisecond); return !d.SoldOut("1") }, 10*time.Second, time.Millisecond)
		res, err = d.Reserve(ctx, Request{Activity: "1", User: "4", Qty: 1, ReservationID: "third"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)

		// Stopping Run hands a flag back to the clock-checked mode.
		res, err = d.Reserve(ctx, Request{Activity: "1", User: "6", Qty: 1, ReservationID: "fourth"})
		require.NoError(t, err)
		require.Equal(t, SoldOut, res.Status)
		require.True(t, d.SoldOut("1"))
		stop()
		assert.True(t, d.SoldOut("1"))
		clock.Add(5 * time.Millisecond)
		assert.False(t, d.SoldOut("1"))

		require.NoError(t, d.Close())
		assert.ErrorIs(t, d.Run(context.Background()), ErrClosed)
		assert.ErrorIs(t, d.Run(context.Background()), lifecycle.ErrClosed, "the sentinel every package shares")
	})
}

// TestRunBackstopSharded: a sharded activity's flag is not confirmed by the
// re-check (its ID set is keyed by a borrow's fence, which Stats does not
// report): Run drops it on schedule, as before.
func TestRunBackstopSharded(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		clock := testenv.NewEpochClock(0)
		c := &statsCounting{Scripter: rdb}
		d := newTestDeductor(t, c, prefix, WithClock(clock), WithRecheckInterval(5*time.Millisecond))
		stop := runBackstop(t, d)
		defer stop()
		mustLoad(t, d, Activity{ID: "s", Stock: 2, Shards: 2})
		for i, want := range []Status{Reserved, Reserved, SoldOut} {
			res, err := d.Reserve(ctx, Request{Activity: "s", User: uid(i), Qty: 1, ReservationID: "r" + uid(i)})
			require.NoError(t, err)
			require.Equal(t, want, res.Status, i)
		}
		require.True(t, d.SoldOut("s"))
		clock.Add(5 * time.Millisecond)
		require.Eventually(t, func() bool { return !d.SoldOut("s") }, 10*time.Second, time.Millisecond)
		assert.Zero(t, c.n.Load(), "not re-checked: dropped")
	})
}

func sellOutAgain(t *testing.T, d *Deductor) {
	t.Helper()
	res, err := d.Reserve(context.Background(), Request{Activity: "1", User: "9", Qty: 1, ReservationID: "z"})
	require.NoError(t, err)
	require.Equal(t, SoldOut, res.Status)
	require.True(t, d.SoldOut("1"))
}

func TestCloseStopsRun(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background()) }()
	waitSubscribed(t, rdb, releaseChannel(testenv.Prefix(t)))
	require.NoError(t, d.Close())
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Close")
	}
}

// scripterOnly hides the Subscribe method of a client.
type scripterOnly struct{ redis.Scripter }

// countingClient counts EVALSHA calls per script (Script.Run always tries
// EVALSHA first).
type countingClient struct {
	redis.UniversalClient
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[sha]++
	c.mu.Unlock()
	return c.UniversalClient.EvalSha(ctx, sha, keys, args...)
}

func (c *countingClient) count(s *redis.Script) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[s.Hash()]
}

// TestSoldOutLetsWinnersRetryThrough: once the process refuses a sold-out
// activity in-process, the retry of a request that won still reaches Redis
// and gets its reservation back (Reserved, Replayed), while new reservation IDs
// are still refused without a Redis call. The ledger is read once per
// sell-out and reused while nothing was written.
func TestSoldOutLetsWinnersRetryThrough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	cc := &countingClient{UniversalClient: rdb}
	clock := testenv.NewEpochClock(0)
	prefix := testenv.Prefix(t)
	d := newTestDeductor(t, cc, prefix, WithClock(clock))
	sellOut(t, d) // "win" reserved the only unit, "lose" saw SoldOut
	assert.Equal(t, 1, cc.count(idsScript), "the ledger is read when the flag is set")

	res, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "win"})
	require.NoError(t, err)
	assert.Equal(t, Result{Status: Reserved, Replayed: true, Remaining: 0, Held: 1, Limit: 1, ReservedAt: res.ReservedAt}, res)
	assert.False(t, res.ReservedAt.IsZero())
	assert.True(t, d.SoldOut("1"), "the replay leaves the flag alone")

	// New IDs, and the retry of the loser, are still refused in-process:
	// every Redis command fails and they do not notice.
	m.SetError("LOADING down")
	for _, id := range []string{"lose", "new"} {
		res, err = d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: id})
		require.NoError(t, err)
		assert.Equal(t, Result{Status: SoldOut, Local: true}, res, id)
	}
	m.SetError("")

	// The flag expires and is set again with nothing written since: the
	// set is reused, no second scan.
	clock.Add(defaultRecheckInterval)
	res, err = d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "n1"})
	require.NoError(t, err)
	require.Equal(t, SoldOut, res.Status)
	require.False(t, res.Local)
	require.True(t, d.SoldOut("1"))
	assert.Equal(t, 1, cc.count(idsScript))

	// Another process releases "win" and sells the unit again as "w2".
	other := newTestDeductor(t, rdb, prefix)
	rr, err := other.Release(ctx, "1", "win")
	require.NoError(t, err)
	require.Equal(t, ReleaseDone, rr.Status)
	reserveOK(t, other, "1", "7", 1, "w2")
	// Once this process asks Redis again, it reads the ledger afresh and
	// lets the retry of w2 through.
	clock.Add(defaultRecheckInterval)
	res, err = d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "n2"})
	require.NoError(t, err)
	require.Equal(t, SoldOut, res.Status)
	require.True(t, d.SoldOut("1"))
	assert.Equal(t, 2, cc.count(idsScript), "the ledger changed: scanned again")
	res, err = d.Reserve(ctx, Request{Activity: "1", User: "7", Qty: 1, ReservationID: "w2"})
	require.NoError(t, err)
	assert.Equal(t, Reserved, res.Status)
	assert.True(t, res.Replayed)
	assert.False(t, res.Local)
	res, err = d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "win"})
	require.NoError(t, err)
	assert.Equal(t, Released, res.Status, "a released ID is in the ledger too: Redis answers it")
}

// TestSoldOutLedgerScanFailureRefusesNothing: when the ledger cannot be
// read the flag is not set, so no request is refused without Redis.
func TestSoldOutLedgerScanFailureRefusesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, failIDs{rdb}, testenv.Prefix(t))
	mustLoad(t, d, Activity{ID: "1", Stock: 1})
	reserveOK(t, d, "1", "1", 1, "win")
	for range 3 {
		res, err := d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "lose"})
		require.NoError(t, err)
		assert.Equal(t, SoldOut, res.Status)
		assert.False(t, res.Local)
	}
	assert.False(t, d.SoldOut("1"))
}

// failIDs fails the ledger-IDs script only.
type failIDs struct{ redis.UniversalClient }

func (f failIDs) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if sha == idsScript.Hash() {
		return redis.NewCmdResult(nil, errors.New("boom"))
	}
	return f.UniversalClient.EvalSha(ctx, sha, keys, args...)
}

// TestSoldOutForPrefix: once the activity is known sold out, every request
// ID starting with a prefix no ledger ID starts with is refused in-process,
// and SoldOutForPrefix says so; a prefix of a winner's ID is not. Checked
// against SoldOutFor and against the ledger itself for every prefix of
// every ID, on each Redis.
func TestSoldOutForPrefix(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		assert.False(t, d.SoldOutForPrefix("p", "u2-"), "unknown activity")
		mustLoad(t, d, Activity{ID: "p", Stock: 3})
		winners := []string{"u1-a", "u12-b", "u3-c"}
		for i, id := range winners {
			res, err := d.Reserve(ctx, Request{Activity: "p", User: uid(i + 1), Qty: 1, ReservationID: id})
			require.NoError(t, err)
			require.Equal(t, Reserved, res.Status)
		}
		assert.False(t, d.SoldOutForPrefix("p", "u2-"), "not known sold out yet")
		res, err := d.Reserve(ctx, Request{Activity: "p", User: "2", Qty: 1, ReservationID: "u2-x"})
		require.NoError(t, err)
		require.Equal(t, SoldOut, res.Status)
		require.True(t, d.SoldOut("p"))

		for p, want := range map[string]bool{"u2-": true, "u4-": true, "v": true, "u1-": false, "u12-": false,
			"u1": false, "u": false, "": false, "u3-c": false, "u3-cc": true, "u12-b-": true} {
			assert.Equal(t, want, d.SoldOutForPrefix("p", p), "prefix %q", p)
		}
		// For every prefix of every ID (winners and not): true exactly when
		// no winner starts with it, and then SoldOutFor refuses each ID.
		for _, id := range append([]string{"u2-x", "u4-y", "u13-z"}, winners...) {
			for n := 0; n <= len(id); n++ {
				p := id[:n]
				won := false
				for _, w := range winners {
					won = won || strings.HasPrefix(w, p)
				}
				got := d.SoldOutForPrefix("p", p)
				assert.Equal(t, !won, got, "prefix %q", p)
				if got {
					assert.True(t, d.SoldOutFor("p", id), "SoldOutForPrefix(%q) but not SoldOutFor(%q)", p, id)
				}
			}
		}
		// Stock back: nothing is refused in-process.
		_, err = d.Release(ctx, "p", "u1-a")
		require.NoError(t, err)
		assert.False(t, d.SoldOutForPrefix("p", "u2-"))
	})
}

// releaseAfterSoldOut runs a release after the reply of the next reserve
// script: the reply says SoldOut, and the stock comes back before Reserve
// has acted on it.
type releaseAfterSoldOut struct {
	redis.UniversalClient
	armed   atomic.Bool
	release func()
}

func (c *releaseAfterSoldOut) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	cmd := c.UniversalClient.EvalSha(ctx, sha, keys, args...)
	if sha == reserveScript.Hash() && c.armed.CompareAndSwap(true, false) {
		c.release()
	}
	return cmd
}

// TestSoldOutReleaseBeforeFlag: a release in this process between a
// SoldOut reply and the flag it sets must win: the flag is not set, and
// the unit that came back is sold, not refused in-process. (The kit's
// sold_out scenario with a step undoing reserve met this race.)
func TestSoldOutReleaseBeforeFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	c := &releaseAfterSoldOut{UniversalClient: rdb}
	d := newTestDeductor(t, c, testenv.Prefix(t))
	mustLoad(t, d, Activity{ID: "1", Stock: 1})
	reserveOK(t, d, "1", "1", 1, "win")
	c.release = func() {
		rr, err := d.Release(ctx, "1", "win")
		require.NoError(t, err)
		require.Equal(t, ReleaseDone, rr.Status)
	}
	c.armed.Store(true)
	res, err := d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "lose"})
	require.NoError(t, err)
	require.Equal(t, SoldOut, res.Status, "Redis answered before the release")
	assert.False(t, d.SoldOut("1"), "the release came after the reply: the flag must not be set")
	res, err = d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "next"})
	require.NoError(t, err)
	assert.Equal(t, Reserved, res.Status, "the unit given back is sold")
}
