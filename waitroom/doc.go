// Package waitroom is a fair waiting room in front of a flash sale, so the
// fastest script does not win: users join a queue, users who joined before
// the start are placed by one verifiable shuffle at the start (the
// pre-queue), later users first in, first out, and the room admits them at
// a rate every instance shares, each with a signed admission pass that the
// buy path requires. Its sub-package [github.com/seckillkit/seckill/waitroom/draw]
// is the other fair mode: entries in a window, then a draw.
//
// # The life of a sale
//
//  1. Before the sale the operator picks a secret seed, publishes
//     [Commit](seed) and calls [Room.Configure] (start, commitment, rate
//     and/or cap on active users).
//  2. [Room.Join] enters a user once (a rejoin keeps the place) and returns
//     a signed queue ticket (HMAC-SHA256, bound to the user and the sale,
//     expiring, keys rotated like token.Signer's). The page polls
//     [Room.Poll] with it: state, position, ETA and, once admitted, the
//     admission pass.
//  3. At the start the operator reveals the seed to [Room.Start]: the
//     entries that joined before the start, sorted, are placed in the
//     order [Shuffle](seed, entries) — a public, fixed function that
//     anyone can recompute ([VerifyOrder]); every later entry comes after
//     them, first in, first out.
//  4. Every instance calls [Room.Admit] on a short ticker. It admits the
//     next users whose turn it is as far as the allowance (users per
//     second) and the cap on admitted-but-not-done users allow; both live
//     in Redis, so the rate holds however many instances call. An entry
//     that has not polled for [WithAbandonAfter] is skipped, without using
//     the allowance.
//  5. The admitted user's pass is checked by [Room.Verify] (HMAC, expiry,
//     and in Redis that the user is still admitted) at the token step and
//     at checkout; [Room.Done] frees the slot, after which the pass is
//     refused. [Room.SetPaused] stops and resumes admission; [Room.Stats]
//     is the operator's view.
//
// # When not to use it
//
// A sale small enough for first come, first served, or one where the
// stock and the token pool in front of it are the only gate wanted. A room
// adds one Redis round trip per poll and one per pass check.
//
// # Fairness and verification
//
// The pre-queue order depends only on the seed and the sorted set of
// pre-queue entries, never on the order or speed of the joins. The seed is
// committed to before the sale, so the operator cannot pick it after
// seeing the entries; publishing the entries and the seed lets anyone
// check the order. The shuffle (up to a million entries) runs in Go, not in
// one Lua script that would block Redis: Start freezes the pre-queue,
// reads it, shuffles it and writes the places in batches, each one script
// behind a fence, so a Start that dies half-way is resumed by calling it
// again, from any instance, to the same order; nobody is admitted before
// the last batch is written.
//
// # Concurrency and failures
//
// A Room is safe for concurrent use, and any number of instances may share
// a sale. Every operation is one Lua script, one round trip (Start: one per
// batch, plus HSCAN). A refused credential is an error wrapping
// [ErrRefused]; a Redis failure is an error that does not (fail closed:
// treat the pass as not verified).
//
// # Time
//
// By default the scripts read Redis TIME, so every instance shares one
// clock for the start, the allowance and abandonment; tickets and passes
// are checked against the process clock. [WithClock] passes the injected
// clock's time to the scripts instead.
//
// # Redis
//
// Redis 6.2 or later, or Redis Cluster: every key of a sale carries the
// hash tag {wr:<sale>}, so a sale lives in one slot and every script is
// atomic over it. Memory: about 66 bytes per waiting user (see README).
package waitroom
