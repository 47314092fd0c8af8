package token

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
)

// recorder is an observe.Observer that keeps every event and the value of ctxKey
// in the context it was given.
type recorder struct {
	mu     sync.Mutex
	events []observe.Event
	ctxVal []any
}

type ctxKey struct{}

func (r *recorder) Observe(ctx context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.ctxVal = append(r.ctxVal, ctx.Value(ctxKey{}))
}

func (r *recorder) take() []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	for i, v := range r.ctxVal {
		if v != "caller" {
			panic("event " + e[i].Stage + " without the caller's ctx")
		}
	}
	r.ctxVal = nil
	return e
}

// shape is what a test asserts of an event besides its positive Duration
// and its Err (set exactly for "error").
type shape struct{ stage, outcome, activity string }

func shapes(t *testing.T, ev []observe.Event) []shape {
	t.Helper()
	out := make([]shape, len(ev))
	for i, e := range ev {
		assert.Positive(t, e.Duration, "event %d %+v", i, e)
		assert.False(t, e.Gauge)
		assert.Empty(t, e.Name)
		assert.Equal(t, e.Outcome == "error", e.Err != nil, "event %d %+v", i, e)
		out[i] = shape{e.Stage, e.Outcome, e.Activity}
	}
	return out
}

var callerCtx = context.WithValue(context.Background(), ctxKey{}, "caller")

// TestObserverPool: every Take, Consume and Restore path is reported once,
// on every Redis kind, and the events agree with the pool's own counters.
func TestObserverPool(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	var mu sync.Mutex // the subtests share rec
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		mu.Lock()
		defer mu.Unlock()
		rec.take()
		ctx := callerCtx
		_, err := p.Issue(ctx, "7", 1)
		require.NoError(t, err)
		g, err := p.Take(ctx, "7", "alice")
		require.NoError(t, err)
		require.Equal(t, Granted, g.Status)
		g2, err := p.Take(ctx, "7", "alice")
		require.NoError(t, err)
		require.Equal(t, Held, g2.Status)
		g3, err := p.Take(ctx, "7", "bob")
		require.NoError(t, err)
		require.Equal(t, Empty, g3.Status)
		_, err = p.Take(ctx, "8", "bob")
		require.NoError(t, err)
		_, err = p.Take(ctx, "7", "{x}")
		require.ErrorIs(t, err, ErrInvalidArgument)

		require.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "7", User: "bob", Token: g.Token}), ErrWrongUser)
		require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: "7", User: "alice", Token: g.Token}))
		require.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "7", User: "alice", Token: g.Token}), ErrUsed)
		require.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "7", User: "alice", Token: "short"}), ErrMalformed)
		require.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "7", User: "bob", Token: g.Token}), ErrWrongUser)
		require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "7", User: "alice", Token: g.Token}))
		st, err := p.Stats(ctx, "7")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 1, Free: 0, Bound: 1, Used: 0}, st, "the restore is counted in Redis")
		clk.Advance(6 * time.Minute) // past the default bind TTL
		require.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "7", User: "alice", Token: g.Token}), ErrExpired)
		require.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "7", User: "alice", Token: g.Token}), ErrNotFound)

		assert.Equal(t, []shape{
			{StageTake, "granted", "7"}, {StageTake, "held", "7"}, {StageTake, "empty", "7"},
			{StageTake, "not_issued", "8"}, {StageTake, "invalid_argument", "7"},
			{StageConsume, "wrong_user", "7"}, {StageConsume, "ok", "7"}, {StageConsume, "used", "7"},
			{StageConsume, "malformed", "7"}, {StageRestore, "wrong_user", "7"}, {StageRestore, "ok", "7"},
			{StageConsume, "expired", "7"}, {StageRestore, "not_found", "7"},
		}, shapes(t, rec.take()))
	}, WithObserver(rec), WithMultiplier(1))
}

func TestObserverPoolRedisError(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	rec := &recorder{}
	p, err := NewPool(rdb, WithObserver(rec), WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	m.SetError("READONLY")
	_, err = p.Take(callerCtx, "7", "alice")
	require.Error(t, err)
	require.Error(t, p.Consume(callerCtx, ConsumeParams{Activity: "7", User: "alice", Token: "AAAAAAAAAAAAAAAAAAAAAA"}))
	require.Error(t, p.Restore(callerCtx, ConsumeParams{Activity: "7", User: "alice", Token: "AAAAAAAAAAAAAAAAAAAAAA"}))
	ev := rec.take()
	assert.Equal(t, []shape{{StageTake, "error", "7"}, {StageConsume, "error", "7"}, {StageRestore, "error", "7"}},
		shapes(t, ev))
	for _, e := range ev {
		assert.ErrorContains(t, e.Err, "READONLY")
	}
}

func TestObserverVerify(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	rec := &recorder{}
	clk := newFakeClock(t0)
	s := newTestSigner(t, clk, WithObserver(rec), WithReplayGuard(rdb), WithKeyPrefix(testenv.Prefix(t)))
	tok := sign(t, s, "7", "alice")
	ctx := callerCtx
	_, err := s.Verify(ctx, VerifyParams{Token: tok, Activity: "7", User: "alice"})
	require.ErrorIs(t, err, ErrNotYetValid)
	clk.Set(start)
	_, err = s.Verify(ctx, VerifyParams{Token: tok, Activity: "7", User: "bob"})
	require.ErrorIs(t, err, ErrWrongUser)
	_, err = s.Verify(ctx, VerifyParams{Token: tok, Activity: "8", User: "alice"})
	require.ErrorIs(t, err, ErrWrongActivity)
	_, err = s.Verify(ctx, VerifyParams{Token: "!!", Activity: "7", User: "alice"})
	require.ErrorIs(t, err, ErrMalformed)
	_, err = s.Verify(ctx, VerifyParams{Token: tok, Activity: "7", User: "alice"})
	require.NoError(t, err)
	_, err = s.Verify(ctx, VerifyParams{Token: tok, Activity: "7", User: "alice"})
	require.ErrorIs(t, err, ErrReplayed)
	tok2 := sign(t, s, "7", "alice")
	m.SetError("READONLY")
	_, err = s.Verify(ctx, VerifyParams{Token: tok2, Activity: "7", User: "alice"})
	require.Error(t, err)
	m.SetError("")
	clk.Set(start.Add(time.Hour))
	_, err = s.Verify(ctx, VerifyParams{Token: tok2, Activity: "7", User: "alice"})
	require.ErrorIs(t, err, ErrExpired)
	ev := rec.take()
	assert.Equal(t, []shape{
		{StageVerify, "not_yet_valid", "7"}, {StageVerify, "wrong_user", "7"}, {StageVerify, "wrong_activity", "8"},
		{StageVerify, "malformed", "7"}, {StageVerify, "ok", "7"}, {StageVerify, "replayed", "7"},
		{StageVerify, "error", "7"}, {StageVerify, "expired", "7"},
	}, shapes(t, ev))
	assert.ErrorContains(t, ev[6].Err, "READONLY")
}

func TestObserverNilIgnored(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	p, err := NewPool(rdb, WithObserver(nil), WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	g, err := p.Take(context.Background(), "7", "alice")
	require.NoError(t, err)
	assert.Equal(t, NotIssued, g.Status)
}
