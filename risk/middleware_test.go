package risk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type mwResp struct {
	status    int
	body      map[string]string
	retry     string
	challenge string
	reached   bool
}

func serve(t *testing.T, h func(http.Handler) http.Handler, setup func(r *http.Request)) mwResp {
	t.Helper()
	var reached bool
	final := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		_, ok := DecisionFrom(r.Context())
		assert.True(t, ok, "decision in context")
		w.WriteHeader(http.StatusAccepted)
	})
	req := httptest.NewRequest(http.MethodPost, "/buy", nil)
	req.RemoteAddr = "198.51.100.10:4000"
	if setup != nil {
		setup(req)
	}
	rec := httptest.NewRecorder()
	h(final).ServeHTTP(rec, req)
	var body map[string]string
	if rec.Code != http.StatusAccepted {
		assert.Equal(t, "application/json; charset=utf-8", rec.Header().Get("Content-Type"))
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	}
	return mwResp{rec.Code, body, rec.Header().Get("Retry-After"), rec.Header().Get("X-Risk-Challenge"), reached}
}

func TestMiddlewareResponses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		d       Decision
		err     error
		opts    []MiddlewareOption
		copts   []CheckerOption
		status  int
		errCode string
		reason  string
		retry   string
		reached bool
	}{
		{name: "allow", status: 202, reached: true},
		{name: "deny", d: Decision{Action: Deny, Reason: ReasonUserBlacklisted, RetryAfter: 90 * time.Second}, status: 403, errCode: "forbidden", reason: ReasonUserBlacklisted, retry: "90"},
		{name: "throttled", d: Decision{Action: Deny, Reason: ReasonTooFrequent, Throttled: true, RetryAfter: 1500 * time.Millisecond}, status: 429, errCode: "too_many_requests", reason: ReasonTooFrequent, retry: "2"},
		{name: "challenge", d: Decision{Action: Challenge, Reason: ReasonSuspicious}, status: 403, errCode: "challenge", reason: ReasonSuspicious},
		{name: "failure closed", err: errDown, status: 503, errCode: "unavailable"},
		{name: "failure open", err: errDown, copts: []CheckerOption{WithFailurePolicy(FailOpen)}, status: 202, reached: true},
		{name: "failure challenge", err: errDown, copts: []CheckerOption{WithFailurePolicy(FailChallenge)}, status: 403, errCode: "challenge", reason: ReasonUnavailable},
		{name: "dry run deny passes", d: Decision{Action: Deny, Reason: "x"}, copts: []CheckerOption{WithDryRun(true)}, status: 202, reached: true},
		{name: "challenge handler may pass", d: Decision{Action: Challenge, Reason: "c"}, opts: []MiddlewareOption{WithChallengeHandler(
			func(w http.ResponseWriter, r *http.Request, next http.Handler, d Decision) {
				if r.Header.Get("X-Captcha") != "" {
					next.ServeHTTP(w, r)
					return
				}
				writeJSON(w, http.StatusUnauthorized, "captcha_required", d.Reason)
			})}, status: 202, reached: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var decisions atomic.Int64
			chk, err := NewChecker([]Rule{fixed("r", c.d, c.err)}, append(c.copts,
				WithOnDecision(func(context.Context, Subject, Decision) { decisions.Add(1) }))...)
			require.NoError(t, err)
			mw, err := NewMiddleware(chk, c.opts...)
			require.NoError(t, err)
			got := serve(t, mw, func(r *http.Request) { r.Header.Set("X-Captcha", "1") })
			assert.Equal(t, c.status, got.status)
			assert.Equal(t, c.reached, got.reached)
			assert.Equal(t, c.retry, got.retry)
			if c.errCode != "" {
				assert.Equal(t, c.errCode, got.body["error"])
				assert.Equal(t, c.reason, got.body["reason"])
			}
			if c.errCode == "challenge" {
				assert.Equal(t, c.reason, got.challenge)
			}
		})
	}
	_, err := NewMiddleware(nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

func TestMiddlewareSubject(t *testing.T) {
	t.Parallel()
	var got Subject
	chk, err := NewChecker([]Rule{NewRule("spy", func(_ context.Context, s Subject) (Decision, error) {
		got = s
		return Decision{}, nil
	})})
	require.NoError(t, err)
	ipr, err := NewIPResolver(IPResolverConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	require.NoError(t, err)
	mw, err := NewMiddleware(chk, WithIPResolver(ipr), WithDeviceHeader("X-Dev"))
	require.NoError(t, err)
	h := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mw(next).ServeHTTP(w, r.WithContext(WithUser(r.Context(), "u9")))
		})
	}
	serve(t, h, func(r *http.Request) {
		r.RemoteAddr = "10.0.0.5:1"
		r.Header.Set("X-Forwarded-For", "1.1.1.1, 203.0.113.4")
		r.Header.Set("X-Dev", "phone-1")
	})
	assert.Equal(t, Subject{UserID: "u9", IP: netipMust("203.0.113.4"), DeviceID: "phone-1"}, got)

	// Default: no proxy trusted; the device header is passed on as sent
	// (the built-in rules deny an invalid one, see TestInvalidIDs...).
	mw2, err := NewMiddleware(chk)
	require.NoError(t, err)
	serve(t, mw2, func(r *http.Request) {
		r.Header.Set("X-Forwarded-For", "1.1.1.1")
		r.Header.Set("X-Device-ID", strings.Repeat("x", 200))
	})
	assert.Equal(t, Subject{IP: netipMust("198.51.100.10"), DeviceID: strings.Repeat("x", 200)}, got)

	// Custom subject func; an error is a 400.
	mw3, err := NewMiddleware(chk, WithSubjectFunc(func(r *http.Request) (Subject, error) {
		if r.Header.Get("X-Bad") != "" {
			return Subject{}, fmt.Errorf("bad")
		}
		return Subject{UserID: "fixed"}, nil
	}))
	require.NoError(t, err)
	serve(t, mw3, nil)
	assert.Equal(t, Subject{UserID: "fixed"}, got)
	resp := serve(t, mw3, func(r *http.Request) { r.Header.Set("X-Bad", "1") })
	assert.Equal(t, 400, resp.status)
}

