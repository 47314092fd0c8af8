package risk

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/observe"
)

// Clock tells the time. Inject a fake one in tests with [WithClock].
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Each constructor takes its own option type, so an option that does not
// apply to it does not compile:
//
//	constructor      option type         options
//	NewSessionStore  SessionOption       WithKeyPrefix, WithSessionTTL, WithSlidingTTL
//	NewBlacklist     BlacklistOption     WithKeyPrefix, WithClock, WithEscalation,
//	                                     WithOffenceMemory
//	NewBehaviour     BehaviourOption     WithKeyPrefix, WithLogger, WithAutoBlacklist,
//	                                     WithFlagAction
//	NewDeviceBinder  DeviceBinderOption  WithKeyPrefix, WithBindTTL, WithDeviceConflict,
//	                                     WithRefreshBinding
//	NewChecker       CheckerOption       WithLogger, WithObserver, WithFailurePolicy,
//	                                     WithDryRun, WithOnDecision, WithOnFailure
//	NewMiddleware    MiddlewareOption    WithLogger, WithIPResolver, WithDeviceHeader,
//	                                     WithSubjectFunc, WithChallengeHandler
//	NewAuth          AuthOption          WithLogger, WithObserver, WithCookie,
//	                                     WithOnAuthFailure
//	NewAuthCache     AuthCacheOption     WithClock, WithLogger, WithRevocations,
//	                                     WithRevocationProbe
//	NewIPResolver    IPResolverOption    WithRealIP
//
// The options of several constructors return a type that implements each
// of their interfaces: [KeyPrefixOption], [ClockOption], [LoggerOption],
// [ObserverOption]. A nil option is ignored.
type (
	// SessionOption configures [NewSessionStore].
	SessionOption interface{ applySession(*options) }
	// BlacklistOption configures [NewBlacklist].
	BlacklistOption interface{ applyBlacklist(*options) }
	// BehaviourOption configures [NewBehaviour].
	BehaviourOption interface{ applyBehaviour(*options) }
	// DeviceBinderOption configures [NewDeviceBinder].
	DeviceBinderOption interface{ applyDeviceBinder(*options) }
	// CheckerOption configures [NewChecker].
	CheckerOption interface{ applyChecker(*options) }
	// MiddlewareOption configures [NewMiddleware].
	MiddlewareOption interface{ applyMiddleware(*options) }
	// AuthOption configures [NewAuth].
	AuthOption interface{ applyAuth(*options) }
	// AuthCacheOption configures [NewAuthCache].
	AuthCacheOption interface{ applyAuthCache(*options) }
	// IPResolverOption configures [NewIPResolver].
	IPResolverOption interface{ applyIPResolver(*options) }
)

// The option types of one constructor only.
type (
	sessionOpt      func(*options)
	blacklistOpt    func(*options)
	behaviourOpt    func(*options)
	deviceBinderOpt func(*options)
	checkerOpt      func(*options)
	middlewareOpt   func(*options)
	authOpt         func(*options)
	authCacheOpt    func(*options)
	ipResolverOpt   func(*options)
)

func (f sessionOpt) applySession(o *options)           { f(o) }
func (f blacklistOpt) applyBlacklist(o *options)       { f(o) }
func (f behaviourOpt) applyBehaviour(o *options)       { f(o) }
func (f deviceBinderOpt) applyDeviceBinder(o *options) { f(o) }
func (f checkerOpt) applyChecker(o *options)           { f(o) }
func (f middlewareOpt) applyMiddleware(o *options)     { f(o) }
func (f authOpt) applyAuth(o *options)                 { f(o) }
func (f authCacheOpt) applyAuthCache(o *options)       { f(o) }
func (f ipResolverOpt) applyIPResolver(o *options)     { f(o) }

// KeyPrefixOption is returned by [WithKeyPrefix]: a [SessionOption],
// [BlacklistOption], [BehaviourOption] and [DeviceBinderOption].
type KeyPrefixOption func(*options)

func (f KeyPrefixOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f KeyPrefixOption) applySession(o *options)      { f.apply(o) }
func (f KeyPrefixOption) applyBlacklist(o *options)    { f.apply(o) }
func (f KeyPrefixOption) applyBehaviour(o *options)    { f.apply(o) }
func (f KeyPrefixOption) applyDeviceBinder(o *options) { f.apply(o) }

// ClockOption is returned by [WithClock]: a [BlacklistOption] and an
// [AuthCacheOption].
type ClockOption func(*options)

