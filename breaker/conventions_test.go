package breaker_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/breaker"
)

// TestOptionIsSealedInterface: Option is an interface whose only method is
// unexported, so options come from the With… functions only (the
// convention of docs/ARCHITECTURE.md, "Constructors and options").
func TestOptionIsSealedInterface(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[breaker.Option]()
	require.Equal(t, reflect.Interface, typ.Kind())
	require.Equal(t, 1, typ.NumMethod())
	assert.False(t, typ.Method(0).IsExported(), "the option method is unexported")
}

// TestStateChangeGetsCallersCtx: the hook and the state gauge get the ctx of
// the Execute or Do call that caused the transition; a transition caused by
// State (no ctx) gets context.Background().
func TestStateChangeGetsCallersCtx(t *testing.T) {
	t.Parallel()
	type seen struct {
		val      any
		from, to breaker.State
	}
	var hook []seen
	rec := &recorder{}
	clk := newFakeClock()
	b, err := breaker.New("db", breaker.WithClock(clk), breaker.WithConsecutiveFailures(1),
		breaker.WithOpenTimeout(time.Second), breaker.WithObserver(rec),
		breaker.WithOnStateChange(func(ctx context.Context, _ string, from, to breaker.State) {
			hook = append(hook, seen{ctx.Value(ctxKey{}), from, to})
		}))
	require.NoError(t, err)
	_, _ = rec.take() // the initial gauge

	tripCtx := context.WithValue(context.Background(), ctxKey{}, "trip")
	_ = b.Execute(tripCtx, func(context.Context) error { return errFail })
	clk.Advance(time.Second)
	probeCtx := context.WithValue(context.Background(), ctxKey{}, "probe")
	_, err = breaker.Do(probeCtx, b, func(context.Context) (int, error) { return 1, nil })
	require.NoError(t, err)
	assert.Equal(t, []seen{
		{"trip", breaker.Closed, breaker.Open},
		{"probe", breaker.Open, breaker.HalfOpen},
		{"probe", breaker.HalfOpen, breaker.Closed},
	}, hook)
	_, vals := rec.take()
	assert.Equal(t, []any{"trip", "trip", "probe", "probe", "probe"}, vals,
		"gauge open and the call, gauge half-open, gauge closed and the call")

	hook = nil
	_ = b.Execute(tripCtx, func(context.Context) error { return errFail })
	clk.Advance(time.Second)
	require.Equal(t, breaker.HalfOpen, b.State())
	assert.Equal(t, []seen{{"trip", breaker.Closed, breaker.Open}, {nil, breaker.Open, breaker.HalfOpen}}, hook,
		"State takes no ctx: its transition gets context.Background()")
}

// TestOnlyRefusalsAreRefused: every refusal (Execute, Do and Allow, open
// and half-open) matches ErrRefused; a nil fn (ErrInvalidArgument), bad
// configuration and the protected function's own errors, a cancelled
// context among them, never do.
func TestOnlyRefusalsAreRefused(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := breaker.New("x", breaker.WithConsecutiveFailures(1), breaker.WithOpenTimeout(time.Second),
		breaker.WithClock(clk))
	require.NoError(t, err)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err = b.Execute(cancelled, func(ctx context.Context) error { return ctx.Err() })
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, breaker.ErrRefused)

	err = b.Execute(context.Background(), nil)
	require.ErrorIs(t, err, breaker.ErrInvalidArgument)
	assert.NotErrorIs(t, err, breaker.ErrRefused)
	_, err = breaker.New("x", breaker.WithProbeLimit(0))
	require.ErrorIs(t, err, breaker.ErrInvalidConfig)
	assert.NotErrorIs(t, err, breaker.ErrRefused)

	_ = b.Execute(context.Background(), func(context.Context) error { return errFail })
	require.Equal(t, breaker.Open, b.State())
	_, err = b.Allow()
	assert.ErrorIs(t, err, breaker.ErrRefused, "Allow while open")
	_, err = breaker.Do(context.Background(), b, func(context.Context) (int, error) { return 0, nil })
	assert.ErrorIs(t, err, breaker.ErrRefused, "Do while open")

	clk.Advance(time.Second)
	done, err := b.Allow()
	require.NoError(t, err)
	_, err = b.Allow()
	assert.ErrorIs(t, err, breaker.ErrRefused, "Allow without a probe slot")
	err = b.Execute(context.Background(), func(context.Context) error { return nil })
	assert.ErrorIs(t, err, breaker.ErrRefused, "Execute without a probe slot")
	done(errors.New("probe failed"))
}
