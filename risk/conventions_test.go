package risk

import (
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
)

// refusalSentinels and otherSentinels classify every exported error of the
// package; TestEveryErrorClassified fails when a file of the package gains
// one that is in neither.
var (
	refusalSentinels = map[string]error{
		"ErrNoToken": ErrNoToken, "ErrMalformedToken": ErrMalformedToken, "ErrInvalidToken": ErrInvalidToken,
	}
	otherSentinels = map[string]error{
		"ErrUnavailable": ErrUnavailable, "ErrBadReply": ErrBadReply,
		"ErrInvalidArgument": ErrInvalidArgument, "ErrInvalidConfig": ErrInvalidConfig,
		"ErrRunning": ErrRunning, "ErrClosed": ErrClosed,
	}
)

func TestEveryErrorClassified(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var declared []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, s := range g.Specs {
					for _, n := range s.(*ast.ValueSpec).Names {
						if n.IsExported() && strings.HasPrefix(n.Name, "Err") {
							declared = append(declared, n.Name)
						}
					}
				}
			}
		}
	}
	classified := []string{"ErrRefused"}
	for n := range refusalSentinels {
		classified = append(classified, n)
	}
	for n := range otherSentinels {
		classified = append(classified, n)
	}
	sort.Strings(declared)
	sort.Strings(classified)
	assert.Equal(t, declared, classified)
}

func TestRefusalUmbrella(t *testing.T) {
	t.Parallel()
	for n, e := range refusalSentinels {
		assert.ErrorIs(t, e, ErrRefused, n)
		for m, other := range refusalSentinels {
			if m != n {
				assert.NotErrorIs(t, e, other, "%s is not %s", n, m)
			}
		}
	}
	for n, e := range otherSentinels {
		assert.NotErrorIs(t, e, ErrRefused, n)
	}
	for _, e := range []error{context.Canceled, context.DeadlineExceeded} {
		assert.NotErrorIs(t, e, ErrRefused)
	}
	assert.Equal(t, "risk: no bearer token", ErrNoToken.Error())

	// From real calls: a bearer that does not parse, a session that does
	// not exist, a user's own Authenticator wrapping ErrInvalidToken.
	_, err := ParseBearer("")
	assert.ErrorIs(t, err, ErrRefused)
	_, err = ParseBearer("Basic abc")
	assert.ErrorIs(t, err, ErrRefused)
	rdb, m := testenv.Miniredis(t)
	s, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: testenv.Prefix(t)})
	require.NoError(t, err)
	_, err = s.Authenticate(bg, "no-such-session")
	require.ErrorIs(t, err, ErrInvalidToken)
	assert.ErrorIs(t, err, ErrRefused)
	own := AuthenticatorFunc(func(context.Context, string) (string, error) {
		return "", errors.Join(errors.New("revoked"), ErrInvalidToken)
	})
	_, err = own.Authenticate(bg, "x")
	assert.ErrorIs(t, err, ErrRefused)

	// Not refusals: a store failure, a cancelled context, bad input.
	m.SetError("READONLY")
	_, err = s.Authenticate(bg, "no-such-session")
	require.ErrorContains(t, err, "READONLY")
	assert.NotErrorIs(t, err, ErrRefused)
	m.SetError("")
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	_, err = s.Authenticate(cancelled, "no-such-session")
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrRefused)
	_, err = s.Create(bg, "", time.Minute)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.NotErrorIs(t, err, ErrRefused)
}

// TestAuthAnswersByUmbrella checks the middleware's 401/503 split against
// the umbrella: every refusal is a 401, a failed authenticator a 503.
func TestAuthAnswersByUmbrella(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err    error
		status int
	}{
		{ErrInvalidToken, http.StatusUnauthorized},
		{errors.Join(errors.New("expired"), ErrInvalidToken), http.StatusUnauthorized},
		{errors.New("store down"), http.StatusServiceUnavailable},
	} {
		a, err := NewAuth(AuthenticatorFunc(func(context.Context, string) (string, error) { return "", tc.err }))
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer abc")
		a(http.NotFoundHandler()).ServeHTTP(rec, req)
		assert.Equal(t, tc.status, rec.Code, "%v", tc.err)
		assert.Equal(t, tc.status == http.StatusUnauthorized, errors.Is(tc.err, ErrRefused))
	}
}

