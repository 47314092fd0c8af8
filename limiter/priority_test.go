package limiter_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/limiter"
)

// The classes of the priority tests: highest first, floors 0 < 10 < 20 in a
// bucket of 30 tokens refilled at 100/s.
var testClasses = []limiter.PriorityClass{
	{Name: "verified"}, {Name: "normal", Floor: 10}, {Name: "suspect", Floor: 20},
}

const (
	prioRate  = 100
	prioBurst = 30
)

func newTestPriority(t testing.TB, clk limiter.Clock) (*limiter.TokenBucket, *limiter.Priority) {
	t.Helper()
	b, err := limiter.NewTokenBucket(prioRate, prioBurst, limiter.WithClock(clk))
	require.NoError(t, err)
	p, err := limiter.NewPriority(b, testClasses...)
	require.NoError(t, err)
	return b, p
}

func TestNewPriorityValidation(t *testing.T) {
	t.Parallel()
	b, err := limiter.NewTokenBucket(10, 10)
	require.NoError(t, err)
	bad := map[string][]limiter.PriorityClass{
		"no class":           nil,
		"no name":            {{Name: ""}},
		"repeated name":      {{Name: "a"}, {Name: "a", Floor: 1}},
		"negative floor":     {{Name: "a", Floor: -1}},
		"equal floors":       {{Name: "a", Floor: 2}, {Name: "b", Floor: 2}},
		"decreasing floors":  {{Name: "a", Floor: 3}, {Name: "b", Floor: 2}},
		"floor at the burst": {{Name: "a"}, {Name: "b", Floor: 10}},
	}
	for name, classes := range bad {
		p, err := limiter.NewPriority(b, classes...)
		require.ErrorIs(t, err, limiter.ErrInvalidConfig, name)
		require.Nil(t, p, name)
	}
	p, err := limiter.NewPriority(nil, testClasses...)
	require.ErrorIs(t, err, limiter.ErrInvalidConfig, "nil bucket")
	require.Nil(t, p)
	_, err = limiter.NewPriority(b, limiter.PriorityClass{Name: "a"}, limiter.PriorityClass{Name: "b", Floor: 9})
	require.NoError(t, err, "a floor one below the burst leaves one token")
}

// offer is one class's traffic in the overload runs: per tick of 10 ms,
// perTick[tick%len(perTick)] requests of one token.
type offer struct {
	class   string
	perTick []int
}

