package stock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// table is a Source over a fixed list, filtering as a SQL query would.
type table struct {
	mu    sync.Mutex
	acts  []Activity
	calls int
	err   error
}

func (tb *table) Upcoming(_ context.Context, from, to time.Time) ([]Activity, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.calls++
	if tb.err != nil {
		return nil, tb.err
	}
	var out []Activity
	for _, a := range tb.acts {
		if !a.Start.After(to) && (a.End.IsZero() || a.End.After(from)) {
			out = append(out, a)
		}
	}
	return out, nil
}

func TestPreloaderTick(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	// The preloader's clock and miniredis time (SetTime) are both fake and
	// agree: Load's start/end/exp never reach a real server.
	clock := testenv.NewEpochClock(0)
	now := clock.Now()
	m.SetTime(now)
	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	src := &table{acts: []Activity{
		{ID: "1", Stock: 10, Start: now.Add(5 * time.Minute), End: now.Add(time.Hour)},
		{ID: "2", Stock: 10, Start: now.Add(30 * time.Minute), End: now.Add(time.Hour)},
		{ID: "3", Stock: -1, Start: now.Add(time.Minute), End: now.Add(time.Hour)}, // bad row
	}}
	p, err := NewPreloader(d, src.Upcoming, WithClock(clock))
	require.NoError(t, err)

	n, err := p.Tick(ctx)
	assert.Equal(t, 1, n)
	assert.ErrorIs(t, err, ErrInvalidArgument, "the bad row is reported, the good one loaded")
	st, err := d.Stats(ctx, "1")
	require.NoError(t, err)
	assert.True(t, st.Loaded)
	st, err = d.Stats(ctx, "2")
	require.NoError(t, err)
	assert.False(t, st.Loaded, "30 minutes ahead is beyond the 10 minute lead time")

	// A sale in progress is never reset by a later pass.
	_, err = d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})
	require.NoError(t, err)
	clock.Add(25 * time.Minute)
	n, _ = p.Tick(ctx)
	assert.Equal(t, 1, n, "only activity 2 is new")
	rem, err := d.Remaining(ctx, "1")
	require.NoError(t, err)
	assert.EqualValues(t, 10, rem, "not started yet on Redis time, and nothing was reset")
	st, err = d.Stats(ctx, "1")
	require.NoError(t, err)
	assert.EqualValues(t, 0, st.LedgerEntries)

	// The Reserve above came before the sale opened and wrote nothing; now
	// hold a real reservation and check that another pass keeps it.
	m.SetTime(now.Add(5 * time.Minute))
	res, err := d.Reserve(ctx, Request{Activity: "1", User: "1", Qty: 1, ReservationID: "live"})
	require.NoError(t, err)
	require.Equal(t, Reserved, res.Status)
	n, err = p.Tick(ctx)
	assert.ErrorIs(t, err, ErrInvalidArgument, "only the bad row fails")
	assert.Zero(t, n, "both good activities are already loaded")
	rem, err = d.Remaining(ctx, "1")
	require.NoError(t, err)
	assert.EqualValues(t, 9, rem, "a live sale is not reset")
	_, found, err := d.Lookup(ctx, "1", "live")
	require.NoError(t, err)
	assert.True(t, found, "the reservation survives the pass")

	src.mu.Lock()
	src.err = errors.New("db down")
	src.mu.Unlock()
	_, err = p.Tick(ctx)
	assert.ErrorContains(t, err, "db down")
}

func TestPreloaderRun(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	src := &table{acts: []Activity{{ID: "1", Stock: 3}}}
	p, err := NewPreloader(d, Source(src.Upcoming), WithPollInterval(time.Millisecond), WithLeadTime(time.Minute))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	require.Eventually(t, func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.calls >= 3
	}, 10*time.Second, time.Millisecond)
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
	rem, err := d.Remaining(context.Background(), "1")
	require.NoError(t, err)
	assert.EqualValues(t, 3, rem)
}

