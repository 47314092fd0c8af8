package dbfallback

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/stock"
)

// events records what an observer was told, with the context's value.
type events struct {
	mu  sync.Mutex
	got []observe.Event
	ctx []any
}

type obsKey struct{}

func (e *events) Observe(ctx context.Context, ev observe.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev.Duration = 0
	e.got = append(e.got, ev)
	e.ctx = append(e.ctx, ctx.Value(obsKey{}))
}

// TestObserver: Reserve, Release, Open and Drain are each reported once,
// with their stage, activity, outcome (the status in snake case, ok, or
// error with Err set) and the caller's context; nil observer is ignored.
func TestObserver(t *testing.T) {
	t.Parallel()
	var ev events
	e := newEnv(t, WithObserver(nil), WithObserver(&ev))
	ctx := context.WithValue(bg, obsKey{}, "caller")
	a := activity("41", 4, 1)
	require.NoError(t, e.s.Open(ctx, a, 2))
	_, err := e.s.Reserve(ctx, req("41", "1", 1, "o1"))
	require.NoError(t, err)
	_, err = e.s.Reserve(ctx, req("41", "1", 1, "o2"))
	require.NoError(t, err)
	_, err = e.s.Reserve(ctx, req("41", "2", 1, "o1"))
	require.ErrorIs(t, err, stock.ErrIDConflict)
	_, err = e.s.Release(ctx, "41", "o1")
	require.NoError(t, err)
	_, err = e.s.Release(ctx, "41", "o9")
	require.NoError(t, err)
	n, err := e.s.Drain(ctx, "41")
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	_, err = e.s.Reserve(ctx, req("42", "1", 1, "o3"))
	require.NoError(t, err)

	ev.mu.Lock()
	defer ev.mu.Unlock()
	type row struct{ stage, activity, outcome string }
	var rows []row
	for i, x := range ev.got {
		rows = append(rows, row{x.Stage, x.Activity, x.Outcome})
		assert.Equal(t, "caller", ev.ctx[i], "the caller's context reaches the observer")
		assert.Equal(t, x.Outcome == observe.Error, x.Err != nil, "Err is set exactly on error")
	}
	assert.Equal(t, []row{
		{StageOpen, "41", observe.OK},
		{StageReserve, "41", "reserved"},
		{StageReserve, "41", "limit_reached"},
		{StageReserve, "41", observe.Error},
		{StageRelease, "41", "released"},
		{StageRelease, "41", "unknown_request"},
		{StageDrain, "41", observe.OK},
		{StageReserve, "42", "not_loaded"},
	}, rows)
	assert.EqualValues(t, 2, ev.got[6].Value, "Drain reports the units taken out")
	assert.True(t, errors.Is(ev.got[3].Err, stock.ErrIDConflict))
}