// TestOptionsBelongToTheirConstructor checks, for every option, which
// constructors' option interfaces its value implements, so an option that
// does not apply to a constructor cannot be passed to it (the compiler
// refuses; the type assertion here fails the same way at run time), and
// builds each constructor with each of its options. Only three
// constructors take options at all.
func TestOptionsBelongToTheirConstructor(t *testing.T) {
	t.Parallel()
	const (
		checker = 1 << iota
		middleware
		auth
	)
	logger := slog.New(slog.DiscardHandler)
	noop := func(context.Context, Subject, Decision) {}
	authn := AuthenticatorFunc(func(context.Context, string) (string, error) { return "", nil })
	for name, c := range map[string]struct {
		opt  any
		want int
	}{
		"WithLogger":           {WithLogger(logger), checker | auth},
		"WithObserver":         {WithObserver(observe.Func(func(context.Context, observe.Event) {})), checker | auth},
		"WithFailurePolicy":    {WithFailurePolicy(FailOpen), checker},
		"WithDryRun":           {WithDryRun(true), checker},
		"WithOnDecision":       {WithOnDecision(noop), checker},
		"WithOnFailure":        {WithOnFailure(func(context.Context, string, error) {}), checker},
		"WithIPResolver":       {WithIPResolver(&IPResolver{}), middleware},
		"WithDeviceHeader":     {WithDeviceHeader("X-D"), middleware},
		"WithSubjectFunc":      {WithSubjectFunc(func(r *http.Request) (Subject, error) { return Subject{}, nil }), middleware},
		"WithChallengeHandler": {WithChallengeHandler(func(w http.ResponseWriter, r *http.Request, next http.Handler, d Decision) {}), middleware},
		"WithCookie":           {WithCookie("sid"), auth},
		"WithOnAuthFailure":    {WithOnAuthFailure(func(context.Context, *http.Request, error) {}), auth},
	} {
		got := 0
		if o, ok := c.opt.(CheckerOption); ok {
			got |= checker
			_, err := NewChecker(nil, o)
			assert.NoError(t, err, "NewChecker(%s)", name)
		}
		if o, ok := c.opt.(MiddlewareOption); ok {
			got |= middleware
			ch, err := NewChecker(nil)
			require.NoError(t, err)
			_, err = NewMiddleware(ch, o)
			assert.NoError(t, err, "NewMiddleware(%s)", name)
		}
		if o, ok := c.opt.(AuthOption); ok {
			got |= auth
			_, err := NewAuth(authn, o)
			assert.NoError(t, err, "NewAuth(%s)", name)
		}
		assert.Equal(t, c.want, got, "%s: constructors it applies to (bit set)", name)
	}
}

// TestOneOptionMechanism: every option type of the package is an interface
// with unexported methods only, so options are made by the With…
// functions alone (the package had func types KeyPrefixOption,
// ClockOption, LoggerOption and ObserverOption); at most three
// constructors take options, and WithLogger and WithObserver, which apply
// to the same two, share one type.
func TestOneOptionMechanism(t *testing.T) {
	t.Parallel()
	for _, typ := range []reflect.Type{
		reflect.TypeOf((*CheckerOption)(nil)).Elem(),
		reflect.TypeOf((*MiddlewareOption)(nil)).Elem(),
		reflect.TypeOf((*AuthOption)(nil)).Elem(),
		reflect.TypeOf((*Option)(nil)).Elem(),
	} {
		require.Equal(t, reflect.Interface, typ.Kind(), typ.Name())
		for i := 0; i < typ.NumMethod(); i++ {
			assert.False(t, typ.Method(i).IsExported(), "%s.%s", typ.Name(), typ.Method(i).Name)
		}
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var withOptions []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || !strings.HasPrefix(fn.Name.Name, "New") {
				continue
			}
			ps := fn.Type.Params.List
			if len(ps) > 0 {
				if _, variadic := ps[len(ps)-1].Type.(*ast.Ellipsis); variadic {
					withOptions = append(withOptions, fn.Name.Name)
				}
			}
		}
	}
	sort.Strings(withOptions)
	assert.Equal(t, []string{"NewAuth", "NewChecker", "NewMiddleware"}, withOptions)
}