// stack builds Auth → Middleware(Blacklist, Behaviour, Device) on rdb.
type stack struct {
	sessions *SessionStore
	bl       *Blacklist
	handler  func(http.Handler) http.Handler
}

func newStack(t *testing.T, rdb redis.UniversalClient, prefix string, copts ...CheckerOption) stack {
	t.Helper()
	p := prefix
	sessions, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: p})
	require.NoError(t, err)
	bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: p})
	require.NoError(t, err)
	beh, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Minute, FlagAt: 5, DenyAt: 8, KeyPrefix: p, AutoBlacklist: bl})
	require.NoError(t, err)
	dev, err := NewDeviceBinder(rdb, DeviceBinderConfig{KeyPrefix: p})
	require.NoError(t, err)
	chk, err := NewChecker([]Rule{bl, beh, dev}, copts...)
	require.NoError(t, err)
	ipr, err := NewIPResolver(IPResolverConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	require.NoError(t, err)
	mw, err := NewMiddleware(chk, WithIPResolver(ipr))
	require.NoError(t, err)
	auth, err := NewAuth(sessions)
	require.NoError(t, err)
	return stack{sessions, bl, func(next http.Handler) http.Handler { return auth(mw(next)) }}
}

func TestStackAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		st := newStack(t, rdb, prefix)
		req := func(tok, xff, device string) func(r *http.Request) {
			return func(r *http.Request) {
				r.RemoteAddr = "10.0.0.1:1" // the load balancer
				if tok != "" {
					r.Header.Set("Authorization", "Bearer "+tok)
				}
				r.Header.Set("X-Forwarded-For", xff)
				if device != "" {
					r.Header.Set("X-Device-ID", device)
				}
			}
		}
		// 100 users behind one corporate NAT address, one request each, own
		// devices: nobody is refused for sharing the IP.
		const nat = "203.0.113.50"
		toks := make([]string, 100)
		for i := range toks {
			tok, err := st.sessions.Create(bg, fmt.Sprint("user", i), time.Hour)
			require.NoError(t, err)
			toks[i] = tok
			got := serve(t, st.handler, req(tok, nat, fmt.Sprint("dev", i)))
			require.Equal(t, 202, got.status, "user %d behind NAT", i)
		}

		refusals := map[string]int{}
		count := func(r mwResp) {
			if r.status != 202 {
				refusals[fmt.Sprint(r.status, " ", r.body["error"], " ", r.body["reason"])]++
			}
		}
		// Unauthenticated and forged.
		count(serve(t, st.handler, req("", nat, "")))
		count(serve(t, st.handler, req("forged-token", nat, "")))
		// Another user's device.
		count(serve(t, st.handler, req(toks[1], nat, "dev0")))
		// A bot: user0 hammers.
		for i := 0; i < 11; i++ {
			count(serve(t, st.handler, req(toks[0], nat, "dev0")))
		}
		// An operator bans an IP; a spoofed left-hand XFF entry cannot dodge it.
		_, err := st.bl.AddFor(bg, KindIP, "198.51.100.66", "manual", time.Hour)
		require.NoError(t, err)
		count(serve(t, st.handler, req(toks[2], "203.0.113.9, 198.51.100.66", "dev2")))
		// A revoked session.
		require.NoError(t, st.sessions.Revoke(bg, toks[3]))
		count(serve(t, st.handler, req(toks[3], nat, "dev3")))

		assert.Equal(t, map[string]int{
			"401 unauthorized missing_token":  1,
			"401 unauthorized invalid_token":  2,
			"403 forbidden device_other_user": 1,
			// user0 made 1 request earlier, then 11: counts 2..5 pass,
			// 6..8 are challenged, 9 crosses (429 + ban), the ban refuses the rest.
			"403 challenge suspicious_rate":      3,
			"429 too_many_requests too_frequent": 1,
			"403 forbidden user_blacklisted":     3,
			"403 forbidden ip_blacklisted":       1,
		}, refusals)
		// The honest NAT users are still fine afterwards.
		for i := 10; i < 20; i++ {
			got := serve(t, st.handler, req(toks[i], nat, fmt.Sprint("dev", i)))
			assert.Equal(t, 202, got.status)
		}
	})
}

