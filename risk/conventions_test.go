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
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/observe"
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
		"ErrInvalidArgument": ErrInvalidArgument, "ErrInvalidID": ErrInvalidID,
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
	s, err := NewSessionStore(rdb, WithKeyPrefix(testenv.Prefix(t)))
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
		a.Handle(http.NotFoundHandler()).ServeHTTP(rec, req)
		assert.Equal(t, tc.status, rec.Code, "%v", tc.err)
		assert.Equal(t, tc.status == http.StatusUnauthorized, errors.Is(tc.err, ErrRefused))
	}
}

// TestOptionsBelongToTheirConstructor checks, for every option, which
// constructors' option interfaces its value implements, so an option that
// does not apply to a constructor cannot be passed to it (the compiler
// refuses; the type assertion here fails the same way at run time), and
// builds each constructor with each of its options.
func TestOptionsBelongToTheirConstructor(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	bl, err := NewBlacklist(rdb)
	require.NoError(t, err)
	ss, err := NewSessionStore(rdb)
	require.NoError(t, err)
	const (
		session = 1 << iota
		blacklist
		behaviour
		device
		checker
		middleware
		auth
		authCache
		ipResolver
	)
	logger := slog.New(slog.DiscardHandler)
	noop := func(context.Context, Subject, Decision) {}
	for name, c := range map[string]struct {
		opt  any
		want int
	}{
		"WithKeyPrefix":        {WithKeyPrefix("p:"), session | blacklist | behaviour | device},
		"WithClock":            {WithClock(newFakeClock()), blacklist | authCache},
		"WithLogger":           {WithLogger(logger), behaviour | checker | middleware | auth | authCache},
		"WithObserver":         {WithObserver(observe.Func(func(context.Context, observe.Event) {})), checker | auth},
		"WithSessionTTL":       {WithSessionTTL(time.Hour), session},
		"WithSlidingTTL":       {WithSlidingTTL(true), session},
		"WithEscalation":       {WithEscalation(time.Second, time.Hour, 2), blacklist},
		"WithOffenceMemory":    {WithOffenceMemory(time.Hour), blacklist},
		"WithAutoBlacklist":    {WithAutoBlacklist(bl), behaviour},
		"WithFlagAction":       {WithFlagAction(Allow), behaviour},
		"WithBindTTL":          {WithBindTTL(time.Hour), device},
		"WithDeviceConflict":   {WithDeviceConflict(Challenge), device},
		"WithRefreshBinding":   {WithRefreshBinding(false), device},
		"WithFailurePolicy":    {WithFailurePolicy(FailOpen), checker},
		"WithDryRun":           {WithDryRun(true), checker},
		"WithOnDecision":       {WithOnDecision(noop), checker},
		"WithOnFailure":        {WithOnFailure(func(context.Context, string, error) {}), checker},
		"WithIPResolver":       {WithIPResolver(&IPResolver{}), middleware},
		"WithDeviceHeader":     {WithDeviceHeader("X-D"), middleware},
		"WithSubjectFunc":      {WithSubjectFunc(func(r *http.Request) (Subject, error) { return Subject{}, nil }), middleware},
		"WithChallengeHandler": {WithChallengeHandler(func(w http.ResponseWriter, r *http.Request, next http.Handler, d Decision) {}), middleware},
		"WithCookie":           {WithCookie("sid"), auth},
		"WithOnAuthFailure":    {WithOnAuthFailure(func(*http.Request, error) {}), auth},
		"WithRealIP":           {WithRealIP(true), ipResolver},
		"WithRevocations":      {WithRevocations(ss), authCache},
		"WithRevocationProbe":  {WithRevocationProbe(time.Second), authCache},
	} {
		got := 0
		if o, ok := c.opt.(SessionOption); ok {
			got |= session
			_, err := NewSessionStore(rdb, o)
			assert.NoError(t, err, "NewSessionStore(%s)", name)
		}
		if o, ok := c.opt.(BlacklistOption); ok {
			got |= blacklist
			_, err := NewBlacklist(rdb, o)
			assert.NoError(t, err, "NewBlacklist(%s)", name)
		}
		if o, ok := c.opt.(BehaviourOption); ok {
			got |= behaviour
			_, err := NewBehaviour(rdb, time.Second, 1, 2, o)
			assert.NoError(t, err, "NewBehaviour(%s)", name)
		}
		if o, ok := c.opt.(DeviceBinderOption); ok {
			got |= device
			_, err := NewDeviceBinder(rdb, o)
			assert.NoError(t, err, "NewDeviceBinder(%s)", name)
		}
		var ch *Checker
		if o, ok := c.opt.(CheckerOption); ok {
			got |= checker
			ch, err = NewChecker(nil, o)
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
			_, err := NewAuth(AuthenticatorFunc(func(context.Context, string) (string, error) { return "", nil }), o)
			assert.NoError(t, err, "NewAuth(%s)", name)
		}
		if o, ok := c.opt.(AuthCacheOption); ok {
			got |= authCache
			_, err := NewAuthCache(AuthenticatorFunc(func(context.Context, string) (string, error) { return "", nil }), time.Second, 1, o)
			assert.NoError(t, err, "NewAuthCache(%s)", name)
		}
		if o, ok := c.opt.(IPResolverOption); ok {
			got |= ipResolver
			_, err := NewIPResolver(nil, o)
			assert.NoError(t, err, "NewIPResolver(%s)", name)
		}
		_ = ch
		assert.Equal(t, c.want, got, "%s: constructors it applies to (bit set)", name)
	}
}

