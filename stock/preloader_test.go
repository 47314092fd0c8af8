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
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	m.SetTime(now)
	clock := newFakeClock(now)
	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	src := &table{acts: []Activity{
		{ID: 1, Stock: 10, Start: now.Add(5 * time.Minute), End: now.Add(time.Hour)},
		{ID: 2, Stock: 10, Start: now.Add(30 * time.Minute), End: now.Add(time.Hour)},
		{ID: 3, Stock: -1, Start: now.Add(time.Minute), End: now.Add(time.Hour)}, // bad row
	}}
	p, err := NewPreloader(d, src, WithPreloadClock(clock))
	require.NoError(t, err)

	n, err := p.Tick(ctx)
	assert.Equal(t, 1, n)
	assert.ErrorIs(t, err, ErrInvalidActivity, "the bad row is reported, the good one loaded")
	st, err := d.Stats(ctx, 1)
	require.NoError(t, err)
	assert.True(t, st.Loaded)
	st, err = d.Stats(ctx, 2)
	require.NoError(t, err)
	assert.False(t, st.Loaded, "30 minutes ahead is beyond the 10 minute lead time")

	// A sale in progress is never reset by a later pass.
	_, err = d.Reserve(ctx, Request{Activity: 1, User: 1, Qty: 1, RequestID: "a"})
	require.NoError(t, err)
	clock.Add(25 * time.Minute)
	n, _ = p.Tick(ctx)
	assert.Equal(t, 1, n, "only activity 2 is new")
	rem, err := d.Remaining(ctx, 1)
	require.NoError(t, err)
	assert.EqualValues(t, 10, rem, "not started yet on Redis time, and nothing was reset")
	st, err = d.Stats(ctx, 1)
	require.NoError(t, err)
	assert.EqualValues(t, 0, st.LedgerEntries)

	// The Reserve above came before the sale opened and wrote nothing; now
	// hold a real reservation and check that another pass keeps it.
	m.SetTime(now.Add(5 * time.Minute))
	res, err := d.Reserve(ctx, Request{Activity: 1, User: 1, Qty: 1, RequestID: "live"})
	require.NoError(t, err)
	require.Equal(t, Reserved, res.Status)
	n, err = p.Tick(ctx)
	assert.ErrorIs(t, err, ErrInvalidActivity, "only the bad row fails")
	assert.Zero(t, n, "both good activities are already loaded")
	rem, err = d.Remaining(ctx, 1)
	require.NoError(t, err)
	assert.EqualValues(t, 9, rem, "a live sale is not reset")
	_, found, err := d.Lookup(ctx, 1, "live")
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
	src := &table{acts: []Activity{{ID: 1, Stock: 3}}}
	p, err := NewPreloader(d, SourceFunc(src.Upcoming), WithPollInterval(time.Millisecond), WithLeadTime(time.Minute))
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
	rem, err := d.Remaining(context.Background(), 1)
	require.NoError(t, err)
	assert.EqualValues(t, 3, rem)
}

func TestNewPreloaderValidates(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	src := SourceFunc(func(context.Context, time.Time, time.Time) ([]Activity, error) { return nil, nil })
	_, err := NewPreloader(nil, src)
	assert.Error(t, err)
	_, err = NewPreloader(d, nil)
	assert.Error(t, err)
	_, err = NewPreloader(d, src, WithPollInterval(0))
	assert.Error(t, err)
	_, err = NewPreloader(d, src, WithLeadTime(-time.Second))
	assert.Error(t, err)
}
