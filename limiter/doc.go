// Package limiter sheds load before it reaches stock, the database or the
// message queue: in-process rate limits, the vocabulary every limiter shares
// ([Limiter], [Result], [FailurePolicy]), their composition, a dry-run mode
// and HTTP middleware. The Redis-backed limiters, shared by every app
// server, are in the sub-package
// [github.com/seckillkit/seckill/limiter/redislimit], which imports this
// one: a service that limits only in process does not link a Redis client.
//
// # Which limiter
//
//   - [TokenBucket]: one in-process bucket (rate + burst), e.g. a node's
//     total intake. GCRA on one atomic word: Allow is lock-free and
//     allocation-free; Reserve and Wait honour context deadlines (failing
//     fast when the wait would pass them). Zero, infinite and invalid rates
//     have defined meanings (see the type).
//   - [Keyed]: a token bucket per key (user, device, IP) on one node, with
//     bounded memory (idle keys evicted exactly, a cap on keys); a key can
//     have its own rate and burst ([WithException]: a VIP user, a hot
//     item).
//   - [Priority]: ordered traffic classes (say verified, normal, suspect:
//     the caller names them) sharing one [TokenBucket], each class keeping
//     a floor of tokens for the classes above, so under overload the lowest
//     class is shed first and the higher ones keep their admitted rate (the
//     guarantees are stated on the type). The key of its AllowN is the
//     class, so in [NewMiddleware] a [Rule] whose Key maps the request to a
//     class (a risk score, a verified account) applies it.
//     redislimit.Priority does the same on one key of a Redis bucket.
//   - redislimit.SlidingWindow: at most N events per key in any window of
//     length W, shared by all app servers through Redis. An exact sliding
//     log: no boundary burst.
//   - redislimit.Bucket: a token bucket per key in Redis (GCRA); with one
//     constant key it is the cluster-wide global limit.
//   - [Chain] composes limits (user → device → global) so that a refusal
//     anywhere spends no budget anywhere; [DryRun] observes a limit without
//     enforcing it; [NewMiddleware] applies rules to HTTP requests, keyed
//     by the TCP peer ([RemoteAddrKey], the default), by the client behind
//     trusted reverse proxies ([ForwardedForKey], which believes
//     X-Forwarded-For only from the proxies it is given) or by a header.
//
// Every keyed limiter implements [Limiter] (and [Refunder]) and returns a
// [Result]: a refusal is a Result with Allowed false, never an error.
//
// When not to use it: a limiter is not an admission guarantee for stock
// (the stock package's atomic reserve is), and a local limiter does not
// coordinate nodes — use the Redis ones (redislimit) for budgets that must
// hold across instances.
//
// # Time
//
// In-process limiters take an injected [Clock] ([WithClock]; default: the
// runtime's monotonic clock, about half the cost of time.Now on this kind
// of VM). A [CoarseClock], updated by a loop behind Run/Close, makes Allow
// cost an atomic load instead of a clock read, at the price of seeing
// refills up to one resolution late (it never over-admits). The Redis
// limiters read Redis TIME inside their scripts, so app server clocks never
// matter.
//
// # Concurrency
//
// All types are safe for concurrent use. Hooks are called synchronously,
// outside any lock. No type starts a goroutine, except [CoarseClock.Run],
// which the caller runs and stops.
//
// # Observing
//
// [WithObserver] (for [NewMiddleware]) reports to the observer shape shared
// by every seckill package ([observe.Event], [observe.Observer]),
// synchronously, with the request's ctx: the stage "limiter.http"
// ([StageHTTP]), once per request, outcome ok | limited | error |
// key_error, Name the refusing or failing rule, timed without the next
// handler. Err is set for error and key_error. Without an observer nothing
// is measured. The Redis limiters report each decision as
// "limiter.allow" (redislimit.WithObserver).
//
// # Failures
//
// A store failure of a shared limiter (Redis: network, timeout, closed
// server, unexpected reply — never a panic) is handled per limiter by an
// explicit [FailurePolicy]: [FailClosed] (the default: refuse, and return
// an error wrapping [ErrUnavailable]), [FailOpen] (allow, Result.Degraded)
// or [FallbackLocal] (decide with an in-process [Keyed] limiter, per
// node). See redislimit for the hooks that report each failure.
//
// # One failure policy per call
//
// Exactly one thing decides what a call does while Redis is down: either
// the limiter's own policy or a circuit breaker around it, never both.
//
//   - A limiter with [FailOpen] or [FallbackLocal] decides Redis failures
//     itself and returns a nil error. Do NOT wrap it in a circuit breaker:
//     the breaker would count every degraded decision as a success during
//     the outage, and once it opened for another reason it would refuse
//     calls the fallback should have decided.
//   - Wrap only a [FailClosed] limiter (the default, whose Redis failures
//     are errors wrapping [ErrUnavailable]) in a breaker, which then owns
//     the outage: it counts the errors, opens, and the caller decides what
//     an open breaker means.
//
// A caller that wants to know the fallback decided reads Result.Degraded
// (true for every decision made by [FailOpen] or [FallbackLocal] because
// Redis failed).
//
// # Errors
//
// A refusal is a Result with Allowed false and a nil error. Where a
// refusal has to be an error ([TokenBucket.WaitN]: a quota that cannot
// cover n, or [ErrWouldExceedDeadline]) it matches [ErrRefused]; store
// failures ([ErrUnavailable]), bad arguments ([ErrInvalidArgument]: a cost
// out of range, a nil [Chain] step, a request the middleware cannot key),
// bad configuration ([ErrInvalidConfig]) and the caller's context errors
// never do. The Redis limiters return these same sentinels, so one
// errors.Is works whichever limiter answered.
//
// # Options
//
// Each constructor takes its own option interface ([TokenBucketOption],
// [KeyedOption], [MiddlewareOption]), an interface with an unexported
// method, so options come from the With… functions only; an option that
// means nothing to a constructor does not compile there. [WithClock],
// shared by the two in-process limiters, returns [ClockOption], which
// implements both of their interfaces. A nil option is ignored; a nil
// collaborator (a nil [WithClock] clock, a nil limiter given to
// [NewDryRun] or a middleware [Rule]) is an error wrapping
// [ErrInvalidConfig].
//
// # Callbacks
//
// Callbacks take the context of the call that triggered them first: the
// [NewDryRun] hook gets that of AllowN. The HTTP hooks ([WithOnDenied],
// [WithOnError]) take the *http.Request, whose Context() is that context.
package limiter