func (f ClockOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f ClockOption) applyBlacklist(o *options) { f.apply(o) }
func (f ClockOption) applyAuthCache(o *options) { f.apply(o) }

// LoggerOption is returned by [WithLogger]: a [BehaviourOption],
// [CheckerOption], [MiddlewareOption], [AuthOption] and [AuthCacheOption]
// (the types that log).
type LoggerOption func(*options)

func (f LoggerOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f LoggerOption) applyBehaviour(o *options)  { f.apply(o) }
func (f LoggerOption) applyChecker(o *options)    { f.apply(o) }
func (f LoggerOption) applyMiddleware(o *options) { f.apply(o) }
func (f LoggerOption) applyAuth(o *options)       { f.apply(o) }
func (f LoggerOption) applyAuthCache(o *options)  { f.apply(o) }

// ObserverOption is returned by [WithObserver]: a [CheckerOption] and an
// [AuthOption].
type ObserverOption func(*options)

func (f ObserverOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f ObserverOption) applyChecker(o *options) { f.apply(o) }
func (f ObserverOption) applyAuth(o *options)    { f.apply(o) }

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

	// Behaviour
	autoBlacklist *Blacklist
	flagAction    Action

	// DeviceBinder
	bindTTL        time.Duration
	deviceConflict Action
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
	subjectFunc  SubjectFunc
	challenge    ChallengeHandler

	// Auth
	cookie        string
	onAuthFailure func(r *http.Request, err error)

	// IPResolver
	realIP bool

	// AuthCache
	revSub     Subscriber
	revPub     redis.Scripter
	revChannel string
	revProbe   time.Duration

	err error
}

func defaultOptions() options {
	return options{
		prefix:         "seckill:",
		clock:          systemClock{},
		logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		sessionTTL:     24 * time.Hour,
		banBase:        time.Minute,
		banMax:         24 * time.Hour,
		banFactor:      2,
		offenceMemory:  7 * 24 * time.Hour,
		flagAction:     Challenge,
		bindTTL:        30 * 24 * time.Hour,
		deviceConflict: Deny,
		refreshBinding: true,
		failure:        FailClosed,
		deviceHeader:   "X-Device-ID",
		revProbe:       5 * time.Second,
	}
}

// buildOptions applies the non-nil opts of one constructor to the defaults.
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
		o.err = &argError{msg: msg}
	}
}

type argError struct{ msg string }

func (e *argError) Error() string { return "risk: " + e.msg }
func (e *argError) Unwrap() error { return ErrInvalidArgument }

// WithKeyPrefix sets the prefix of every Redis key (and of the session
// revocation channel, "<prefix>risk:session:revoked"). Default "seckill:".
// An option of [NewSessionStore], [NewBlacklist], [NewBehaviour] and
// [NewDeviceBinder].
func WithKeyPrefix(prefix string) KeyPrefixOption {
	return KeyPrefixOption(func(o *options) { o.prefix = prefix })
}

// WithClock injects the clock. Default: the system clock. An option of
// [NewBlacklist] (the "until" it reports) and [NewAuthCache] (entry
// expiry); a nil clock fails them with [ErrInvalidArgument]. Redis TTLs and
// the behaviour window use Redis time.
func WithClock(c Clock) ClockOption {
	return ClockOption(func(o *options) {
		if c == nil {
			o.fail("nil clock")
			return
		}
		o.clock = c
	})
}

// WithLogger sets a logger for dependency failures. Default: discard. A
// nil logger keeps the default. An option of the constructors whose types
// log: [NewBehaviour] (a failed automatic ban), [NewChecker] (a failed
// rule), [NewMiddleware] (a failed check), [NewAuth] (a failed
// authenticator) and [NewAuthCache] (a malformed revocation message, a
// closed subscription).
func WithLogger(l *slog.Logger) LoggerOption {
	return LoggerOption(func(o *options) {
		if l != nil {
			o.logger = l
		}
	})
}

