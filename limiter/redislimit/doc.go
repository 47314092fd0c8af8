// Package redislimit holds the Redis-backed rate limiters, shared by every
// app server: [SlidingWindow] (at most N events per key in any window of
// length W, an exact sliding log with no boundary burst) and [Bucket] (a
// token bucket per key, GCRA; with one constant key it is the
// cluster-wide global limit), and [Priority], which shares one key of a
// Bucket among ordered traffic classes so that under overload the lowest
// class is shed first (package limiter's priority classes, across every
// app server).
//
// They speak the vocabulary of package limiter: both implement
// [limiter.Limiter] and [limiter.Refunder], return a [limiter.Result] (a
// refusal is a Result with Allowed false, never an error), compose with
// [limiter.Chain], [limiter.DryRun] and [limiter.NewMiddleware], and
// return errors wrapping limiter's sentinels ([limiter.ErrInvalidConfig],
// [limiter.ErrInvalidArgument], [limiter.ErrUnavailable]). This package
// imports limiter, never the reverse, so a service that limits only in
// process does not link go-redis.
//
// # Options
//
// Both constructors read the same options, so they share one option type,
// [Option], an interface with an unexported method (options come from the
// With… functions only): [WithKeyPrefix], [WithName], [WithFailurePolicy],
// [WithFallback], [WithOnFailure], [WithObserver], [WithLogger],
// [WithBatching], [WithException] (a key's own limit: a hot item, a VIP
// user). A nil option is ignored; a nil collaborator (a nil Redis
// client, [WithFallback] limiter or [WithLogger] logger) is an error
// wrapping [limiter.ErrInvalidConfig]. The logger defaults to
// slog.Default(); pass slog.New(slog.DiscardHandler) to silence it.
//
// # Failures
//
// Redis failures (network, timeout, closed server, unexpected reply — never
// a panic) are handled per limiter by an explicit [limiter.FailurePolicy]
// ([WithFailurePolicy]): [limiter.FailClosed] (the default: refuse, and
// return an error wrapping [limiter.ErrUnavailable]), [limiter.FailOpen]
// (allow, Result.Degraded) or [limiter.FallbackLocal] (decide with an
// in-process [limiter.Keyed] limiter, per node; [WithFallback]). Each
// failure is reported to [WithOnFailure] and the logger whatever the
// policy. A caller whose own context ended gets its context error, not the
// policy. A decision whose reply was lost (timeout after the script ran)
// may have spent budget; the limiter errs toward refusing. Do not wrap a
// limiter whose policy is not FailClosed in a circuit breaker (see
// limiter's "One failure policy per call").
//
// # Callbacks
//
// [WithOnFailure] gets the context of the AllowN or RefundN call that
// failed ([limiter.Chain]'s refunds pass the Chain ctx without its
// cancellation) first.
//
// # Observing
//
// [WithObserver] reports each AllowN as the stage "limiter.allow"
// ([StageAllow]) with Name = [WithName], synchronously, with the caller's
// ctx: outcome ok | limited | fallback | fallback_limited | error
// (fallback: the failure policy decided because Redis failed).
//
// # Redis
//
// Redis >= 5 (scripts read TIME before writing; effects replication), so
// app server clocks never matter (tests move it with miniredis SetTime).
// Every script touches exactly one key, passed in KEYS, so Redis Cluster
// works (keys are hash-tagged per limiter and caller key):
//
//	<prefix>{sw:<name>:<key>}   sorted set: the sliding log of SlidingWindow
//	<prefix>{tb:<name>:<key>}   string: the GCRA arrival time of Bucket
//
// Scripts run by EVALSHA (EVAL after a script cache flush); concurrent
// decisions are coalesced into pipelines by default ([WithBatching]). Keys
// live under a prefix ([WithKeyPrefix], default "seckill:") and expire
// when idle. Script numbers are Lua doubles: a rate, burst or cost above
// 2^53-1 is refused in Go ([limiter.ErrInvalidConfig],
// [limiter.ErrInvalidArgument]) rather than rounded. The client is
// borrowed, never closed.
package redislimit
