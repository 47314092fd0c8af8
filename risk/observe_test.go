package risk

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is an observe.Observer that keeps every event and checks it was given
// the caller's context.
type recorder struct {
	mu     sync.Mutex
	events []observe.Event
	ctxOK  bool
}

type obsCtxKey struct{}

func newRecorder() *recorder { return &recorder{ctxOK: true} }

func (r *recorder) Observe(ctx context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.ctxOK = r.ctxOK && ctx.Value(obsCtxKey{}) == "caller"
}

// shape is what a test asserts of an event besides its positive Duration
// and its Err (set exactly for "error").
type shape struct{ stage, outcome, name string }

func (r *recorder) shapes(t *testing.T) []shape {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.True(t, r.ctxOK, "every event carries the caller's ctx")
	var out []shape
	for i, e := range r.events {
		assert.Positive(t, e.Duration, "event %d %+v", i, e)
		assert.Empty(t, e.Activity)
		assert.False(t, e.Gauge)
		assert.Equal(t, e.Outcome == "error", e.Err != nil, "event %d %+v", i, e)
		out = append(out, shape{e.Stage, e.Outcome, e.Name})
	}
	r.events = nil
	return out
}

var callerCtx = context.WithValue(context.Background(), obsCtxKey{}, "caller")

// TestObserverCheck: allow, deny (a real ban in Redis), challenge, an
// invalid subject and the failure policies, each reported once.
func TestObserverCheck(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		t.Parallel()
		bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix})
		require.NoError(t, err)
		captcha := NewRule("captcha", func(_ context.Context, s Subject) (Decision, error) {
			if s.UserID == "carol" {
				return Decision{Action: Challenge, Reason: "new_account"}, nil
			}
			return Decision{}, nil
		})
		rec := newRecorder()
		c, err := NewChecker([]Rule{bl, captcha}, WithObserver(rec))
		require.NoError(t, err)
		ctx := callerCtx
		_, err = bl.Add(ctx, KindUser, "bob", "scalper")
		require.NoError(t, err)
		_, banned, err := bl.Banned(ctx, KindUser, "bob")
		require.NoError(t, err)
		require.True(t, banned, "the ban is in Redis")

		want := []Action{Allow, Deny, Challenge, Deny}
		for i, u := range []string{"alice", "bob", "carol", "{bad}"} {
			d, err := c.Check(ctx, Subject{UserID: u})
			require.NoError(t, err)
			require.Equal(t, want[i], d.Action, u)
		}
		assert.Equal(t, []shape{
			{"risk.check", "allow", ""}, {"risk.check", "deny", "blacklist"},
			{"risk.check", "challenge", "captcha"}, {"risk.check", "deny", "blacklist"},
		}, rec.shapes(t))
	})
}

func TestObserverCheckFailuresAndDryRun(t *testing.T) {
	t.Parallel()
	down := fixed("redis", Decision{}, errDown)
	deny := fixed("wall", Decision{Action: Deny, Reason: "x"}, nil)
	rec := newRecorder()
	for _, tc := range []struct {
		rules []Rule
		opts  []CheckerOption
		want  Action
		err   bool
	}{
		{[]Rule{down}, nil, Allow, true},
		{[]Rule{down}, []CheckerOption{WithFailurePolicy(FailOpen)}, Allow, false},
		{[]Rule{down}, []CheckerOption{WithFailurePolicy(FailChallenge)}, Challenge, false},
		{[]Rule{deny}, []CheckerOption{WithDryRun(true)}, Allow, false},
	} {
		c, err := NewChecker(tc.rules, append(tc.opts, WithObserver(rec))...)
		require.NoError(t, err)
		d, err := c.Check(callerCtx, Subject{UserID: "alice"})
		if tc.err {
			require.ErrorIs(t, err, ErrUnavailable)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, d.Action)
	}
	rec.mu.Lock()
	first := rec.events[0]
	rec.mu.Unlock()
	assert.Equal(t, []shape{
		{"risk.check", "error", ""}, {"risk.check", "allow", ""},
		{"risk.check", "challenge", "redis"}, {"risk.check", "deny", "wall"},
	}, rec.shapes(t), "dry run reports the would-be deny")
	assert.ErrorIs(t, first.Err, errDown)
}

// TestObserverAuth: every Auth answer is reported once, before next runs.
func TestObserverAuth(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		t.Parallel()
		ss, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: prefix})
		require.NoError(t, err)
		tok, err := ss.Create(bg, "alice", time.Hour)
		require.NoError(t, err)
		rec := newRecorder()
		a, err := NewAuth(ss, WithObserver(rec))
		require.NoError(t, err)
		var seen []int // events recorded when next ran
		h := a(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec.mu.Lock()
			seen = append(seen, len(rec.events))
			rec.mu.Unlock()
			u, _ := UserFrom(r.Context())
			assert.Equal(t, "alice", u)
			w.WriteHeader(http.StatusNoContent)
		}))
		do := func(h http.Handler, auth string) int {
			req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(callerCtx)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w.Code
		}
		assert.Equal(t, http.StatusNoContent, do(h, "Bearer "+tok))
		assert.Equal(t, http.StatusUnauthorized, do(h, ""))
		assert.Equal(t, http.StatusUnauthorized, do(h, "Bearer !!"))
		assert.Equal(t, http.StatusUnauthorized, do(h, "Bearer unknown"))
		require.NoError(t, ss.Revoke(bg, tok))
		assert.Equal(t, http.StatusUnauthorized, do(h, "Bearer "+tok), "revoked in Redis")
		broken, err := NewAuth(AuthenticatorFunc(func(context.Context, string) (string, error) { return "", errDown }),
			WithObserver(rec))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, do(broken(http.NotFoundHandler()), "Bearer abc"))
		assert.Equal(t, []shape{
			{"risk.auth", "ok", ""}, {"risk.auth", "missing_token", ""}, {"risk.auth", "malformed_token", ""},
			{"risk.auth", "invalid_token", ""}, {"risk.auth", "invalid_token", ""}, {"risk.auth", "error", ""},
		}, rec.shapes(t))
		assert.Equal(t, []int{1}, seen, "ok was reported before next ran")
	})
}

func TestObserverNilIgnored(t *testing.T) {
	t.Parallel()
	c, err := NewChecker([]Rule{fixed("a", Decision{}, nil)}, WithObserver(nil))
	require.NoError(t, err)
	d, err := c.Check(bg, Subject{})
	require.NoError(t, err)
	assert.Equal(t, Allow, d.Action)
}