// WithRevocations makes the [AuthCache] hear the revocations of store:
// [SessionStore.Revoke] publishes the token's hash on the store's channel
// ("<prefix>risk:session:revoked", the prefix of [WithKeyPrefix]) in the
// same atomic step that deletes the session, and [AuthCache.Run], subscribed
// through the store's client, forgets that token at once, on every
// instance. A long cache ttl is then safe for revocation; a session that
// expires by its own Redis TTL is still accepted by a cache until its entry
// expires (ttl). With this option the cache stores entries only while Run
// is subscribed and its subscription answers the liveness probe
// ([WithRevocationProbe]): before Run, after it returns, across a
// resubscription (when messages may have been lost) and when a probe is
// not answered in time it is emptied and every call asks the wrapped
// Authenticator. A revocation thus reaches a running cache within 2 × the
// probe interval (10s by default), or the cache serves nothing by then.
// store is usually the cache's Authenticator too.
// A nil store, or one whose client does not implement [Subscriber], fails
// [NewAuthCache] with [ErrInvalidArgument].
func WithRevocations(store *SessionStore) AuthCacheOption {
	return authCacheOpt(func(o *options) {
		if store == nil {
			o.fail("nil revocation session store")
			return
		}
		sub, ok := store.rdb.(Subscriber)
		if !ok {
			o.fail("WithRevocations: the session store's client cannot Subscribe")
			return
		}
		o.revSub, o.revPub, o.revChannel = sub, store.rdb, revokedChannel(store.o.prefix)
	})
}

// WithRevocationProbe sets how often [AuthCache.Run] proves that its
// revocation subscription still delivers ([WithRevocations]): every
// interval it publishes a probe through the store's client and expects it
// back over the subscription before the next one. A probe not back in
// time empties the cache (it stores nothing meanwhile) and Run
// resubscribes on a new connection; so a revocation reaches the cache
// within 2 × interval, or the cache serves nothing by then. Default 5s
// (bound 10s). Each probe is one PUBLISH to a channel only this cache
// listens on. Without [WithRevocations] it has no effect; an interval
// below 1ms fails [NewAuthCache] with [ErrInvalidArgument].
func WithRevocationProbe(interval time.Duration) AuthCacheOption {
	return authCacheOpt(func(o *options) {
		if interval < time.Millisecond {
			o.fail("revocation probe interval must be >= 1ms")
			return
		}
		o.revProbe = interval
	})
}

// WithSessionTTL sets the lifetime of sessions made by
// [SessionStore.Create] when the caller passes ttl 0. Default 24h.
func WithSessionTTL(d time.Duration) SessionOption {
	return sessionOpt(func(o *options) {
		if d <= 0 {
			o.fail("session TTL must be > 0")
			return
		}
		o.sessionTTL = d
	})
}

// WithSlidingTTL makes every successful [SessionStore.Authenticate] push the
// session's expiry to now + session TTL (one GETEX instead of GET; Redis ≥
// 6.2). Default off: a session dies at its creation time + TTL.
func WithSlidingTTL(on bool) SessionOption {
	return sessionOpt(func(o *options) { o.sliding = on })
}

// WithEscalation sets how [Blacklist.Add] grows bans: the first offence
// within the offence memory bans for base, each further one multiplies the
// ban by factor, never beyond max. Default 1m, 24h, factor 2 (1m, 2m, 4m,
// … 24h).
func WithEscalation(base, max time.Duration, factor int) BlacklistOption {
	return blacklistOpt(func(o *options) {
		if base < time.Millisecond || max < base || factor < 1 {
			o.fail("escalation needs base >= 1ms, max >= base, factor >= 1")
			return
		}
		o.banBase, o.banMax, o.banFactor = base, max, factor
	})
}

// WithOffenceMemory sets how long past offences count towards escalation
// (refreshed at each offence). Default 7 days.
func WithOffenceMemory(d time.Duration) BlacklistOption {
	return blacklistOpt(func(o *options) {
		if d < time.Millisecond {
			o.fail("offence memory must be >= 1ms")
			return
		}
		o.offenceMemory = d
	})
}

// WithAutoBlacklist makes [Behaviour] ban a user through bl (escalating,
// reason [ReasonTooFrequent]) once each time the user crosses the deny
// threshold. Default: no automatic ban. A nil bl fails [NewBehaviour]
// with [ErrInvalidArgument] (leave the option out for no automatic ban).
func WithAutoBlacklist(bl *Blacklist) BehaviourOption {
	return behaviourOpt(func(o *options) {
		if bl == nil {
			o.fail("nil auto blacklist")
			return
		}
		o.autoBlacklist = bl
	})
}

// WithFlagAction sets what [Behaviour] answers between the flag and deny
// thresholds: [Challenge] (default) or [Allow] (the decision then only
// carries the flag in [Decision.Flags]).
func WithFlagAction(a Action) BehaviourOption {
	return behaviourOpt(func(o *options) {
		if a != Allow && a != Challenge {
			o.fail("flag action must be Allow or Challenge")
			return
		}
		o.flagAction = a
	})
}

