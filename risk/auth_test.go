package risk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBearer(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 4096)
	cases := []struct {
		in   string
		want string
		err  error
	}{
		{"Bearer abc", "abc", nil},
		{"bearer abc", "abc", nil},
		{"BEARER abc", "abc", nil},
		{"Bearer   abc", "abc", nil},
		{"Bearer a-b.c_d~e+f/g==", "a-b.c_d~e+f/g==", nil},
		{"Bearer " + long, long, nil},
		{"", "", ErrNoToken},
		{"Bearer", "", ErrMalformedToken},
		{"Bearer ", "", ErrMalformedToken},
		{"Bearer  ", "", ErrMalformedToken},
		{"Basic dXNlcjpwYXNz", "", ErrMalformedToken},
		{"Bearerabc", "", ErrMalformedToken},
		{"Bearer\tabc", "", ErrMalformedToken},
		{"Bearer abc def", "", ErrMalformedToken},
		{"Bearer abc ", "", ErrMalformedToken},
		{"Bearer ==", "", ErrMalformedToken},
		{"Bearer a=b", "", ErrMalformedToken},
		{"Bearer a\x00", "", ErrMalformedToken},
		{"Bearer é", "", ErrMalformedToken},
		{"Bearer " + long + "a", "", ErrMalformedToken},
		{"Token abc", "", ErrMalformedToken},
	}
	for _, c := range cases {
		got, err := ParseBearer(c.in)
		if c.err != nil {
			assert.ErrorIs(t, err, c.err, "%q", c.in)
			assert.Empty(t, got)
			continue
		}
		require.NoError(t, err, "%q", c.in)
		assert.Equal(t, c.want, got)
	}
}

func TestParseBearerNoAllocs(t *testing.T) {
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = ParseBearer("Bearer abc.def") }))
}

type authResp struct {
	status  int
	body    string
	wwwAuth string
	user    string
}

func doAuth(t *testing.T, a func(http.Handler) http.Handler, setup func(r *http.Request)) authResp {
	t.Helper()
	var user string
	h := a(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := UserFrom(r.Context())
		require.True(t, ok)
		user = u
		w.WriteHeader(http.StatusNoContent)
	}))
	req := httptest.NewRequest(http.MethodPost, "/buy", nil)
	if setup != nil {
		setup(req)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	return authResp{rec.Code, strings.TrimSpace(string(body)), rec.Header().Get("WWW-Authenticate"), user}
}

func TestAuthMiddleware(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	a := AuthenticatorFunc(func(ctx context.Context, tok string) (string, error) {
		calls.Add(1)
		switch tok {
		case "good":
			return "u1", nil
		case "down":
			return "", errors.New("dial tcp: connection refused")
		case "empty":
			return "", nil
		default:
			return "", fmt.Errorf("my store: %w", ErrInvalidToken)
		}
	})
	var failures atomic.Int64
	auth, err := NewAuth(a, WithCookie("sid"), WithOnAuthFailure(func(context.Context, *http.Request, error) { failures.Add(1) }))
	require.NoError(t, err)

	cases := []struct {
		name   string
		setup  func(r *http.Request)
		status int
		body   string
		www    string
		user   string
	}{
		{"ok", func(r *http.Request) { r.Header.Set("Authorization", "Bearer good") }, 204, "", "", "u1"},
		{"cookie fallback", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "sid", Value: "good"}) }, 204, "", "", "u1"},
		{"missing", nil, 401, `{"error":"unauthorized","reason":"missing_token"}`, "Bearer", ""},
		{"malformed", func(r *http.Request) { r.Header.Set("Authorization", "Basic Zm9v") }, 401, `{"error":"unauthorized","reason":"malformed_token"}`, `Bearer error="invalid_request"`, ""},
		{"malformed cookie", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "sid", Value: "a=b"}) }, 401, `{"error":"unauthorized","reason":"malformed_token"}`, `Bearer error="invalid_request"`, ""},
		{"invalid", func(r *http.Request) { r.Header.Set("Authorization", "Bearer forged") }, 401, `{"error":"unauthorized","reason":"invalid_token"}`, `Bearer error="invalid_token"`, ""},
		{"empty user is invalid", func(r *http.Request) { r.Header.Set("Authorization", "Bearer empty") }, 401, `{"error":"unauthorized","reason":"invalid_token"}`, `Bearer error="invalid_token"`, ""},
		{"store down", func(r *http.Request) { r.Header.Set("Authorization", "Bearer down") }, 503, `{"error":"unavailable"}`, "", ""},
	}
	refusals := 0
	for _, c := range cases {
		got := doAuth(t, auth, c.setup)
		assert.Equal(t, c.status, got.status, c.name)
		if c.body != "" {
			assert.Equal(t, c.body, got.body, c.name)
		}
		assert.Equal(t, c.www, got.wwwAuth, c.name)
		assert.Equal(t, c.user, got.user, c.name)
		if c.status != 204 {
			refusals++
		}
	}
	assert.EqualValues(t, refusals, failures.Load(), "every refusal reported")
	assert.EqualValues(t, 5, calls.Load(), "authenticator not called for missing/malformed tokens")

	_, err = NewAuth(nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)
}
