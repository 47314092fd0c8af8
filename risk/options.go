package risk

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/observe"
)

// Clock tells the time. Inject a fake one in tests through
// [BlacklistConfig.Clock] or [AuthCacheConfig.Clock].
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Three constructors take functional options, each its own option type, so
// an option that does not apply to a constructor does not compile there:
//
//	constructor    option type       options
//	NewChecker     CheckerOption     WithFailurePolicy, WithDryRun, WithOnDecision,
//	                                 WithOnFailure, WithLogger, WithObserver
//	NewMiddleware  MiddlewareOption  WithIPResolver, WithDeviceHeader, WithSubjectFunc,
//	                                 WithChallengeHandler
//	NewAuth        AuthOption        WithCookie, WithOnAuthFailure, WithLogger,
//	                                 WithObserver
//
// [WithLogger] and [WithObserver] apply to the Checker and Auth and return
// an [Option], which is both. A nil option is ignored. The other
// constructors have plain settings only and take a settings struct whose
// zero value is the default: [SessionConfig], [BlacklistConfig],
// [BehaviourConfig], [DeviceBinderConfig], [AuthCacheConfig],
// [IPResolverConfig].
type (
	// CheckerOption configures [NewChecker].
	CheckerOption interface{ applyChecker(*options) }
	// MiddlewareOption configures [NewMiddleware].
	MiddlewareOption interface{ applyMiddleware(*options) }
	// AuthOption configures [NewAuth].
	AuthOption interface{ applyAuth(*options) }
	// Option is returned by [WithLogger] and [WithObserver]: a
	// [CheckerOption] and an [AuthOption].
	Option interface {
		CheckerOption
		AuthOption
	}
)

// The implementations of the option types.
type (
	checkerOpt    func(*options)
	middlewareOpt func(*options)
	authOpt       func(*options)
	sharedOpt     func(*options)
)

func (f checkerOpt) applyChecker(o *options)       { f(o) }
func (f middlewareOpt) applyMiddleware(o *options) { f(o) }
func (f authOpt) applyAuth(o *options)             { f(o) }
func (f sharedOpt) applyChecker(o *options)        { f(o) }
func (f sharedOpt) applyAuth(o *options)           { f(o) }

type options struct {
	prefix string
	clock  Clock
	logger *slog.Logger

	// SessionStore
	sessionTTL time.Duration
	sliding    bool

	// Blacklist
	banBase, banMax time.Duration
	banFactor       int
	offenceMemory   time.Duration
	net4, net6      []int // network prefix lengths looked up, longest first

	// Behaviour
	autoBlacklist *Blacklist // Behaviour and DeviceBinder
	autoKinds     []Kind     // Behaviour: what of the subject it bans
	flagAction    Action

	// DeviceBinder
	bindTTL        time.Duration
	deviceConflict Action
	deviceMissing  Action // a subject with a user and no device
	refreshBinding bool

	// Checker
	failure    FailurePolicy
	dryRun     bool
	onDecision func(ctx context.Context, s Subject, d Decision)
	onFailure  func(ctx context.Context, rule string, err error)
	observer   observe.Observer // Checker and Auth

	// Middleware
	ipResolver   *IPResolver
	deviceHeader string
	subjectFunc  func(r *http.Request) (Subject, error)
	challenge    func(w http.ResponseWriter, r *http.Request, next http.Handler, d Decision)

	// Auth
	cookie        string
	onAuthFailure func(ctx context.Context, r *http.Request, err error)

	// IPResolver
	realIP bool

	// AuthCache
	revSub     subscriber
	revPub     redis.Scripter
	revChannel string
	revProbe   time.Duration

	err error
}

func defaultOptions() options {
	return options{
		prefix:         "seckill:",
		clock:          systemClock{},
		logger:         slog.Default(),
		sessionTTL:     24 * time.Hour,
		banBase:        time.Minute,
		banMax:         24 * time.Hour,
		banFactor:      2,
		offenceMemory:  7 * 24 * time.Hour,
		flagAction:     Challenge,
		bindTTL:        30 * 24 * time.Hour,
		deviceConflict: Deny,
		deviceMissing:  Challenge,
		refreshBinding: true,
		failure:        FailClosed,
		deviceHeader:   "X-Device-ID",
		revProbe:       5 * time.Second,
	}
}

// buildOptions applies the non-nil opts of one of the three option-taking
// constructors to the defaults.
func buildOptions[T any](opts []T, apply func(T, *options)) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if any(opt) != nil {
			apply(opt, &o)
		}
	}
	return o, o.err
}

func (o *options) fail(msg string) {
	if o.err == nil {
		o.err = &configError{msg: msg}
	}
}

// configError is a bad configuration: it wraps [ErrInvalidConfig].
type configError struct{ msg string }

func (e *configError) Error() string { return "risk: " + e.msg }
func (e *configError) Unwrap() error { return ErrInvalidConfig }

// orDefault returns v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// setPrefix, setClock and setLogger apply the settings every settings
// struct shares; zero values keep the defaults.
func (o *options) setCommon(prefix string, clock Clock, logger *slog.Logger) {
	if prefix != "" {
		o.prefix = prefix
	}
	if clock != nil {
		o.clock = clock
	}
	if logger != nil {
		o.logger = logger
	}
}