// TestSharedOptionsTakeEffect passes each option shared by several
// constructors to each of them and checks the effect.
func TestSharedOptionsTakeEffect(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	pre := testenv.Prefix(t) + "conv:"
	kp := WithKeyPrefix(pre)

	// WithKeyPrefix: every Redis-backed type writes under the prefix.
	ss, err := NewSessionStore(rdb, kp)
	require.NoError(t, err)
	tok, err := ss.Create(bg, "alice", time.Minute)
	require.NoError(t, err)
	assert.True(t, m.Exists(sessionKey(pre, hashToken(tok))), "session key")
	clk := newFakeClock()
	bl, err := NewBlacklist(rdb, kp, WithClock(clk))
	require.NoError(t, err)
	ban, err := bl.Add(bg, KindUser, "alice", "x")
	require.NoError(t, err)
	assert.True(t, m.Exists(banKey(pre, KindUser, "alice")), "ban key")
	assert.Equal(t, clk.Now().Add(time.Minute).UnixMilli(), ban.Until.UnixMilli(), "WithClock: the ban's until")
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	failing := &Blacklist{rdb: brokenClient(t), o: defaultOptions()}
	bh, err := NewBehaviour(rdb, time.Second, 1, 1, kp, WithAutoBlacklist(failing), WithLogger(logger))
	require.NoError(t, err)
	for range 2 { // the second event crosses the deny threshold: the ban is tried
		_, err = bh.Check(bg, Subject{UserID: "bob"})
		require.NoError(t, err)
	}
	assert.True(t, m.Exists(behaviourKey(pre, "bob")), "behaviour key")
	assert.Contains(t, logs.String(), "auto-blacklist failed", "WithLogger: Behaviour")
	db, err := NewDeviceBinder(rdb, kp)
	require.NoError(t, err)
	_, err = db.Bind(bg, "dev1", "alice")
	require.NoError(t, err)
	assert.True(t, m.Exists(deviceKey(pre, "dev1")), "device key")

	// WithClock: AuthCache entries expire on the injected clock.
	calls := 0
	next := AuthenticatorFunc(func(context.Context, string) (string, error) { calls++; return "alice", nil })
	ac, err := NewAuthCache(next, time.Minute, 10, WithClock(clk))
	require.NoError(t, err)
	_, _ = ac.Authenticate(bg, "t")
	_, _ = ac.Authenticate(bg, "t")
	assert.Equal(t, 1, calls)
	clk.Advance(2 * time.Minute)
	_, _ = ac.Authenticate(bg, "t")
	assert.Equal(t, 2, calls, "expired on the injected clock")

	// WithKeyPrefix and WithLogger: the AuthCache listens on the prefixed
	// revocation channel and logs a malformed message.
	acl, err := NewAuthCache(ss, time.Minute, 10, WithRevocations(ss), WithLogger(logger))
	require.NoError(t, err)
	runCache(t, acl)
	require.NoError(t, rdb.Publish(bg, pre+"risk:session:revoked", "junk").Err())
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "malformed revocation message") },
		waitFor, time.Millisecond, "WithLogger: AuthCache")

	// WithLogger and WithObserver: Checker, Middleware and Auth.
	var events []string
	obs := WithObserver(observe.Func(func(_ context.Context, e observe.Event) { events = append(events, e.Stage) }))
	down := NewRule("down", func(context.Context, Subject) (Decision, error) { return Decision{}, errors.New("down") })
	ch, err := NewChecker([]Rule{down}, WithLogger(logger), obs)
	require.NoError(t, err)
	_, err = ch.Check(bg, Subject{UserID: "u"})
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, logs.String(), "rule failed", "WithLogger: Checker")
	mw, err := NewMiddleware(ch, WithLogger(logger))
	require.NoError(t, err)
	mw.Handle(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Contains(t, logs.String(), "check failed", "WithLogger: Middleware")
	a, err := NewAuth(AuthenticatorFunc(func(context.Context, string) (string, error) { return "", errors.New("down") }),
		WithLogger(logger), obs)
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", "Bearer abc")
	a.Handle(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), req)
	assert.Contains(t, logs.String(), "authenticator failed", "WithLogger: Auth")
	assert.Equal(t, []string{StageCheck, StageCheck, StageAuth}, events, "WithObserver: Checker (direct and via Middleware) and Auth")
}