// runOverload offers the classes' traffic for ticks ticks of 10 ms on clk,
// every class in the order given within a tick (the lowest first: the worst
// case for the classes above), and counts what allow admitted per class.
func runOverload(clk *fakeClock, ticks int, offers []offer, allow func(class string) bool) (admitted, offered map[string]int) {
	admitted, offered = map[string]int{}, map[string]int{}
	for tick := range ticks {
		for _, o := range offers {
			for range o.perTick[tick%len(o.perTick)] {
				offered[o.class]++
				if allow(o.class) {
					admitted[o.class]++
				}
			}
		}
		clk.Advance(10 * time.Millisecond)
	}
	return admitted, offered
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestPriorityShedsLowestFirst: three classes offer three times the
// capacity for 10 s (verified 50/s, normal 100/s, suspect 150/s; capacity
// 100/s): verified, which fits its band, gets every request; suspect is
// shed first (it gets no more than its band of the initial burst); normal
// gets what is left; the total never exceeds burst + rate·t. The same
// traffic on the plain bucket (no classes) shows what the classes change.
func TestPriorityShedsLowestFirst(t *testing.T) {
	t.Parallel()
	offers := []offer{
		{"suspect", []int{1, 2}}, {"normal", []int{1}}, {"verified", []int{1, 0}},
	}
	const ticks = 1000 // 10 s
	capacity := prioBurst + prioRate*ticks/100

	clk := newFakeClock()
	_, p := newTestPriority(t, clk)
	ctx := context.Background()
	admitted, offered := runOverload(clk, ticks, offers, func(class string) bool {
		r, err := p.AllowN(ctx, class, 1)
		require.NoError(t, err)
		return r.Allowed
	})
	require.Equal(t, 3*prioRate*ticks/100, total(offered), "three times the capacity offered")
	t.Logf("admitted %v of %v", admitted, offered)

	assert.Equal(t, offered["verified"], admitted["verified"], "the top class keeps its whole rate")
	assert.LessOrEqual(t, admitted["suspect"], prioBurst-20+1, "the lowest class only gets its band of the initial burst")
	assert.Greater(t, admitted["normal"], 4*admitted["suspect"], "the middle class is shed after the lowest")
	assert.Greater(t, admitted["normal"], 400, "the middle class gets what the top leaves")
	assert.LessOrEqual(t, total(admitted), capacity, "never above burst + rate·t")
	assert.GreaterOrEqual(t, total(admitted), capacity-21, "under overload the capacity is used (down to the middle class's floor)")

	// Without classes the same traffic takes the top class's share away.
	clk = newFakeClock()
	plain, _ := newTestPriority(t, clk)
	plainAdmitted, _ := runOverload(clk, ticks, offers, func(string) bool { return plain.Allow() })
	assert.Less(t, plainAdmitted["verified"], offered["verified"]/2, "the plain bucket sheds the top class too")
	assert.LessOrEqual(t, total(plainAdmitted), capacity)
}

// TestPriorityTopClassKeepsFullRate: each class offers the whole capacity
// (3× in total): the top class gets all of it, the others only the initial
// burst above the middle class's floor.
func TestPriorityTopClassKeepsFullRate(t *testing.T) {
	t.Parallel()
	offers := []offer{{"suspect", []int{1}}, {"normal", []int{1}}, {"verified", []int{1}}}
	clk := newFakeClock()
	_, p := newTestPriority(t, clk)
	ctx := context.Background()
	admitted, offered := runOverload(clk, 1000, offers, func(class string) bool {
		r, err := p.AllowN(ctx, class, 1)
		require.NoError(t, err)
		return r.Allowed
	})
	t.Logf("admitted %v of %v", admitted, offered)
	assert.Equal(t, offered["verified"], admitted["verified"])
	assert.LessOrEqual(t, admitted["normal"]+admitted["suspect"], prioBurst-10,
		"the classes below share only the initial burst above normal's floor")
	assert.LessOrEqual(t, admitted["suspect"], admitted["normal"])
	assert.LessOrEqual(t, total(admitted), prioBurst+prioRate*10)
}

// TestPriorityConcurrentNeverExceedsCapacity hammers the classes from many
// goroutines at a frozen clock: the admissions, counted, never exceed the
// burst, no class takes below its floor, and the top class drains the rest.
func TestPriorityConcurrentNeverExceedsCapacity(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, p := newTestPriority(t, clk)
	var admitted [3]atomic.Int64
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 200 {
				c := (g + i) % 3
				r, err := p.AllowN(context.Background(), testClasses[c].Name, 1)
				if err == nil && r.Allowed {
					admitted[c].Add(1)
				}
			}
		})
	}
	wg.Wait()
	sum := admitted[0].Load() + admitted[1].Load() + admitted[2].Load()
	assert.Equal(t, int64(prioBurst), sum, "exactly the burst, never more")
	assert.LessOrEqual(t, admitted[2].Load(), int64(prioBurst-20), "suspect stops at its floor")
	assert.LessOrEqual(t, admitted[1].Load()+admitted[2].Load(), int64(prioBurst-10), "normal and suspect stop at normal's floor")
	assert.InDelta(t, 0, b.Tokens(), 1e-9, "the bucket is empty")
}

// TestPriorityResult: each class sees the bucket above its floor.
func TestPriorityResult(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, p := newTestPriority(t, clk)
	ctx := context.Background()
	r, err := p.AllowN(ctx, "suspect", 10)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 100 * time.Millisecond}, r)
	r, err = p.AllowN(ctx, "suspect", 1)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Allowed: false, Limit: 10, Remaining: 0, RetryAfter: 10 * time.Millisecond,
		ResetAfter: 100 * time.Millisecond}, r)
	r, err = p.AllowN(ctx, "normal", 1)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Allowed: true, Limit: 20, Remaining: 9, ResetAfter: 110 * time.Millisecond}, r)
	assert.InDelta(t, 19, b.Tokens(), 1e-9, "one bucket: 11 tokens spent")

	// Arguments: an unknown class and a cost above the class's band spend nothing.
	_, err = p.AllowN(ctx, "vip", 1)
	require.ErrorIs(t, err, limiter.ErrInvalidArgument)
	_, err = p.AllowN(ctx, "suspect", 11)
	require.ErrorIs(t, err, limiter.ErrInvalidArgument)
	_, err = p.AllowN(ctx, "verified", 0)
	require.ErrorIs(t, err, limiter.ErrInvalidArgument)
	require.ErrorIs(t, p.RefundN(ctx, "vip", 1), limiter.ErrInvalidArgument)
	assert.InDelta(t, 19, b.Tokens(), 1e-9)

	// A refund goes back to the shared bucket.
	require.NoError(t, p.RefundN(ctx, "suspect", 10))
	assert.InDelta(t, 29, b.Tokens(), 1e-9)
	r, err = p.AllowN(ctx, "suspect", 9)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
}