// WithLogger sets a logger for dependency failures. Default:
// [slog.Default]. An
// option of [NewChecker] (a failed rule, also the one behind a
// [NewMiddleware] 503) and [NewAuth] (a failed authenticator). A nil
// logger fails the constructor with [ErrInvalidConfig]; to silence a
// part, leave the option out or pass slog.New(slog.DiscardHandler).
func WithLogger(l *slog.Logger) Option {
	return sharedOpt(func(o *options) {
		if l == nil {
			o.fail("nil logger")
			return
		}
		o.logger = l
	})
}

// WithFailurePolicy sets what the [Checker] does when a rule fails (Redis
// down, timeout). Default [FailClosed].
func WithFailurePolicy(p FailurePolicy) CheckerOption {
	return checkerOpt(func(o *options) {
		if p < FailClosed || p > FailChallenge {
			o.fail("unknown failure policy")
			return
		}
		o.failure = p
	})
}

// WithDryRun makes the [Checker] evaluate every rule, report the decision
// to the [WithOnDecision] hook, and then allow: the returned Decision has
// Action Allow, DryRun true and the would-be action in DryRunAction. Rules
// still record (behaviour counts, device bindings, automatic bans). A rule
// failure under [FailClosed] becomes a would-be Deny ([ReasonUnavailable])
// instead of an error. Default off.
func WithDryRun(on bool) CheckerOption {
	return checkerOpt(func(o *options) { o.dryRun = on })
}

// WithOnDecision sets a hook called with the caller's ctx and every
// [Checker] decision (also in dry-run mode, with the real decision). It
// runs on the request goroutine, outside any lock; keep it fast. Default
// none.
func WithOnDecision(fn func(ctx context.Context, s Subject, d Decision)) CheckerOption {
	return checkerOpt(func(o *options) { o.onDecision = fn })
}

// WithOnFailure sets a hook called with the caller's ctx when a [Checker]
// rule fails, whatever the failure policy. Default none (failures are
// still logged).
func WithOnFailure(fn func(ctx context.Context, rule string, err error)) CheckerOption {
	return checkerOpt(func(o *options) { o.onFailure = fn })
}

// WithObserver reports every [Checker.Check] ("risk.check") and every
// request through the [NewAuth] middleware ("risk.auth") to o,
// synchronously, with the caller's ctx; see [StageCheck] for the outcomes.
// An option of [NewChecker] and [NewAuth]. A nil o is ignored. Without an
// observer nothing is measured. Default none.
func WithObserver(o observe.Observer) Option {
	return sharedOpt(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}

// WithIPResolver sets how the [NewMiddleware] middleware finds the client
// IP. Default: the TCP peer address only (no proxy trusted, forwarding
// headers ignored). A nil resolver fails [NewMiddleware] with
// [ErrInvalidConfig].
func WithIPResolver(r *IPResolver) MiddlewareOption {
	return middlewareOpt(func(o *options) {
		if r == nil {
			o.fail("nil IP resolver")
			return
		}
		o.ipResolver = r
	})
}

// WithDeviceHeader sets the request header the [NewMiddleware] middleware
// reads the device ID from. Default "X-Device-ID". An empty name disables
// device IDs.
func WithDeviceHeader(name string) MiddlewareOption {
	return middlewareOpt(func(o *options) { o.deviceHeader = name })
}

// WithSubjectFunc replaces how the [NewMiddleware] middleware builds the
// [Subject] of a request; an error answers 400. Default: user from
// [UserFrom], IP from the resolver ([WithIPResolver]), device from the
// device header ([WithDeviceHeader]), attestation token from the X-Attestation
// header ([Subject.AttestToken]).
func WithSubjectFunc(fn func(r *http.Request) (Subject, error)) MiddlewareOption {
	return middlewareOpt(func(o *options) { o.subjectFunc = fn })
}

// WithChallengeHandler sets what the [NewMiddleware] middleware does with
// a [Challenge] decision d. Default: answer 403
// {"error":"challenge","reason":<code>} so the client shows a captcha. The
// handler either writes a response or calls next (for example when the
// request already carries a captcha answer that a later handler
// verifies); the decision is also in r's context ([DecisionFrom]).
func WithChallengeHandler(h func(w http.ResponseWriter, r *http.Request, next http.Handler, d Decision)) MiddlewareOption {
	return middlewareOpt(func(o *options) { o.challenge = h })
}

// WithCookie makes the [NewAuth] middleware fall back to the named cookie
// when the request has no Authorization header. Default: header only.
// Browsers send cookies on cross-site requests: pair this with
// SameSite=Strict (or Lax) cookies or a CSRF token on state-changing
// routes.
func WithCookie(name string) AuthOption {
	return authOpt(func(o *options) { o.cookie = name })
}

// WithOnAuthFailure sets a hook called with the request's ctx when the
// [NewAuth] middleware refuses a request (401, err wraps [ErrRefused]) or
// cannot check it (503). Default none.
func WithOnAuthFailure(fn func(ctx context.Context, r *http.Request, err error)) AuthOption {
	return authOpt(func(o *options) { o.onAuthFailure = fn })
}
