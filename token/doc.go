// Package token keeps scripted buyers out of a flash sale with two
// credentials checked before stock is touched: an access-token pool in
// Redis and HMAC-signed seckill URLs.
//
// # Access-token pool
//
// [Pool.Issue] creates stock×k random tokens for an activity (k = 3 by
// default, [WithMultiplier]); it is idempotent and concurrent-safe: the
// total issued never exceeds stock×k however often or from however many
// servers it runs. [Pool.Take] binds a free token to a user with a TTL in
// one Lua call; a user holding a live token gets the same one back (Held),
// and a user who already consumed one gets Used. [Pool.Consume] verifies
// and spends a token exactly once: among concurrent calls with the same
// token exactly one succeeds. Expired bound-but-unused tokens go back to
// the pool: lazily in Take ([WithReclaimBatch]) and in [Pool.Reclaim].
// [Pool.Stats] reports what is left (Free + Expired can still be taken).
//
// [Pool.Restore] undoes a Consume whose downstream step failed (the stock
// reservation hit a Redis error or an open breaker, or the order hand-off
// failed and the reservation was released), so the user's retry is not
// refused with [ErrUsed]: the token is bound to the user again with a fresh
// deadline and the used counter drops by one, atomically and idempotently.
// Restore only tokens whose purchase did not go through; the guard against
// a second order is the stock package's per-user cap, not the token.
//
// # Refused or broken
//
// An exhausted pool is a result: a [Grant] with Status [Empty], not an
// error. A credential that fails [Pool.Consume], [Pool.Restore],
// [Signer.Verify] or [Signer.Sign] is an error, so callers cannot mistake it
// for success, and every such refusal wraps the one umbrella [ErrRefused]:
// errors.Is(err, ErrRefused) is true for [ErrMalformed], [ErrNotFound],
// [ErrWrongUser], [ErrUsed], [ErrExpired], [ErrUnknownKey],
// [ErrInvalidSignature], [ErrWrongActivity], [ErrNotYetValid],
// [ErrReplayed] and [ErrTooEarly], and false for everything that is not a
// business refusal: a Redis failure, [ErrBadReply], a cancelled or timed-out
// context, and the caller's own mistakes ([ErrInvalidArgument] for a bad
// activity or user ID, a stock out of range or bad [SignParams];
// [ErrInvalidConfig], also for a bad key set). So one errors.Is tells "answer the
// client no" from "fail closed". [ErrMalformed] is a refusal because it
// judges a credential the client presented (a pool token or signed URL of
// the wrong shape).
//
// Arguments: [Pool.Consume] and [Pool.Restore] take a [ConsumeParams] and
// [Signer.Verify] a [VerifyParams], so that the activity, user and token
// strings cannot be swapped silently.
//
// Time: the pool's scripts read Redis TIME by default, so all app servers
// share one clock for binding deadlines. [WithClock] replaces it with the
// injected clock (passed to the scripts as ARGV), which tests use.
//
// # Signed URLs
//
// A [Signer] signs (activity, user, not-before, expiry, nonce) with
// HMAC-SHA256 into one URL-safe base64 string of about 100 characters,
// suitable for a path segment or a query value. [Signer.Sign] only releases
// URLs within the lead time before the activity start ([WithLeadTime],
// [ErrTooEarly]). [Signer.Verify] compares MACs in constant time
// (hmac.Equal), tolerates clock skew ([WithSkew]) and returns a distinct
// sentinel for every refusal: [ErrMalformed], [ErrUnknownKey],
// [ErrInvalidSignature], [ErrWrongActivity], [ErrWrongUser],
// [ErrNotYetValid], [ErrExpired], [ErrReplayed]. Keys carry IDs and rotate
// without downtime ([Signer.SetKeys]). With [WithReplayGuard] each URL is
// accepted once (SET NX on its nonce); without it Verify does no I/O and no
// allocation (≈ 0.6 µs on a 2-core VM).
//
// Replay guard and clock skew: each server checks expiry on its own clock,
// so a server whose clock is behind still accepts a URL that a server ahead
// already considers expired. The nonce's "used" record therefore lives until
// expiry + skew ([WithSkew]) + the maximum node skew ([WithMaxNodeSkew],
// default 30 s), read on the clock of the server that accepted the URL. The
// contract: as long as the clocks of any two servers sharing one replay
// guard differ by at most the maximum node skew, a URL is accepted at most
// once across all of them, at any moment of its life. Beyond that bound a
// server far enough behind may accept a replay; keep the servers on NTP. The
// TTL counts on the Redis server's clock as a duration, so the Redis clock's
// offset does not matter, but the record must not be lost: no eviction
// policy that may drop it (use noeviction, or keep the guard's keys out of
// an evicting instance).
//
// # Concurrency and failures
//
// Options belong to their constructor: [NewPool] takes [PoolOption]s and
// [NewSigner] [SignerOption]s, so an option of one ([WithMultiplier],
// [WithLeadTime], ...) does not compile with the other. [WithKeyPrefix],
// [WithClock] and [WithObserver] apply to both and return an [Option],
// which is both. A nil option is ignored. Options out of range, a nil
// client, a nil clock or a nil replay-guard store fail [NewPool] and
// [NewSigner] with [ErrInvalidConfig].
//
// Pool and Signer are safe for concurrent use. A Redis failure is returned
// as a wrapped error, never as a refusal and never as a success: callers
// must treat it as "not verified" (fail closed). go-redis may retry a
// script after a read timeout; Take and Issue are idempotent per user and
// per target, but a retried Consume may report [ErrUsed] for a token the
// first attempt consumed. A retried Restore is a no-op.
//
// # Observing
//
// [WithObserver] reports [Pool.Take], [Pool.Consume], [Pool.Restore] and
// [Signer.Verify] to the observer shape shared by every seckill package
// ([observe.Event], [observe.Observer]): stages "token.take", "token.consume",
// "token.restore" and "token.verify", one event per call, synchronously,
// with the caller's ctx and the call's activity. The outcome is "ok" (for
// Take the [Status]: "granted", "held", "empty", "used", "not_issued"),
// the snake-case name of the refusal sentinel ("wrong_user", "expired",
// "replayed", ...), "invalid_argument" or "error" with Err set. See [StageTake].
//
// # Redis
//
// Redis 5 or later (scripts call TIME before writing, which needs effect
// replication) or any Redis Cluster: every pool script touches only the
// keys of one activity, which share the hash tag {a:<activity>}. Keys are
// listed in the package README. Activity and user IDs are 1..128 bytes
// without braces.
//
// When not to use: a pool token is a right to try, not a reservation of
// stock; the stock package still decides who buys. Signed URLs hide the
// buy endpoint from scripts until release time; they do not authenticate
// users (do that first).
package token