func TestNewPreloaderValidates(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	src := Source(func(context.Context, time.Time, time.Time) ([]Activity, error) { return nil, nil })
	_, err := NewPreloader(nil, src)
	assert.Error(t, err)
	_, err = NewPreloader(d, nil)
	assert.Error(t, err)
	_, err = NewPreloader(d, src, WithPollInterval(0))
	assert.Error(t, err)
	_, err = NewPreloader(d, src, WithLeadTime(-time.Second))
	assert.Error(t, err)
}

func TestPreloaderRecoveryOptions(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	src := &table{}
	_, err := NewPreloader(d, src.Upcoming, WithRecovery(nil))
	assert.Error(t, err, "a nil collaborator is an error")
	var nilFunc func(context.Context, Activity) ([]Reservation, bool, error)
	_, err = NewPreloader(d, src.Upcoming, WithRecovery(nilFunc))
	assert.Error(t, err, "a nil Recovery func too")
	_, err = NewPreloader(d, src.Upcoming, WithRecovery((&recoveryStub{}).Recover), nil)
	assert.NoError(t, err, "a nil option is ignored")
}

// TestPreloaderRecoveryErrorsAndRaces: a Recovery error is reported and
// changes nothing; a rebuild prepared on a state that changed meanwhile
// (another preloader acted) is dropped, not applied.
func TestPreloaderRecoveryErrorsAndRaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	d := newTestDeductor(t, rdb, prefix)
	a := Activity{ID: "1", Stock: 5}
	k := activityKeys(prefix, "1")

	rec := &recoveryStub{err: errors.New("db down")}
	p, err := NewPreloader(d, (&table{acts: []Activity{a, {ID: "2", Stock: -1}}}).Upcoming, WithRecovery(rec.Recover))
	require.NoError(t, err)
	n, err := p.Tick(ctx)
	assert.Zero(t, n)
	assert.ErrorContains(t, err, "db down")
	assert.ErrorIs(t, err, ErrInvalidArgument, "the bad row is reported too")
	ex, err := rdb.Exists(ctx, k.list()...).Result()
	require.NoError(t, err)
	assert.Zero(t, ex, "nothing written")

	// A placeholder written by another preloader between this one's look
	// and its rebuild: the rebuild prepared for "absent" is dropped.
	p2, err := NewPreloader(d, (&table{acts: []Activity{a}}).Upcoming, WithRecovery(
		func(ctx context.Context, a Activity) ([]Reservation, bool, error) {
			_, err := d.load(ctx, a, loadPlaceholder) // the other preloader, meanwhile
			require.NoError(t, err)
			return nil, true, nil
		}))
	require.NoError(t, err)
	n, err = p2.Tick(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	meta := hgetall(t, rdb, k.meta)
	assert.Equal(t, "1", meta["frozen"], "the placeholder stands")
	assert.Equal(t, "4", meta["origin"])

	// The same for a frozen activity whose epoch changed meanwhile.
	p3, err := NewPreloader(d, (&table{acts: []Activity{a}}).Upcoming, WithRecovery(
		func(ctx context.Context, a Activity) ([]Reservation, bool, error) {
			_, err := d.Rebuild(ctx, a, nil) // another preloader rebuilt…
			require.NoError(t, err)
			require.NoError(t, d.Freeze(ctx, a.ID)) // …and the activity was frozen again
			return []Reservation{{ID: "x", User: "1", Qty: 1}}, true, nil
		}))
	require.NoError(t, err)
	n, err = p3.Tick(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Empty(t, hgetall(t, rdb, k.ledger), "the stale live list was not applied")
	assert.Equal(t, "5", hgetall(t, rdb, k.meta)["stock"])

	// The next pass rebuilds from a fresh look.
	rec2 := &recoveryStub{ready: true, live: []Reservation{{ID: "x", User: "1", Qty: 1}}}
	p4, err := NewPreloader(d, (&table{acts: []Activity{a}}).Upcoming, WithRecovery(rec2.Recover))
	require.NoError(t, err)
	n, err = p4.Tick(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, "4", hgetall(t, rdb, k.meta)["stock"])
	assert.Contains(t, hgetall(t, rdb, k.ledger), "x")
	n, err = p4.Tick(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "live now: left alone")
	assert.Equal(t, 1, rec2.calls, "Recover is not asked about a live activity")
}
