// Package stock decides, in one atomic Redis Lua call, which of many
// concurrent buyers of a flash sale get a unit: it reserves stock, enforces a
// per-user limit and records every reservation in a ledger keyed by the
// caller's request ID, so that it cannot oversell and a retried request never
// deducts twice.
//
// A [Deductor] is the entry point:
//
//	d, err := stock.New(rdb) // *redis.Client, *redis.ClusterClient, *redis.Ring, failover clients
//	loaded, err := d.Load(ctx, stock.Activity{ID: 42, Stock: 100, Start: start, End: end})
//	res, err := d.Reserve(ctx, stock.Request{Activity: 42, User: uid, Qty: 1, RequestID: rid})
//	rel, err := d.Release(ctx, 42, rid) // order cancelled or expired
//
// # What one Reserve does
//
// reserve.lua, in one EVALSHA: look the request ID up in the ledger (a repeat
// returns the first outcome with Result.Replayed set); check the activity
// window against Redis TIME (all app servers share one clock, however skewed
// their own); check stock >= qty and the buyer's held quantity + qty <= the
// per-user limit (default 1, multi-quantity allowed); then decrement the
// stock, add to the buyer's held quantity and write the ledger entry (user,
// qty, state, Redis time). A denial ([SoldOut], [LimitReached],
// [NotStarted], [Ended], [NotLoaded], [Released]) is a [Result] with a nil
// error and writes nothing; errors are reserved for bad input, Redis failures
// and malformed replies.
//
// # Idempotence and Release
//
// The request ID is the reservation ID carried through the order pipeline.
// Reserve with an ID already reserved answers Reserved again without a
// deduction; with an ID that was released it answers [Released]; with an ID
// reused for another user or quantity it fails with [ErrRequestConflict] and
// changes nothing. Denials are not recorded (a million refused requests must
// not fill Redis), so a retry of a denied request is decided afresh.
//
// [Deductor.Release] gives back stock and the buyer's held quantity exactly
// once, however often it is called and however it races with Reserve.
// Releasing an unknown ID is reported as [ReleaseUnknown] and leaves a
// tombstone, so a Reserve of that ID arriving after its cancellation (a
// retry overtaken by the cancel) deducts nothing. Invariant, checked by the
// tests by counting: remaining + units held in the ledger = loaded stock.
//
// # Loading
//
// [Deductor.Load] is set-if-absent: a re-run, a second preloader or a
// restarted process never resets a live sale. [Deductor.Reset] is the
// explicit admin overwrite. A [Preloader] loads the activities a [Source]
// reports as starting within a lead time (default 10 minutes). Keys expire
// at End + TTL (default 24h).
//
// # Sold-out short-circuit
//
// Once a Reserve in this process sees an activity sold out (nothing left),
// further Reserves of that activity are refused in-process with one atomic
// load, without a Redis call (Result.Local). The process learns that stock
// came back when it releases stock itself; from other processes through the
// pub/sub channel "<prefix>stock:released", on which release.lua publishes
// in the same atomic step, heard while [Deductor.Run] is active; and in any
// case after the re-check interval (default 500ms, [WithRecheckInterval]),
// after which one Reserve asks Redis again. A local refusal skips the
// ledger: a retry of a request that did reserve may be told SoldOut; use
// [Deductor.Lookup] after an uncertain outcome. [WithoutSoldOutCache] turns
// the cache off.
//
// # Failures
//
// When Redis is down, times out or answers LOADING, BUSY, READONLY,
// MASTERDOWN, CLUSTERDOWN, TRYAGAIN or OOM, calls fail with an error matching
// [ErrUnavailable], and nothing was written (each call is one atomic
// script). The default is to fail fast: the service answers "too busy"
// quickly. A [Fallback] (for example a database deduct) can be configured
// with [WithFallback]. A timeout is an uncertain outcome: the script may
// have run (go-redis may also retry a command after a read timeout). Retrying
// Reserve or Release with the same request ID is always safe, and
// [Deductor.Reservations] lets a reconciler compare the ledger with the
// database. After SCRIPT FLUSH, a restart or a failover the scripts are
// reloaded by themselves (EVALSHA falls back to EVAL on NOSCRIPT).
//
// # Redis and Cluster
//
// Redis 7.0 or later (tested on 7.0.15) or miniredis; EVAL scripts only, no
// Functions. The read-only calls (Remaining, Stats, Lookup, Reservations)
// use EVALSHA_RO, so a ClusterClient with ReadOnly or RouteByLatency, or a
// failover client reading from replicas, serves them off the write path. All keys of one activity carry the hash tag {a:<id>}, so they
// live in one Cluster slot and the package works unchanged on Client,
// ClusterClient, Ring and failover clients. The flip side is that one
// activity is one slot on one shard: a single hot sale is bounded by one
// Redis core (about 100k reserve calls per second); spread load by
// refusing early (the sold-out cache, rate limiting in front).
//
// # When not to use it
//
// It holds stock in Redis for the seconds of a sale; the database remains
// the truth for sold units (orders), and reservations must end as an order
// or a Release. For ordinary, low-contention stock a conditional UPDATE in
// the database is simpler.
//
// A Deductor and a Preloader are safe for concurrent use by multiple
// goroutines. Hooks run on the caller's goroutine, outside any lock.
package stock
