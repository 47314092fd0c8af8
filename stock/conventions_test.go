package stock

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// TestEveryDenialWrapsErrRefused: every denial sentinel, and every denial
// a real call answers (each Reserve status but Reserved, through
// Result.Err, and the errors of Remaining, Freeze, Pause, Adjust and
// Rebuild), matches ErrRefused and keeps its own sentinel and message.
func TestEveryDenialWrapsErrRefused(t *testing.T) {
	t.Parallel()
	for _, err := range []error{ErrSoldOut, ErrLimitReached, ErrNotStarted, ErrEnded, ErrNotLoaded,
		ErrReleased, ErrFrozen, ErrPaused, ErrInsufficient, ErrLive} {
		assert.ErrorIs(t, err, ErrRefused, err.Error())
		assert.NotEqual(t, ErrRefused.Error(), err.Error(), "a denial keeps its own message")
	}

	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, testenv.Prefix(t), WithoutSoldOutCache())
	now := time.Now()
	mustLoad(t, d, Activity{ID: "sold", Stock: 1})
	mustLoad(t, d, Activity{ID: "limit", Stock: 5, PerUserLimit: 1})
	mustLoad(t, d, Activity{ID: "later", Stock: 5, Start: now.Add(time.Hour), End: now.Add(2 * time.Hour)})
	mustLoad(t, d, Activity{ID: "over", Stock: 5, Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour)})
	mustLoad(t, d, Activity{ID: "open", Stock: 5})
	mustLoad(t, d, Activity{ID: "frozen", Stock: 5})
	mustLoad(t, d, Activity{ID: "paused", Stock: 5})
	reserveOK(t, d, "sold", "1", 1, "s1")
	reserveOK(t, d, "limit", "1", 1, "l1")
	_, err := d.Release(ctx, "open", "gone")
	require.NoError(t, err)
	require.NoError(t, d.Freeze(ctx, "frozen"))
	require.NoError(t, d.Pause(ctx, "paused"))

	for _, c := range []struct {
		req  Request
		want Status
		err  error
	}{
		{Request{Activity: "sold", User: "2", Qty: 1, ReservationID: "s2"}, SoldOut, ErrSoldOut},
		{Request{Activity: "limit", User: "1", Qty: 1, ReservationID: "l2"}, LimitReached, ErrLimitReached},
		{Request{Activity: "later", User: "1", Qty: 1, ReservationID: "n1"}, NotStarted, ErrNotStarted},
		{Request{Activity: "over", User: "1", Qty: 1, ReservationID: "e1"}, Ended, ErrEnded},
		{Request{Activity: "absent", User: "1", Qty: 1, ReservationID: "a1"}, NotLoaded, ErrNotLoaded},
		{Request{Activity: "open", User: "1", Qty: 1, ReservationID: "gone"}, Released, ErrReleased},
		{Request{Activity: "frozen", User: "1", Qty: 1, ReservationID: "f1"}, Frozen, ErrFrozen},
		{Request{Activity: "paused", User: "1", Qty: 1, ReservationID: "p1"}, Paused, ErrPaused},
	} {
		res, err := d.Reserve(ctx, c.req)
		require.NoError(t, err, "a denial is a result, not an error")
		require.Equal(t, c.want, res.Status)
		assert.ErrorIs(t, res.Err(), ErrRefused, c.want.String())
		assert.ErrorIs(t, res.Err(), c.err, c.want.String())
	}

	_, err = d.Remaining(ctx, "absent")
	assert.ErrorIs(t, err, ErrNotLoaded)
	assert.ErrorIs(t, err, ErrRefused, "Remaining of an activity not loaded")
	err = d.Freeze(ctx, "absent")
	assert.ErrorIs(t, err, ErrRefused, "Freeze of an activity not loaded")
	err = d.Pause(ctx, "absent")
	assert.ErrorIs(t, err, ErrRefused, "Pause of an activity not loaded")
	_, err = d.Adjust(ctx, AdjustParams{Activity: "open", ID: "w", Delta: -100})
	assert.ErrorIs(t, err, ErrInsufficient)
	assert.ErrorIs(t, err, ErrRefused, "Adjust withdrawing more than is there")
	_, err = d.Rebuild(ctx, Activity{ID: "open", Stock: 5}, nil)
	assert.ErrorIs(t, err, ErrLive)
	assert.ErrorIs(t, err, ErrRefused, "Rebuild of a live activity")
}

