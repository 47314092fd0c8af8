package limiter_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/limiter/redislimit"
)

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

func serve(h http.Handler, remote string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/buy", nil)
	req.RemoteAddr = remote
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestMiddlewareHeadersAnd429(t *testing.T) {
	t.Parallel()
	c, m := testenv.Miniredis(t)
	m.SetTime(t0)
	sw, err := redislimit.NewSlidingWindow(c, 2, 10*time.Second, redislimit.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	mw, err := limiter.NewMiddleware([]limiter.Rule{{Name: "ip", Limiter: sw}})
	require.NoError(t, err)
	h := mw(okHandler)

	w := serve(h, "10.0.0.1:5555", nil)
	assert.Equal(t, http.StatusNoContent, w.Code)
	assert.Equal(t, "2", w.Header().Get("RateLimit-Limit"))
	assert.Equal(t, "1", w.Header().Get("RateLimit-Remaining"))
	assert.Equal(t, "10", w.Header().Get("RateLimit-Reset"))
	assert.Empty(t, w.Header().Get("Retry-After"))

	m.SetTime(t0.Add(2500 * time.Millisecond))
	w = serve(h, "10.0.0.1:6666", nil) // same host, other port: same key
	assert.Equal(t, http.StatusNoContent, w.Code)
	assert.Equal(t, "0", w.Header().Get("RateLimit-Remaining"))

	m.SetTime(t0.Add(3 * time.Second))
	w = serve(h, "10.0.0.1:7777", nil)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "7", w.Header().Get("Retry-After"), "first event leaves at 10s")
	assert.Equal(t, "2", w.Header().Get("RateLimit-Limit"))
	assert.Equal(t, "0", w.Header().Get("RateLimit-Remaining"))
	assert.Equal(t, "10", w.Header().Get("RateLimit-Reset"), "9.5s rounded up")
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var body limiter.ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Equal(t, limiter.ErrorBody{Error: "rate_limited", Rule: "ip", RetryAfterMS: 7000}, body)

	w = serve(h, "10.0.0.2:1", nil)
	assert.Equal(t, http.StatusNoContent, w.Code, "other IP unaffected")
}

func TestMiddlewareKeyErrorSpendsNothing(t *testing.T) {
	t.Parallel()
	user, global := keyed(t, 5), keyed(t, 5)
	var hooked []error
	rules := []limiter.Rule{
		{Name: "global", Limiter: global, Key: limiter.ConstKey("g")},
		{Name: "user", Limiter: user, Key: limiter.HeaderKey("X-User")},
	}
	closed, err := limiter.NewMiddleware(rules, limiter.WithOnError(func(_ *http.Request, rule string, err error) {
		hooked = append(hooked, err)
		assert.Equal(t, "user", rule)
	}))
	require.NoError(t, err)
	w := serve(closed(okHandler), "1.2.3.4:1", nil)
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	var body limiter.ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Equal(t, "limiter_key_error", body.Error)
	require.Len(t, hooked, 1)
	assert.ErrorIs(t, hooked[0], limiter.ErrInvalidArgument)
	assert.True(t, global.Allow("g") && global.Allow("g") && global.Allow("g") && global.Allow("g") && global.Allow("g"),
		"global budget untouched by the key failure")

	open, err := limiter.NewMiddleware([]limiter.Rule{
		{Name: "user", Limiter: user, Key: limiter.HeaderKey("X-User")},
	}, limiter.WithKeyFailurePolicy(limiter.FailOpen))
	require.NoError(t, err)
	w = serve(open(okHandler), "1.2.3.4:1", nil)
	assert.Equal(t, http.StatusNoContent, w.Code, "fail-open skips the unkeyable rule")
}

func TestMiddlewareStoreFailure(t *testing.T) {
	t.Parallel()
	c, m := fastFailClient(t)
	sw, err := redislimit.NewSlidingWindow(c, 5, time.Second) // FailClosed by default
	require.NoError(t, err)
	user := keyed(t, 1)
	var denied int
	mw, err := limiter.NewMiddleware([]limiter.Rule{
		{Name: "user", Limiter: user, Key: limiter.HeaderKey("X-User")},
		{Name: "redis", Limiter: sw},
	}, limiter.WithOnDenied(func(*http.Request, string, limiter.Result) { denied++ }))
	require.NoError(t, err)
	m.Close()
	w := serve(mw(okHandler), "1.2.3.4:1", map[string]string{"X-User": "u"})
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	var body limiter.ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Equal(t, limiter.ErrorBody{Error: "limiter_unavailable", Rule: "redis"}, body)
	assert.True(t, user.Allow("u"), "user budget refunded after the store failure")
	assert.Zero(t, denied)

	open, err := redislimit.NewSlidingWindow(c, 5, time.Second, redislimit.WithFailurePolicy(limiter.FailOpen))
	require.NoError(t, err)
	mw2, err := limiter.NewMiddleware([]limiter.Rule{{Limiter: open}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, serve(mw2(okHandler), "1.2.3.4:1", nil).Code)
}

func TestMiddlewareValidation(t *testing.T) {
	t.Parallel()
	_, err := limiter.NewMiddleware(nil)
	require.ErrorIs(t, err, limiter.ErrInvalidConfig)
	_, err = limiter.NewMiddleware([]limiter.Rule{{}})
	require.ErrorIs(t, err, limiter.ErrInvalidConfig)
	_, err = limiter.NewMiddleware([]limiter.Rule{{Limiter: keyed(t, 1), Cost: -1}})
	require.ErrorIs(t, err, limiter.ErrInvalidConfig)
}

func xffReq(remote string, xff ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return r
}

func TestRemoteAddrKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		r    *http.Request
		want string
		err  bool
	}{
		{"v4", xffReq("1.2.3.4:80"), "1.2.3.4", false},
		{"v4 no port", xffReq("1.2.3.4"), "1.2.3.4", false},
		{"v4-mapped v6", xffReq("[::ffff:1.2.3.4]:80"), "1.2.3.4", false},
		{"v4-mapped v6 no port", xffReq("::FFFF:1.2.3.4"), "1.2.3.4", false},
		{"v6", xffReq("[::1]:80"), "::1", false},
		{"v6 upper case and zone", xffReq("[FE80::A%eth0]:80"), "fe80::a", false},
		{"v6 long form", xffReq("[2001:DB8:0:0:0:0:0:1]:443"), "2001:db8::1", false},
		{"not an IP", xffReq("pipe"), "pipe", false},
		{"empty", xffReq(""), "", true},
		{"header ignored", xffReq("1.2.3.4:80", "6.6.6.6"), "1.2.3.4", false},
	}
	for _, tc := range cases {
		got, err := limiter.RemoteAddrKey(tc.r)
		if tc.err {
			assert.Error(t, err, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

func TestForwardedForKey(t *testing.T) {
	t.Parallel()
	kf, err := limiter.ForwardedForKey([]string{"10.0.0.0/8", " 192.0.2.7 ", "2001:db8:ffff::/48"})
	require.NoError(t, err)
	cases := []struct {
		name string
		r    *http.Request
		want string
	}{
		{"untrusted peer: header ignored", xffReq("203.0.113.5:4000", "6.6.6.6"), "203.0.113.5"},
		{"untrusted peer, mapped: canonical", xffReq("[::ffff:203.0.113.5]:4000", "6.6.6.6"), "203.0.113.5"},
		{"trusted peer: right-most untrusted entry", xffReq("10.0.0.1:80", "6.6.6.6, 5.5.5.5"), "5.5.5.5"},
		{"trusted hops skipped, across lines", xffReq("10.0.0.1:80", "6.6.6.6, 5.5.5.5", "10.0.0.9, 192.0.2.7"), "5.5.5.5"},
		{"single-address proxy", xffReq("192.0.2.7:80", "5.5.5.5"), "5.5.5.5"},
		{"v6 proxy", xffReq("[2001:db8:ffff::1]:443", "5.5.5.5"), "5.5.5.5"},
		{"client's own entries are ignored", xffReq("10.0.0.1:80", "1.1.1.1, 10.0.0.2, 5.5.5.5"), "5.5.5.5"},
		{"entry with port", xffReq("10.0.0.1:80", "1.2.3.4:5678"), "1.2.3.4"},
		{"v4-mapped entry", xffReq("10.0.0.1:80", "::ffff:1.2.3.4"), "1.2.3.4"},
		{"bracketed v4-mapped entry with port", xffReq("10.0.0.1:80", "[::FFFF:1.2.3.4]:9"), "1.2.3.4"},
		{"v6 entry lower-cased, zone dropped", xffReq("10.0.0.1:80", "2001:DB8::A%eth0"), "2001:db8::a"},
		{"quoted entry and empty entries", xffReq("10.0.0.1:80", `"5.5.5.5", , `), "5.5.5.5"},
		{"garbage stops at the last verified hop", xffReq("10.0.0.1:80", "5.5.5.5, unknown, 10.0.0.9"), "10.0.0.9"},
		{"garbage next to the peer", xffReq("10.0.0.1:80", "not-an-ip"), "10.0.0.1"},
		{"bad port is garbage", xffReq("10.0.0.1:80", "5.5.5.5:http"), "10.0.0.1"},
		{"every entry trusted: left-most", xffReq("10.0.0.1:80", "10.9.9.9, 10.0.0.2"), "10.9.9.9"},
		{"no header: the peer", xffReq("10.0.0.1:80"), "10.0.0.1"},
	}
	for _, tc := range cases {
		got, err := kf(tc.r)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}

	// No trusted proxy: the header is never believed.
	plain, err := limiter.ForwardedForKey(nil)
	require.NoError(t, err)
	got, err := plain(xffReq("[::ffff:10.0.0.1]:80", "5.5.5.5"))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", got)

	// An IPv4-mapped CIDR trusts the unmapped addresses it covers.
	mapped, err := limiter.ForwardedForKey([]string{"::ffff:10.0.0.0/104"})
	require.NoError(t, err)
	got, err = mapped(xffReq("10.1.2.3:80", "5.5.5.5"))
	require.NoError(t, err)
	assert.Equal(t, "5.5.5.5", got)

	for _, bad := range []string{"", "10.0.0.0/33", "proxy.internal", "10.0.0.1:80", "10.0.0.256"} {
		kf, err := limiter.ForwardedForKey([]string{"10.0.0.0/8", bad})
		require.ErrorIs(t, err, limiter.ErrInvalidConfig, "%q", bad)
		assert.Nil(t, kf)
	}
}

// TestForwardedForKeyOneBudgetPerClient: the spellings of one client
// address share one budget, and a client cannot pick its key by writing
// X-Forwarded-For itself.
func TestForwardedForKeyOneBudgetPerClient(t *testing.T) {
	t.Parallel()
	kf, err := limiter.ForwardedForKey([]string{"10.0.0.0/8"})
	require.NoError(t, err)
	perIP := keyed(t, 3)
	mw, err := limiter.NewMiddleware([]limiter.Rule{{Name: "ip", Limiter: perIP, Key: kf}})
	require.NoError(t, err)
	h := mw(okHandler)
	for i, xff := range []string{"1.2.3.4", "::ffff:1.2.3.4", "1.2.3.4:5678"} {
		w := serve(h, "10.0.0.1:80", map[string]string{"X-Forwarded-For": xff})
		require.Equal(t, http.StatusNoContent, w.Code, xff)
		assert.Equal(t, strconv.Itoa(2-i), w.Header().Get("RateLimit-Remaining"), xff)
	}
	w := serve(h, "10.0.0.1:80", map[string]string{"X-Forwarded-For": "9.9.9.9, 1.2.3.4"})
	assert.Equal(t, http.StatusTooManyRequests, w.Code, "a forged left entry does not reset the budget")
	// a direct client spoofing the header is keyed by its own address
	w = serve(h, "[::ffff:1.2.3.4]:9999", map[string]string{"X-Forwarded-For": "7.7.7.7"})
	assert.Equal(t, http.StatusTooManyRequests, w.Code, "untrusted peer: header ignored, same client")
	assert.False(t, perIP.Allow("1.2.3.4"), "all five were charged to 1.2.3.4")
	assert.True(t, perIP.Allow("7.7.7.7"), "the spoofed address was never charged")
}