// TestSettingsTakeEffect passes each setting shared by several settings
// structs and options to each constructor and checks the effect.
func TestSettingsTakeEffect(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	pre := testenv.Prefix(t) + "conv:"

	// KeyPrefix: every Redis-backed type writes under the prefix.
	ss, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: pre})
	require.NoError(t, err)
	tok, err := ss.Create(bg, "alice", time.Minute)
	require.NoError(t, err)
	assert.True(t, m.Exists(sessionKey(pre, hashToken(tok))), "session key")
	clk := newFakeClock()
	bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: pre, Clock: clk})
	require.NoError(t, err)
	ban, err := bl.Add(bg, KindUser, "alice", "x")
	require.NoError(t, err)
	assert.True(t, m.Exists(banKey(pre, KindUser, "alice")), "ban key")
	assert.Equal(t, clk.Now().Add(time.Minute).UnixMilli(), ban.Until.UnixMilli(), "Clock: the ban's until")
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	failing := &Blacklist{rdb: brokenClient(t), o: defaultOptions()}
	bh, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Second, FlagAt: 1, DenyAt: 1, KeyPrefix: pre, AutoBlacklist: failing, Logger: logger})
	require.NoError(t, err)
	for range 2 { // the second event crosses the deny threshold: the ban is tried
		_, err = bh.Check(bg, Subject{UserID: "bob"})
		require.NoError(t, err)
	}
	assert.True(t, m.Exists(behaviourKey(pre, "bob")), "behaviour key")
	assert.Contains(t, logs.String(), "auto-blacklist failed", "Logger: Behaviour")
	db, err := NewDeviceBinder(rdb, DeviceBinderConfig{KeyPrefix: pre})
	require.NoError(t, err)
	_, err = db.Bind(bg, "dev1", "alice")
	require.NoError(t, err)
	assert.True(t, m.Exists(deviceKey(pre, "dev1")), "device key")

	// Clock: AuthCache entries expire on the injected clock.
	calls := 0
	next := AuthenticatorFunc(func(context.Context, string) (string, error) { calls++; return "alice", nil })
	ac, err := NewAuthCache(next, AuthCacheConfig{TTL: time.Minute, Max: 10, Clock: clk})
	require.NoError(t, err)
	_, _ = ac.Authenticate(bg, "t")
	_, _ = ac.Authenticate(bg, "t")
	assert.Equal(t, 1, calls)
	clk.Advance(2 * time.Minute)
	_, _ = ac.Authenticate(bg, "t")
	assert.Equal(t, 2, calls, "expired on the injected clock")

	// KeyPrefix and Logger: the AuthCache listens on the prefixed
	// revocation channel and logs a malformed message.
	acl, err := NewAuthCache(ss, AuthCacheConfig{TTL: time.Minute, Max: 10, Revocations: ss, Logger: logger})
	require.NoError(t, err)
	runCache(t, acl)
	require.NoError(t, rdb.Publish(bg, pre+"risk:session:revoked", "junk").Err())
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "malformed revocation message") },
		waitFor, time.Millisecond, "Logger: AuthCache")

	// WithLogger and WithObserver: Checker, Middleware and Auth.
	var events []string
	obs := WithObserver(observe.Func(func(_ context.Context, e observe.Event) { events = append(events, e.Stage) }))
	down := NewRule("down", func(context.Context, Subject) (Decision, error) { return Decision{}, errors.New("down") })
	ch, err := NewChecker([]Rule{down}, WithLogger(logger), obs)
	require.NoError(t, err)
	_, err = ch.Check(bg, Subject{UserID: "u"})
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, logs.String(), "rule failed", "WithLogger: Checker")
	before := strings.Count(logs.String(), "rule failed")
	mw, err := NewMiddleware(ch)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	mw(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, before+1, strings.Count(logs.String(), "rule failed"), "the Checker logs the failure behind the middleware's 503")
	a, err := NewAuth(AuthenticatorFunc(func(context.Context, string) (string, error) { return "", errors.New("down") }),
		WithLogger(logger), obs)
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", "Bearer abc")
	a(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), req)
	assert.Contains(t, logs.String(), "authenticator failed", "WithLogger: Auth")
	assert.Equal(t, []string{StageCheck, StageCheck, StageAuth}, events, "WithObserver: Checker (direct and via Middleware) and Auth")
}

