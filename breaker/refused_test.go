package breaker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/breaker"
)

// TestErrRefusedUmbrella: both refusals, as returned by a real breaker in
// Open and in HalfOpen with its probe slot taken, match ErrRefused and keep
// their own identity and message; the protected function's error does not.
func TestErrRefusedUmbrella(t *testing.T) {
	t.Parallel()
	assert.ErrorIs(t, breaker.ErrOpen, breaker.ErrRefused)
	assert.ErrorIs(t, breaker.ErrTooManyProbes, breaker.ErrRefused)
	assert.NotErrorIs(t, breaker.ErrOpen, breaker.ErrTooManyProbes)
	assert.Equal(t, "breaker: open", breaker.ErrOpen.Error())
	assert.Equal(t, "breaker: too many probes", breaker.ErrTooManyProbes.Error())

	clk := newFakeClock()
	b, err := breaker.New("x", breaker.WithConsecutiveFailures(1), breaker.WithOpenTimeout(time.Second),
		breaker.WithClock(clk))
	require.NoError(t, err)
	ctx := context.Background()
	boom := errors.New("boom")
	err = b.Execute(ctx, func(context.Context) error { return boom })
	require.ErrorIs(t, err, boom)
	assert.NotErrorIs(t, err, breaker.ErrRefused, "the function's own error is not a refusal")
	require.Equal(t, breaker.Open, b.State())

	err = b.Execute(ctx, func(context.Context) error { t.Fatal("ran while open"); return nil })
	assert.ErrorIs(t, err, breaker.ErrRefused)
	assert.ErrorIs(t, err, breaker.ErrOpen)

	clk.Advance(time.Second)
	done, err := b.Allow() // takes the only probe slot
	require.NoError(t, err)
	require.Equal(t, breaker.HalfOpen, b.State())
	_, err = breaker.Do(ctx, b, func(context.Context) (int, error) { t.Fatal("ran without a slot"); return 0, nil })
	assert.ErrorIs(t, err, breaker.ErrRefused)
	assert.ErrorIs(t, err, breaker.ErrTooManyProbes)
	done(nil)
	assert.Equal(t, breaker.Closed, b.State())
}