// TestFailuresDoNotWrapErrRefused: bad input, a reused ID, a malformed
// reply, a lost reservation, a cancelled context and Redis down are not
// refusals.
func TestFailuresDoNotWrapErrRefused(t *testing.T) {
	t.Parallel()
	for _, err := range []error{ErrUnavailable, ErrInvalidArgument, ErrInvalidConfig, ErrIDConflict, ErrBadReply, ErrLost, ErrClosed, ErrRunning} {
		assert.NotErrorIs(t, err, ErrRefused, err.Error())
	}
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, testenv.Prefix(t), WithoutSoldOutCache())
	mustLoad(t, d, Activity{ID: "1", Stock: 5, PerUserLimit: 2})
	reserveOK(t, d, "1", "1", 1, "r1")

	_, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 0, ReservationID: "r2"})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.NotErrorIs(t, err, ErrRefused, "bad input")
	_, err = d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 3, ReservationID: "r2"})
	assert.ErrorIs(t, err, ErrInvalidArgument, "qty above the per-user limit")
	assert.NotErrorIs(t, err, ErrRefused)
	_, err = d.Load(ctx, Activity{ID: "bad id", Stock: 1})
	assert.ErrorIs(t, err, ErrInvalidArgument, "a bad activity")
	assert.NotErrorIs(t, err, ErrRefused)
	_, err = d.Reserve(ctx, Request{Activity: "1", User: "2", Qty: 1, ReservationID: "r1"})
	assert.ErrorIs(t, err, ErrIDConflict)
	assert.NotErrorIs(t, err, ErrRefused, "a reused reservation ID")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = d.Reserve(cancelled, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "r3"})
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrRefused, "a cancelled context")

	m.Close()
	_, err = d.Reserve(ctx, Request{Activity: "1", User: "3", Qty: 1, ReservationID: "r3"})
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.NotErrorIs(t, err, ErrRefused, "Redis down")
}

// TestBadConfigurationWrapsErrInvalidConfig: every bad configuration of New
// and NewPreloader, a nil logger included, wraps ErrInvalidConfig.
func TestBadConfigurationWrapsErrInvalidConfig(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	_, err := New(nil)
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil client")
	for name, o := range map[string]DeductorOption{
		"nil logger":       WithLogger(nil),
		"nil clock":        WithClock(nil),
		"recheck 0":        WithRecheckInterval(0),
		"prefix with {":    WithKeyPrefix("a{b}"),
		"max ID bytes 0":   WithMaxReservationIDBytes(0),
		"max ID bytes 129": WithMaxReservationIDBytes(MaxReservationIDLen + 1),
		"negative grace":   WithTransferGrace(-time.Second),
		"negative window":  WithCoalescing(-time.Second, 0),
		"batch too big":    WithCoalescing(0, maxCoalesceBatch+1),
	} {
		_, err := New(rdb, o)
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
	}

	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	src := Source(func(context.Context, time.Time, time.Time) ([]Activity, error) { return nil, nil })
	_, err = NewPreloader(nil, src)
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil deductor")
	_, err = NewPreloader(d, nil)
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil source")
	for name, o := range map[string]PreloaderOption{
		"nil logger":    WithLogger(nil),
		"nil clock":     WithClock(nil),
		"nil recovery":  WithRecovery(nil),
		"poll 0":        WithPollInterval(0),
		"negative lead": WithLeadTime(-time.Second),
	} {
		_, err := NewPreloader(d, src, o)
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	// The shared options are accepted by both constructors.
	logger := slog.New(slog.DiscardHandler)
	_, err = New(rdb, WithLogger(logger), WithClock(testenv.NewEpochClock(0)))
	assert.NoError(t, err)
	_, err = NewPreloader(d, src, WithLogger(logger), WithClock(testenv.NewEpochClock(0)))
	assert.NoError(t, err)
}

type ctxKey struct{}

// valueOf is the ctxKey value of ctx ("" when absent).
func valueOf(ctx context.Context) string {
	s, _ := ctx.Value(ctxKey{}).(string)
	return s
}

// ctxLog records the ctxKey value each hook was called with.
type ctxLog struct {
	mu  sync.Mutex
	got []string
}

func (l *ctxLog) add(ctx context.Context, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, what+"="+valueOf(ctx))
}