// TestNilOptionsAndCollaborators: a nil option is ignored by every
// option-taking constructor; a nil collaborator, a nil logger included,
// and a setting out of range fail a constructor with ErrInvalidConfig,
// never with ErrInvalidArgument (which is for the arguments of calls).
func TestNilOptionsAndCollaborators(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	authn := AuthenticatorFunc(func(context.Context, string) (string, error) { return "", nil })
	var nilOpt Option
	ok := func(_ any, err error) { t.Helper(); assert.NoError(t, err) }
	ch, err := NewChecker(nil, nil, nilOpt)
	require.NoError(t, err)
	ok(NewMiddleware(ch, nil))
	ok(NewAuth(authn, nil, nilOpt))
	ok(NewChecker(nil, WithObserver(nil)))
	ok(NewSessionStore(rdb, SessionConfig{}))
	ok(NewBlacklist(rdb, BlacklistConfig{}))
	ok(NewDeviceBinder(rdb, DeviceBinderConfig{}))
	ok(NewAuthCache(authn, AuthCacheConfig{TTL: time.Second, Max: 1}))
	ok(NewIPResolver(IPResolverConfig{}))

	invalid := func(_ any, err error) {
		t.Helper()
		assert.ErrorIs(t, err, ErrInvalidConfig)
		assert.NotErrorIs(t, err, ErrInvalidArgument)
		assert.NotErrorIs(t, err, ErrRefused)
	}
	invalid(NewChecker(nil, WithLogger(nil)))
	invalid(NewAuth(authn, WithLogger(nil)))
	invalid(NewSessionStore(nil, SessionConfig{}))
	invalid(NewSessionStore(rdb, SessionConfig{TTL: -time.Second}))
	invalid(NewBlacklist(nil, BlacklistConfig{}))
	invalid(NewBehaviour(nil, BehaviourConfig{Window: time.Second, FlagAt: 1, DenyAt: 2}))
	invalid(NewBehaviour(rdb, BehaviourConfig{}))
	invalid(NewDeviceBinder(nil, DeviceBinderConfig{}))
	invalid(NewDeviceBinder(rdb, DeviceBinderConfig{BindTTL: -time.Hour}))
	invalid(NewChecker([]Rule{nil}))
	invalid(NewChecker(nil, WithFailurePolicy(FailurePolicy(9))))
	invalid(NewMiddleware(nil))
	invalid(NewMiddleware(ch, WithIPResolver(nil)))
	invalid(NewAuth(nil))
	invalid(NewAuthCache(nil, AuthCacheConfig{TTL: time.Second, Max: 1}))
	invalid(NewAuthCache(authn, AuthCacheConfig{Max: 1}))
	invalid(NewAuthCache(authn, AuthCacheConfig{TTL: time.Second}))
	invalid(NewAuthCache(authn, AuthCacheConfig{TTL: time.Second, Max: 1, ProbeInterval: -time.Second}))
	invalid(NewIPResolver(IPResolverConfig{TrustedProxies: []string{"not an address"}}))
	plain, err := NewAuthCache(authn, AuthCacheConfig{TTL: time.Second, Max: 1})
	require.NoError(t, err)
	assert.ErrorIs(t, plain.Run(bg), ErrInvalidConfig, "Run without Revocations")
	assert.Equal(t, "risk: invalid configuration", ErrInvalidConfig.Error())
}

// TestCallbacksTakeTheCallersContext: every hook of the package gets the
// ctx of the call that triggered it first.
func TestCallbacksTakeTheCallersContext(t *testing.T) {
	t.Parallel()
	type key struct{}
	ctx := context.WithValue(bg, key{}, "caller")
	var seen []string
	note := func(hook string, c context.Context) {
		if c.Value(key{}) == "caller" {
			seen = append(seen, hook)
		}
	}
	down := NewRule("down", func(context.Context, Subject) (Decision, error) { return Decision{}, errors.New("down") })
	ch, err := NewChecker([]Rule{down}, WithFailurePolicy(FailOpen),
		WithOnDecision(func(c context.Context, _ Subject, _ Decision) { note("OnDecision", c) }),
		WithOnFailure(func(c context.Context, _ string, _ error) { note("OnFailure", c) }))
	require.NoError(t, err)
	_, err = ch.Check(ctx, Subject{UserID: "u"})
	require.NoError(t, err)
	a, err := NewAuth(AuthenticatorFunc(func(context.Context, string) (string, error) { return "", ErrInvalidToken }),
		WithOnAuthFailure(func(c context.Context, r *http.Request, err error) {
			assert.ErrorIs(t, err, ErrRefused)
			note("OnAuthFailure", c)
		}))
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
	req.Header.Set("Authorization", "Bearer abc")
	a(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), req)
	assert.Equal(t, []string{"OnFailure", "OnDecision", "OnAuthFailure"}, seen)
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// brokenClient is a Client whose every command fails.
func brokenClient(t *testing.T) Client {
	rdb, m := testenv.Miniredis(t)
	m.SetError("READONLY")
	return rdb
}
