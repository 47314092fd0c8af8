package limiter_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
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
	sw, err := limiter.NewSlidingWindow(c, 2, 10*time.Second, limiter.WithKeyPrefix(testenv.Prefix(t)))
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
	assert.ErrorIs(t, hooked[0], limiter.ErrKey)
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
	sw, err := limiter.NewSlidingWindow(c, 5, time.Second) // FailClosed by default
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

	open, err := limiter.NewSlidingWindow(c, 5, time.Second, limiter.WithFailurePolicy(limiter.FailOpen))
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

func TestKeyFuncs(t *testing.T) {
	t.Parallel()
	req := func(remote string, xff ...string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		for _, v := range xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		return r
	}
	cases := []struct {
		name string
		kf   limiter.KeyFunc
		r    *http.Request
		want string
		err  bool
	}{
		{"remote v4", limiter.RemoteAddrKey, req("1.2.3.4:80"), "1.2.3.4", false},
		{"remote v6", limiter.RemoteAddrKey, req("[::1]:80"), "::1", false},
		{"remote no port", limiter.RemoteAddrKey, req("pipe"), "pipe", false},
		{"remote empty", limiter.RemoteAddrKey, req(""), "", true},
		{"xff ignored by default key", limiter.RemoteAddrKey, req("1.2.3.4:80", "6.6.6.6"), "1.2.3.4", false},
		{"xff one hop", limiter.ForwardedForKey(1), req("10.0.0.1:80", "6.6.6.6, 5.5.5.5"), "5.5.5.5", false},
		{"xff two hops", limiter.ForwardedForKey(2), req("10.0.0.1:80", "6.6.6.6, 5.5.5.5", "10.0.0.9"), "5.5.5.5", false},
		{"xff too short", limiter.ForwardedForKey(3), req("10.0.0.1:80", "5.5.5.5"), "10.0.0.1", false},
		{"xff garbage", limiter.ForwardedForKey(1), req("10.0.0.1:80", "not-an-ip"), "", true},
		{"xff absent", limiter.ForwardedForKey(1), req("10.0.0.1:80"), "10.0.0.1", false},
	}
	for _, tc := range cases {
		got, err := tc.kf(tc.r)
		if tc.err {
			assert.Error(t, err, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}