func (l *ctxLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

// TestCallbacksGetTheCallersContext: WithOnReserve, WithOnRelease,
// WithOnSoldOut, WithOnLoss and WithOnRecover receive the context of the
// call that triggered them.
func TestCallbacksGetTheCallersContext(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	with := func(v string) context.Context { return context.WithValue(context.Background(), ctxKey{}, v) }
	var log ctxLog
	d := newTestDeductor(t, rdb, prefix, WithRecheckInterval(time.Hour),
		WithOnReserve(func(ctx context.Context, req Request, _ Result, _ error) { log.add(ctx, "reserve "+req.ReservationID) }),
		WithOnRelease(func(ctx context.Context, _, id string, _ ReleaseResult, _ error) { log.add(ctx, "release "+id) }),
		WithOnSoldOut(func(ctx context.Context, _ string, soldOut bool) {
			if soldOut {
				log.add(ctx, "sold out")
			} else {
				log.add(ctx, "back")
			}
		}),
		WithOnLoss(func(ctx context.Context, _, _ string) { log.add(ctx, "loss") }))
	mustLoad(t, d, Activity{ID: "a", Stock: 1})
	_, err := d.Reserve(with("r1"), Request{Activity: "a", User: "1", Qty: 1, ReservationID: "r1"})
	require.NoError(t, err)
	res, err := d.Reserve(with("r2"), Request{Activity: "a", User: "2", Qty: 1, ReservationID: "r2"})
	require.NoError(t, err)
	require.Equal(t, SoldOut, res.Status)
	_, err = d.Release(with("rel"), "a", "r1")
	require.NoError(t, err)
	assert.Equal(t, []string{"reserve r1=r1", "sold out=r2", "reserve r2=r2", "back=rel", "release r1=rel"}, log.all())

	// A rollback (seq back to before a reservation) is seen by the next
	// Reserve, whose context the loss hook gets.
	k := activityKeys(prefix, "a")
	seq := hint(t, rdb, k.meta, "seq")
	reserveOK(t, d, "a", "3", 1, "r3")
	require.NoError(t, rdb.HSet(context.Background(), k.meta, "seq", seq).Err())
	res, err = d.Reserve(with("r4"), Request{Activity: "a", User: "4", Qty: 1, ReservationID: "r4"})
	require.NoError(t, err)
	require.Equal(t, Frozen, res.Status)
	assert.Contains(t, log.all(), "loss=r4")

	var recovered ctxLog
	p, err := NewPreloader(d, (&table{acts: []Activity{{ID: "b", Stock: 3}}}).Upcoming,
		WithRecovery(func(context.Context, Activity) ([]Reservation, bool, error) { return nil, true, nil }),
		WithOnRecover(func(ctx context.Context, activity string, rebuilt bool) { recovered.add(ctx, activity) }))
	require.NoError(t, err)
	n, err := p.Tick(with("tick"))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.Equal(t, []string{"b=tick"}, recovered.all())
}

// TestRunContextReachesOnSoldOut: a flag cleared by Run (a release message
// from another process) reports Run's context.
func TestRunContextReachesOnSoldOut(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	cleared := make(chan string, 4)
	d := newTestDeductor(t, rdb, prefix, WithRecheckInterval(time.Hour),
		WithOnSoldOut(func(ctx context.Context, _ string, soldOut bool) {
			if !soldOut {
				cleared <- valueOf(ctx)
			}
		}))
	other := newTestDeductor(t, rdb, prefix)
	mustLoad(t, d, Activity{ID: "a", Stock: 1})
	reserveOK(t, d, "a", "1", 1, "r1")
	require.Equal(t, SoldOut, reserveStatus(t, d, "a", "2", 1, "r2"))

	runCtx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "run"))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = d.Run(runCtx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitSubscribed(t, rdb, releaseChannel(prefix))
	_, err := other.Release(context.Background(), "a", "r1")
	require.NoError(t, err)
	assert.Equal(t, "run", <-cleared)
}