// TestPrioritySpecialRates: a quota bucket (rate 0) applies the floors to
// the quota left; an infinite one admits everything.
func TestPrioritySpecialRates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, err := limiter.NewTokenBucket(0, 5)
	require.NoError(t, err)
	p, err := limiter.NewPriority(q, limiter.PriorityClass{Name: "hi"}, limiter.PriorityClass{Name: "lo", Floor: 3})
	require.NoError(t, err)
	got := map[string]int{}
	for range 10 {
		for _, c := range []string{"lo", "hi"} {
			r, err := p.AllowN(ctx, c, 1)
			require.NoError(t, err)
			if r.Allowed {
				got[c]++
			}
		}
	}
	// lo may use the quota down to 3 left, hi all of it: lo's first take
	// and hi's first leave 3, so lo is refused from then on.
	assert.Equal(t, map[string]int{"lo": 1, "hi": 4}, got)

	inf, err := limiter.NewTokenBucket(limiter.Inf, 0)
	require.NoError(t, err)
	p, err = limiter.NewPriority(inf, limiter.PriorityClass{Name: "hi"}, limiter.PriorityClass{Name: "lo", Floor: 3})
	require.NoError(t, err)
	for range 100 {
		r, err := p.AllowN(ctx, "lo", 1)
		require.NoError(t, err)
		require.True(t, r.Allowed)
	}
}

// TestPriorityInChain: a class refused after a per-user step refunds that
// step, and a later step's refusal refunds the shared bucket.
func TestPriorityInChain(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, p := newTestPriority(t, clk)
	perUser, err := limiter.NewKeyed(1, 1, limiter.WithClock(clk))
	require.NoError(t, err)
	never := limiterFunc(func(context.Context, string, int) (limiter.Result, error) { return limiter.Result{}, nil })
	ctx := context.Background()
	_, idx, err := limiter.Chain(ctx, 1, limiter.Step{Limiter: p, Key: "normal"}, limiter.Step{Limiter: never, Key: "x"})
	require.NoError(t, err)
	assert.Equal(t, 1, idx)
	assert.InDelta(t, prioBurst, b.Tokens(), 1e-9, "the class's token was refunded")
	r, idx, err := limiter.Chain(ctx, 1, limiter.Step{Limiter: perUser, Key: "u1"}, limiter.Step{Limiter: p, Key: "verified"})
	require.NoError(t, err)
	assert.Equal(t, -1, idx)
	assert.True(t, r.Allowed)
}

// TestPriorityMiddleware: the class is a function of the request (here a
// risk score in a header mapped to a class); under overload the suspect
// request gets 429 while the verified one still passes.
func TestPriorityMiddleware(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, p := newTestPriority(t, clk)
	classOf := func(r *http.Request) (string, error) {
		score, err := strconv.Atoi(r.Header.Get("X-Risk-Score"))
		switch {
		case err != nil || score >= 70:
			return "suspect", nil
		case score >= 30:
			return "normal", nil
		}
		return "verified", nil
	}
	mw, err := limiter.NewMiddleware([]limiter.Rule{{Name: "priority", Limiter: p, Key: classOf}})
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	do := func(score string) int {
		req := httptest.NewRequest(http.MethodPost, "/buy", nil)
		req.Header.Set("X-Risk-Score", score)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	codes := map[int]int{}
	for range 15 { // a flood of suspect requests: 10 pass (the band), 5 are shed
		codes[do("90")]++
	}
	assert.Equal(t, map[int]int{http.StatusNoContent: 10, http.StatusTooManyRequests: 5}, codes)
	assert.Equal(t, http.StatusTooManyRequests, do(""), "no score counts as suspect")
	assert.Equal(t, http.StatusNoContent, do("50"), "normal still passes")
	assert.Equal(t, http.StatusNoContent, do("5"), "verified still passes")
}

// BenchmarkPriorityAllow measures a classed decision beside the plain
// bucket's Allow (the anchor) on the same clock.
func BenchmarkPriorityAllow(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=tokenbucket-allow", func(b *testing.B) {
		tb, err := limiter.NewTokenBucket(1e9, 1e6)
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			tb.Allow()
		}
	})
	b.Run("impl=priority-allown", func(b *testing.B) {
		tb, err := limiter.NewTokenBucket(1e9, 1e6)
		require.NoError(b, err)
		p, err := limiter.NewPriority(tb, limiter.PriorityClass{Name: "verified"},
			limiter.PriorityClass{Name: "normal", Floor: 1000}, limiter.PriorityClass{Name: "suspect", Floor: 2000})
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			_, _ = p.AllowN(ctx, "suspect", 1)
		}
	})
}
