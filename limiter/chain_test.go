package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/limiter"
)

// counting wraps a limiter and counts what it spends and refunds.
type counting struct {
	limiter.Limiter
	calls, refunds int
}

func (c *counting) AllowN(ctx context.Context, key string, n int) (limiter.Result, error) {
	c.calls++
	return c.Limiter.AllowN(ctx, key, n)
}

func (c *counting) RefundN(ctx context.Context, key string, n int) error {
	c.refunds++
	return c.Limiter.(limiter.Refunder).RefundN(ctx, key, n)
}

func keyed(t *testing.T, burst int) *limiter.Keyed {
	t.Helper()
	k, err := limiter.NewKeyed(limiter.Every(time.Hour), burst, limiter.WithClock(newFakeClock()))
	require.NoError(t, err)
	return k
}

func TestChainEarlierRefusalSparesLaterBudgets(t *testing.T) {
	t.Parallel()
	user, global := &counting{Limiter: keyed(t, 1)}, &counting{Limiter: keyed(t, 100)}
	ctx := context.Background()
	steps := []limiter.Step{{Limiter: user, Key: "u1"}, {Limiter: global, Key: "g"}}
	r, idx, err := limiter.Chain(ctx, 1, steps...)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	assert.Equal(t, -1, idx)
	assert.Equal(t, 0, r.Remaining, "tightest result")
	for range 10 {
		r, idx, err = limiter.Chain(ctx, 1, steps...)
		require.NoError(t, err)
		assert.False(t, r.Allowed)
		assert.Equal(t, 0, idx, "user refused")
	}
	assert.Equal(t, 1, global.calls, "global never consulted after user refusals")
	gr, err := global.Limiter.AllowN(ctx, "g", 99)
	require.NoError(t, err)
	assert.True(t, gr.Allowed, "global spent exactly 1")
}

func TestChainLaterRefusalRefundsEarlier(t *testing.T) {
	t.Parallel()
	user, device, global := keyed(t, 5), keyed(t, 5), keyed(t, 1)
	ctx := context.Background()
	_, _, err := limiter.Chain(ctx, 1, limiter.Step{Limiter: global, Key: "g"}) // exhaust global
	require.NoError(t, err)
	for range 10 {
		r, idx, err := limiter.Chain(ctx, 1,
			limiter.Step{Limiter: user, Key: "u"}, limiter.Step{Limiter: device, Key: "d"}, limiter.Step{Limiter: global, Key: "g"})
		require.NoError(t, err)
		require.False(t, r.Allowed)
		require.Equal(t, 2, idx)
	}
	for _, l := range []*limiter.Keyed{user, device} {
		r, err := l.AllowN(ctx, map[*limiter.Keyed]string{user: "u", device: "d"}[l], 5)
		require.NoError(t, err)
		assert.True(t, r.Allowed, "earlier budgets were refunded")
	}
}

func TestChainFailureRefundsAndReportsStep(t *testing.T) {
	t.Parallel()
	user := keyed(t, 1)
	boom := errors.New("boom")
	broken := limiterFunc(func(context.Context, string, int) (limiter.Result, error) {
		return limiter.Result{}, boom
	})
	_, idx, err := limiter.Chain(context.Background(), 1, limiter.Step{Limiter: user, Key: "u"}, limiter.Step{Limiter: broken})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 1, idx)
	assert.True(t, user.Allow("u"), "user refunded after the failure")
	_, idx, err = limiter.Chain(context.Background(), 1, limiter.Step{Limiter: nil})
	require.ErrorIs(t, err, limiter.ErrInvalidArgument, "a nil step is a bad argument to Chain")
	assert.Equal(t, 0, idx)
}

func TestChainPerStepCostAndDryRunNotRefunded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shadowInner := keyed(t, 1)
	shadowInner.Allow("u") // exhausted: the dry run will "refuse"
	shadow, err := limiter.NewDryRun(shadowInner, nil)
	require.NoError(t, err)
	costly := keyed(t, 3)
	last := keyed(t, 1)
	last.Allow("l")
	r, idx, err := limiter.Chain(ctx, 1,
		limiter.Step{Limiter: shadow, Key: "u"},
		limiter.Step{Limiter: costly, Key: "c", N: 3},
		limiter.Step{Limiter: last, Key: "l"})
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	assert.Equal(t, 2, idx)
	assert.False(t, shadowInner.Allow("u"), "dry-run step was not refunded (nothing was spent)")
	rr, err := costly.AllowN(ctx, "c", 3)
	require.NoError(t, err)
	assert.True(t, rr.Allowed, "the 3 events were refunded")
}

func TestDryRun(t *testing.T) {
	t.Parallel()
	inner := keyed(t, 2)
	var reported []string
	d, err := limiter.NewDryRun(inner, func(_ context.Context, key string, r limiter.Result, err error) {
		reported = append(reported, key)
		assert.False(t, r.Allowed)
	})
	require.NoError(t, err)
	ctx := context.Background()
	for i := range 5 {
		r, err := d.AllowN(ctx, "u", 1)
		require.NoError(t, err)
		assert.True(t, r.Allowed, "dry run refuses nothing")
		assert.Equal(t, i >= 2, r.DryRunRefused, "call %d", i)
	}
	assert.Equal(t, limiter.DryRunStats{Checked: 5, WouldRefuse: 3}, d.Stats())
	assert.Equal(t, []string{"u", "u", "u"}, reported)
	_, err = d.AllowN(ctx, "u", 3)
	require.ErrorIs(t, err, limiter.ErrInvalidArgument, "programming errors still surface")

	failing, err := limiter.NewDryRun(limiterFunc(func(context.Context, string, int) (limiter.Result, error) {
		return limiter.Result{}, limiter.ErrUnavailable
	}), nil)
	require.NoError(t, err)
	r, err := failing.AllowN(ctx, "k", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed && r.DryRunRefused)
	assert.Equal(t, limiter.DryRunStats{Checked: 1, WouldRefuse: 1, Failures: 1}, failing.Stats())
	require.NoError(t, failing.RefundN(ctx, "k", 1))
	_, err = limiter.NewDryRun(nil, nil)
	require.ErrorIs(t, err, limiter.ErrInvalidConfig)
}
