// Package breaker is an in-process circuit breaker: it stops calling a sick
// dependency (Redis, Kafka, the database) so that requests fail in
// nanoseconds with [ErrOpen] instead of piling up behind timeouts, and it
// lets a few probes through to find out when the dependency is back.
//
// # States
//
//   - [Closed]: every call runs. The breaker trips to Open after N
//     consecutive failures ([WithConsecutiveFailures], default 5) and/or when
//     the failure ratio over a rolling window reaches a threshold with a
//     minimum number of calls in the window ([WithFailureRatio],
//     [WithWindow]).
//   - [Open]: every call is refused with [ErrOpen] for the open timeout
//     ([WithOpenTimeout], default 5s).
//   - [HalfOpen]: at most [WithProbeLimit] calls (default 1) run at once;
//     the others get [ErrTooManyProbes]. One failure reopens the breaker;
//     [WithSuccessesToClose] successes (default 1) close it.
//
// # Calling
//
// [Breaker.Execute] wraps a func(ctx) error, [Do] a func(ctx) (T, error), and
// [Breaker.Allow] returns a done(err) callback for code that cannot be
// wrapped. A nil error is a success; any other error goes through the
// classifier ([WithClassifier]): by default context.Canceled is ignored (the
// caller gave up, which says nothing about the dependency) and every other
// error, context.DeadlineExceeded included, is a failure. Refusals are the
// sentinels [ErrOpen] and [ErrTooManyProbes], which both wrap [ErrRefused]
// (one errors.Is for "refused without running"); the protected function's
// own error is returned unchanged.
//
// Wrap a dependency whose outages are errors. A dependency that decides its
// own outages (a limiter with a fail-open or local-fallback policy, which
// returns a nil error while Redis is down) must not be wrapped: the breaker
// would count its degraded answers as successes and, once open, would stop
// the fallback from running. One failure policy per call.
//
// # Guarantees
//
//   - A half-open probe slot is always given back: when the call returns, when
//     it panics (the panic counts as a failure and continues up the stack
//     unrecovered, with its original stack trace), on runtime.Goexit, and when
//     its result is ignored. With [Breaker.Allow], calling done more than once
//     counts once; a half-open permit that is dropped without calling done is
//     released when it is garbage collected. The number of probe calls in
//     flight never exceeds the limit, even across half-open periods: a probe
//     whose period ended (the breaker reopened) keeps its slot until it
//     returns.
//   - Results are counted only in the period (generation) in which their call
//     was admitted: a slow call that returns after the breaker tripped, or
//     after it tripped and closed again, is dropped. Each period starts from
//     zero: closing starts an empty window (probe results belong to the
//     half-open period) and a fresh run of consecutive failures.
//   - The run of consecutive failures is exact under concurrency: it equals
//     the number of failures since the last success, in the order the results
//     were recorded; exactly one caller performs each transition.
//   - The rolling window counts every result in the bucket of the instant it
//     was recorded (to within a timer latency for successes with the default
//     clock, see below). It slides one bucket at a time: a result leaves the
//     window when its whole bucket does.
//
// # Hooks
//
// [WithOnStateChange] is called after the breaker's lock is released, one
// hook at a time, in transition order, with the ctx of the call that caused
// the transition ([Breaker.Execute], [Do]; context.Background() for
// [Breaker.Allow], [Breaker.State] and [Breaker.Counts], which take none).
// A hook may call any method of the breaker, including one that causes
// another transition; that transition's hook runs after the current one
// returns.
//
// # Observing
//
// [WithObserver] reports to the observer shape shared by every seckill
// package ([observe.Event], [observe.Observer]), synchronously after each call:
//
//	stage          outcome                                   Name
//	breaker.call   ok | failure | ignored | rejected         breaker name
//	breaker.state  closed | half_open | open (gauge, Value   breaker name
//	               0 | 1 | 2), once at New and on every
//	               state change
//
// A call's Duration is measured on the breaker's clock from Execute, Do or
// Allow to the end of the call (done for Allow); calls pass the caller's
// ctx (Allow, which has none, passes context.Background()); a state change
// passes the ctx the state-change hook gets. With no observer nothing is
// timed.
//
// # Concurrency and cost
//
// A [Breaker] is safe for concurrent use. In the Closed state a call takes no
// lock: the state and generation, the consecutive-failure run and the window
// buckets are atomics (a plain-mutex version is kept in the repository's
// bench module, bench/breaker, to show the difference). Reading the clock is the largest cost of a breaker on
// many machines (time.Now costs 40-400ns on a loaded VM), so successes and
// refusals avoid it:
//
//   - Without a rolling window the closed state never reads the clock.
//   - With one, failures and [Breaker.Counts] read the monotonic clock
//     (time.Since, cheaper than time.Now); with the default clock successes
//     use the current bucket's epoch, cached until a runtime timer
//     (time.AfterFunc, armed once per bucket width while calls keep coming)
//     marks the next boundary. A success recorded within a timer latency
//     after a boundary therefore counts in the previous bucket and leaves the
//     window one bucket early; with an injected [Clock] every result reads
//     the clock and lands exactly.
//   - An Open breaker refuses calls without reading the clock: with the
//     default clock, opening arms one timer that marks the end of the open
//     period, so the breaker never half-opens early and at most a timer
//     latency late; with an injected clock each refusal reads it and the
//     deadline is exact.
//
// Transitions, half-open probes and bucket rotation (once per bucket width)
// take a mutex. Execute and Do do not allocate; Allow allocates its permit.
//
// # When not to use it
//
// The state is per process: each instance of a service trips on its own
// view, which is what you want for protecting a dependency from this
// process. It is not a rate limiter (use package limiter) and it does not
// retry. Time comes from the injected [Clock] ([WithClock]); the package
// keeps no goroutine running (its timers run one store when they fire, and
// an idle breaker has none pending) and has no global state.
package breaker
