package captcha

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
)

// recorder is an observe.Observer that keeps every event and checks it was given
// the caller's context.
type recorder struct {
	mu     sync.Mutex
	events []observe.Event
	ctxOK  bool
}

type ctxKey struct{}

var callerCtx = context.WithValue(context.Background(), ctxKey{}, "caller")

func newRecorder() *recorder { return &recorder{ctxOK: true} }

func (r *recorder) Observe(ctx context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.ctxOK = r.ctxOK && ctx.Value(ctxKey{}) == "caller"
}

// outcomes returns "stage outcome" of every event, after checking the
// fields every event shares.
func (r *recorder) outcomes(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.True(t, r.ctxOK, "every event carries the caller's ctx")
	var out []string
	for i, e := range r.events {
		assert.Positive(t, e.Duration, "event %d %+v", i, e)
		assert.Empty(t, e.Activity)
		assert.Empty(t, e.Name)
		assert.False(t, e.Gauge)
		assert.Equal(t, e.Outcome == "error", e.Err != nil, "event %d %+v", i, e)
		out = append(out, e.Stage+" "+e.Outcome)
	}
	r.events = nil
	return out
}

func TestObserverEvents(t *testing.T) {
	t.Parallel()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			s, err := New(rdb, fixed("1+1", "2"), WithKeyPrefix(testenv.Prefix(t)), WithMaxAttempts(2), WithObserver(rec))
			require.NoError(t, err)
			ctx := callerCtx
			exists := func(id string) int64 {
				n, err := rdb.Exists(context.Background(), challengeKey(s.opts.prefix, id)).Result()
				require.NoError(t, err)
				return n
			}
			c, err := s.Generate(ctx, GenerateParams{User: "alice"})
			require.NoError(t, err)
			require.ErrorIs(t, s.Verify(ctx, VerifyParams{ID: c.ID, Answer: "2", User: "bob"}), ErrWrongUser)
			require.ErrorIs(t, s.Verify(ctx, VerifyParams{ID: c.ID, Answer: "3", User: "alice"}), ErrWrongAnswer)
			require.Equal(t, int64(1), exists(c.ID))
			require.ErrorIs(t, s.Verify(ctx, VerifyParams{ID: c.ID, Answer: "3", User: "alice"}), ErrTooManyAttempts)
			require.Equal(t, int64(0), exists(c.ID), "burnt")
			c2, err := s.Generate(ctx, GenerateParams{User: "alice"})
			require.NoError(t, err)
			require.NoError(t, s.Verify(ctx, VerifyParams{ID: c2.ID, Answer: " 2 ", User: "alice"}))
			require.Equal(t, int64(0), exists(c2.ID), "solved")
			require.ErrorIs(t, s.Verify(ctx, VerifyParams{ID: c2.ID, Answer: "2", User: "alice"}), ErrNotFound)
			require.ErrorIs(t, s.Verify(ctx, VerifyParams{ID: "not-an-id", Answer: "2", User: "alice"}), ErrNotFound)
			_, err = s.Generate(ctx, GenerateParams{User: strings.Repeat("u", 300)})
			require.Error(t, err)
			assert.Equal(t, []string{
				"captcha.create ok", "captcha.verify wrong_user", "captcha.verify wrong_answer",
				"captcha.verify too_many_attempts", "captcha.create ok", "captcha.verify ok",
				"captcha.verify not_found", "captcha.verify not_found", "captcha.create error",
			}, rec.outcomes(t))
		})
	}
}

func TestObserverErrors(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	rec := newRecorder()
	boom := errors.New("no ink")
	broken := GeneratorFunc(func(context.Context, Request) (Puzzle, error) { return Puzzle{}, boom })
	s, err := New(rdb, broken, WithObserver(rec))
	require.NoError(t, err)
	_, err = s.Generate(callerCtx, GenerateParams{})
	require.ErrorIs(t, err, boom)
	s2, err := New(rdb, fixed("q", "a"), WithObserver(rec))
	require.NoError(t, err)
	m.SetError("READONLY")
	_, err = s2.Generate(callerCtx, GenerateParams{})
	require.Error(t, err)
	require.Error(t, s2.Verify(callerCtx, VerifyParams{ID: newID(), Answer: "a", User: ""}))
	rec.mu.Lock()
	ev := append([]observe.Event(nil), rec.events...)
	rec.mu.Unlock()
	assert.Equal(t, []string{"captcha.create error", "captcha.create error", "captcha.verify error"}, rec.outcomes(t))
	assert.ErrorIs(t, ev[0].Err, ErrGenerator)
	assert.ErrorContains(t, ev[1].Err, "READONLY")
	assert.ErrorContains(t, ev[2].Err, "READONLY")
}

// TestNilOptionIgnored: New used to call every option, so a nil one
// panicked.
func TestNilOptionIgnored(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	var s *Store
	require.NotPanics(t, func() {
		var err error
		s, err = New(rdb, fixed("q", "a"), nil, WithObserver(nil))
		require.NoError(t, err)
	})
	_, err := s.Generate(context.Background(), GenerateParams{})
	require.NoError(t, err)
}