func TestStackRedisDownPolicies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		policy  FailurePolicy
		status  int
		reached bool
	}{
		{"closed", FailClosed, 503, false},
		{"open", FailOpen, 202, true},
		{"challenge", FailChallenge, 403, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rdb, m := testenv.Miniredis(t)
			var failures atomic.Int64
			var last atomic.Value
			bl, err := NewBlacklist(rdb, BlacklistConfig{})
			require.NoError(t, err)
			beh, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Minute, FlagAt: 5, DenyAt: 8})
			require.NoError(t, err)
			dev, err := NewDeviceBinder(rdb, DeviceBinderConfig{})
			require.NoError(t, err)
			checker, err := NewChecker([]Rule{bl, beh, dev}, WithFailurePolicy(c.policy),
				WithOnFailure(func(context.Context, string, error) { failures.Add(1) }),
				WithOnDecision(func(_ context.Context, _ Subject, d Decision) { last.Store(d) }))
			require.NoError(t, err)
			mw, err := NewMiddleware(checker)
			require.NoError(t, err)
			withUser := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mw(next).ServeHTTP(w, r.WithContext(WithUser(r.Context(), "u1")))
				})
			}
			m.SetError("LOADING Redis is loading the dataset in memory")
			got := serve(t, withUser, func(r *http.Request) { r.Header.Set("X-Device-ID", "d1") })
			assert.Equal(t, c.status, got.status)
			assert.Equal(t, c.reached, got.reached)
			switch c.policy {
			case FailClosed:
				assert.EqualValues(t, 1, failures.Load(), "stops at the first failed rule")
				assert.Equal(t, "unavailable", got.body["error"])
			case FailOpen:
				assert.EqualValues(t, 3, failures.Load())
				d := last.Load().(Decision)
				assert.Equal(t, []string{"blacklist", "behaviour", "device"}, d.Degraded)
			case FailChallenge:
				assert.EqualValues(t, 3, failures.Load())
				assert.Equal(t, ReasonUnavailable, got.body["reason"])
			}
		})
	}
}

func TestMiddlewareJSONEscapes(t *testing.T) {
	t.Parallel()
	odd := "a\"b\\c\n<script>é\u2028"
	chk, err := NewChecker([]Rule{fixed("r", Decision{Action: Deny, Reason: odd}, nil)})
	require.NoError(t, err)
	mw, err := NewMiddleware(chk)
	require.NoError(t, err)
	got := serve(t, mw, nil)
	assert.Equal(t, 403, got.status)
	assert.Equal(t, odd, got.body["reason"], "custom reason codes survive JSON encoding")
}