// WithBindTTL sets how long a device stays bound to its first user
// ([DeviceBinder]). Default 30 days.
func WithBindTTL(d time.Duration) DeviceBinderOption {
	return deviceBinderOpt(func(o *options) {
		if d < time.Millisecond {
			o.fail("bind TTL must be >= 1ms")
			return
		}
		o.bindTTL = d
	})
}

// WithDeviceConflict sets what [DeviceBinder] answers when a device bound
// to one user is presented by another: [Deny] (default) or [Challenge].
func WithDeviceConflict(a Action) DeviceBinderOption {
	return deviceBinderOpt(func(o *options) {
		if a != Deny && a != Challenge {
			o.fail("device conflict action must be Deny or Challenge")
			return
		}
		o.deviceConflict = a
	})
}

// WithRefreshBinding makes the owner's use of a device push the binding's
// expiry to now + bind TTL ([DeviceBinder]). Default true.
func WithRefreshBinding(on bool) DeviceBinderOption {
	return deviceBinderOpt(func(o *options) { o.refreshBinding = on })
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

// WithOnDecision sets a hook called with every [Checker] decision (also in
// dry-run mode, with the real decision). It runs on the request goroutine,
// outside any lock; keep it fast. Default none.
func WithOnDecision(fn func(ctx context.Context, s Subject, d Decision)) CheckerOption {
	return checkerOpt(func(o *options) { o.onDecision = fn })
}

// WithOnFailure sets a hook called when a [Checker] rule fails, whatever the
// failure policy. Default none (failures are still logged).
func WithOnFailure(fn func(ctx context.Context, rule string, err error)) CheckerOption {
	return checkerOpt(func(o *options) { o.onFailure = fn })
}

// WithObserver reports every [Checker.Check] ("risk.check") and every
// request through [Auth] ("risk.auth") to o, synchronously, with the
// caller's ctx; see [StageCheck] for the outcomes. An option of
// [NewChecker] and [NewAuth]. A nil o is ignored. Without an observer nothing is
// measured. Default none.
func WithObserver(o observe.Observer) ObserverOption {
	return ObserverOption(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}

// WithIPResolver sets how [Middleware] finds the client IP. Default: the
// TCP peer address only (no proxy trusted, forwarding headers ignored).
func WithIPResolver(r *IPResolver) MiddlewareOption {
	return middlewareOpt(func(o *options) { o.ipResolver = r })
}

// WithDeviceHeader sets the request header [Middleware] reads the device
// ID from. Default "X-Device-ID". An empty name disables device IDs.
func WithDeviceHeader(name string) MiddlewareOption {
	return middlewareOpt(func(o *options) { o.deviceHeader = name })
}

// WithSubjectFunc replaces how [Middleware] builds the [Subject] of a
// request. Default: user from [UserFrom], IP from the resolver, device from
// the device header.
func WithSubjectFunc(fn SubjectFunc) MiddlewareOption {
	return middlewareOpt(func(o *options) { o.subjectFunc = fn })
}

// WithChallengeHandler sets what [Middleware] does with a [Challenge]
// decision. Default: answer 403 {"error":"challenge","reason":<code>} so
// the client shows a captcha. A handler may instead call next (for example
// when the request already carries a captcha answer that a later
// middleware verifies); the decision is in the context ([DecisionFrom]).
func WithChallengeHandler(h ChallengeHandler) MiddlewareOption {
	return middlewareOpt(func(o *options) { o.challenge = h })
}

// WithCookie makes [Auth] fall back to the named cookie when the request
// has no Authorization header. Default: header only. Browsers send cookies
// on cross-site requests: pair this with SameSite=Strict (or Lax) cookies
// or a CSRF token on state-changing routes.
func WithCookie(name string) AuthOption {
	return authOpt(func(o *options) { o.cookie = name })
}

// WithOnAuthFailure sets a hook called when [Auth] refuses a request (401)
// or cannot check it (503). Default none.
func WithOnAuthFailure(fn func(r *http.Request, err error)) AuthOption {
	return authOpt(func(o *options) { o.onAuthFailure = fn })
}

// WithRealIP makes [IPResolver] believe the X-Real-IP header when the
// peer is a trusted proxy, ahead of X-Forwarded-For. Default off.
func WithRealIP(on bool) IPResolverOption {
	return ipResolverOpt(func(o *options) { o.realIP = on })
}