// TestNilOptionsAndCollaborators: a nil option is ignored by every
// constructor; a nil collaborator fails it with ErrInvalidArgument.
func TestNilOptionsAndCollaborators(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	authn := AuthenticatorFunc(func(context.Context, string) (string, error) { return "", nil })
	var (
		nilKP  KeyPrefixOption
		nilClk ClockOption
		nilLog LoggerOption
		nilObs ObserverOption
	)
	ok := func(_ any, err error) { t.Helper(); assert.NoError(t, err) }
	ok(NewSessionStore(rdb, nil, nilKP))
	ok(NewBlacklist(rdb, nil, nilKP, nilClk))
	ok(NewBehaviour(rdb, time.Second, 1, 2, nil, nilKP, nilLog))
	ok(NewDeviceBinder(rdb, nil, nilKP))
	ch, err := NewChecker(nil, nil, nilLog, nilObs)
	require.NoError(t, err)
	ok(NewMiddleware(ch, nil, nilLog))
	ok(NewAuth(authn, nil, nilLog, nilObs))
	ok(NewAuthCache(authn, time.Second, 1, nil, nilClk))
	ok(NewIPResolver(nil, nil))
	ok(NewChecker(nil, WithLogger(nil), WithObserver(nil)))

	invalid := func(_ any, err error) { t.Helper(); assert.ErrorIs(t, err, ErrInvalidArgument) }
	invalid(NewSessionStore(nil))
	invalid(NewBlacklist(nil))
	invalid(NewBlacklist(rdb, WithClock(nil)))
	invalid(NewBehaviour(nil, time.Second, 1, 2))
	invalid(NewBehaviour(rdb, time.Second, 1, 2, WithAutoBlacklist(nil)))
	invalid(NewDeviceBinder(nil))
	invalid(NewChecker([]Rule{nil}))
	invalid(NewMiddleware(nil))
	invalid(NewAuth(nil))
	invalid(NewAuthCache(nil, time.Second, 1))
	invalid(NewAuthCache(authn, time.Second, 1, WithClock(nil)))
	invalid(NewAuthCache(authn, time.Second, 1, WithRevocations(nil)))
	invalid(NewAuthCache(authn, time.Second, 1, WithRevocationProbe(0)))
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
