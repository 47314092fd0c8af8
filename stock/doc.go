// Package stock decides, in one atomic Redis Lua call, which of many
// concurrent buyers of a flash sale get a unit: it reserves stock, enforces a
// per-user limit and records every reservation in a ledger keyed by the
// caller's reservation ID, so that it cannot oversell and a retried request never
// deducts twice.
//
// A [Deductor] is the entry point:
//
//	d, err := stock.New(rdb) // *redis.Client, *redis.ClusterClient, *redis.Ring, failover clients
//	loaded, err := d.Load(ctx, stock.Activity{ID: "42", Stock: 100, Start: start, End: end})
//	res, err := d.Reserve(ctx, stock.Request{Activity: "42", User: uid, Qty: 1, ReservationID: rid})
//	rel, err := d.Release(ctx, "42", rid) // order cancelled or expired
//
// Activity and user IDs are strings of 1 to [MaxIDLen] (64) bytes of
// [A-Za-z0-9._@+-] ([ValidID]): decimal numbers, UUIDs, ULIDs, slugs. Any
// other ID is refused before Redis is called, with an error wrapping
// [ErrInvalidArgument] (for Load, Reset and Rebuild too) that never quotes an over-long ID; ':' and braces are excluded because
// they separate the parts of ledger records and keys and delimit the
// Cluster hash tag. IDs compare byte for byte. A shop with numeric IDs
// passes strconv.FormatInt(id, 10) and gets the keys (and, for a sharded
// activity, the buyer shards) of the releases with int64 IDs: activity 7
// is still <prefix>{a:7}:meta.
//
// # What one Reserve does
//
// reserve.lua, in one EVALSHA (with [WithCoalescing], one reserve_many.lua
// call decides a batch of them the same way: see Coalescing): look the
// reservation ID up in the ledger (a repeat returns the first outcome with
// Result.Replayed set); check the activity window against Redis TIME (all
// app servers share one clock, however skewed their own); check stock >= qty
// and the buyer's held quantity + qty <= the per-user limit (default 1,
// multi-quantity allowed); then decrement the stock, add to the buyer's held
// quantity and write the ledger entry (user, qty, state, Redis time). A
// frozen or paused activity answers [Frozen] or [Paused] right after the
// ledger look-up (so a replay still gets its reservation). A denial
// ([SoldOut], [LimitReached], [NotStarted], [Ended], [NotLoaded],
// [Released], [Frozen], [Paused]) is a [Result]
// with a nil error and writes nothing; errors are reserved for bad input,
// Redis failures and malformed replies. Stock, quantities and per-user
// limits pass through Lua numbers (doubles): values above [MaxQuantity]
// (2^53-1) are refused with [ErrInvalidArgument] before Redis is called.
// Where a denial has to be an error ([Result.Err], [ErrInsufficient] of
// Adjust, [ErrLive] of Rebuild, [ErrNotLoaded] of Remaining and Freeze) it
// wraps [ErrRefused]; failures (Redis, bad input, a reused ID, a malformed
// reply, a cancelled context) never do. Bad configuration given to [New]
// or [NewPreloader] wraps [ErrInvalidConfig].
//
// # Idempotence and Release
//
// The reservation ID ([Request].ReservationID) is the ID carried through the
// order pipeline.
// Reserve with an ID already reserved answers Reserved again without a
// deduction; with an ID that was released it answers [Released]; with an ID
// reused for another user or quantity it fails with [ErrIDConflict] and
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
// reports as starting within a lead time (default 10 minutes); with
// [WithRecovery] it rebuilds them from the database instead (see below).
// Keys expire at End + TTL (default 24h).
//
// # Operating a live sale
//
// Three admin operations act inside the scripts, so they take effect
// atomically for every process at once:
//
//   - [Deductor.Pause] and [Deductor.Resume]: a flag "paused" in the meta
//     hash (every shard's, for a sharded activity), checked by reserve.lua
//     and reserve_many.lua after the ledger look-up; new reservations answer
//     [Paused] (not sold out; nothing written, the sold-out cache untouched),
//     replays still answer from the ledger, Release and Adjust keep working,
//     and a paused shard lends nothing. It is separate from the frozen flag
//     of the data-loss fence: Resume never unfreezes and Unfreeze never
//     resumes. The order: a process that already knows the activity is sold
//     out answers SoldOut (Local) without asking Redis; sold out still
//     answers sold out.
//   - [Deductor.Adjust]: a top-up (Delta > 0) or a withdrawal of unreserved
//     units (Delta < 0), idempotent by its ID, as an entry of the adjustment
//     log "<prefix>{a:<id>}:adj"; stock and total move together in one
//     step and the fence's seq counts it, so a rollback that loses it is
//     detected. Invariant, at every quiet moment: total = loaded stock +
//     top-ups - withdrawals = remaining + held (+ units in transfer between
//     shards). A top-up publishes on the release channel, so sold-out flags
//     clear. A sharded activity is adjusted one idempotent step per shard
//     ("<id>#<k>"): a top-up split as Load splits the stock; a withdrawal
//     is refused, nothing written, when a first read of the shards shows
//     too few units, and otherwise taken from the shards in order, each step
//     as many units as the shard holds up to what is still wanted. Reserves
//     racing with it can leave fewer units than were read: the withdrawal
//     then takes what is there, reports it in [Adjustment.Applied] and
//     returns an error wrapping [ErrInsufficient] (a retry with the same ID
//     answers the same). [Deductor.Adjustments] lists the log.
//   - The re-buy policy [Activity.NoRebuy], stored at Load: with it, the
//     units a buyer ever reserved (a hash "<prefix>{a:<id>}:ever", written
//     only for such a sale) count against the per-user limit even after
//     their release, so a buyer whose order was cancelled cannot buy again
//     beyond the limit. Without it (the default) the limit counts the units
//     held now.
//
// [Stats] reports Paused and NoRebuy; [WithObserver] reports every Reserve,
// Release, Adjust, Pause and Resume (stages "stock.reserve", …; see
// [StageReserve]). Reset writes the activity afresh (unpaused, its logs
// deleted); Rebuild writes it unpaused and keeps the adjustment log and the
// units ever reserved.
//
// # Sold-out short-circuit
//
// Once a Reserve in this process sees an activity sold out (nothing left),
// further Reserves of that activity are refused in-process with one atomic
// load, without a Redis call (Result.Local). The process learns that stock
// came back when it releases stock itself; from other processes through the
// pub/sub channel "<prefix>stock:released", on which release.lua publishes
// in the same atomic step, heard while [Deductor.Run] is active; and in any
// case at the re-check interval (default 500ms, [WithRecheckInterval]): Run
// then reads the activity's Stats and keeps the flag while Redis confirms it
// (nothing left, no ledger write since the flag was set), so no buy has to
// reach Reserve to keep an app's early SoldOut check up; without Run, or for
// a sharded activity, the flag is dropped and one Reserve asks Redis again.
// [WithoutSoldOutCache] turns the cache off.
//
// Retries of winners are not refused: before setting the flag, the process
// reads the reservation IDs of the activity's ledger (ids.lua, HSCAN pages of
// 1,000, on the master) into an in-process set, and a request whose ID is in
// it goes to Redis, which answers from the ledger (Reserved with Replayed,
// or Released). The set is tied to the (epoch, seq) of the SoldOut reply, so
// it is read again only when the ledger changed; cost: one round trip per
// 1,000 entries (the ledger holds about as many entries as there was stock,
// plus releases and tombstones) once per sell-out per process, about 100
// bytes per entry while sold out, and one map lookup per refusal. One
// window stays: a reservation made after that read (possible only after
// stock came back through a release in another process) can be refused
// locally until this process learns of the release, the same window in
// which the flag itself is stale. [Deductor.Lookup] is the authority.
//
// # Failures
//
// When Redis is down, times out or answers LOADING, BUSY, READONLY,
// MASTERDOWN, CLUSTERDOWN, TRYAGAIN or OOM, calls fail with an error matching
// [ErrUnavailable], and nothing was written (each call is one atomic
// script). The default is to fail fast: the service answers "too busy"
// quickly. A fallback (for example a database deduct) can be configured
// with [WithFallback]. A timeout is an uncertain outcome: the script may
// have run (go-redis may also retry a command after a read timeout). Retrying
// Reserve or Release with the same reservation ID is always safe, and
// [Deductor.Reservations] lets a reconciler compare the ledger with the
// database. After SCRIPT FLUSH, a restart or a failover the scripts are
// reloaded by themselves (EVALSHA falls back to EVAL on NOSCRIPT).
//
// # Coalescing
//
// One Reserve is one script call, and one activity lives on one Redis core:
// that core's script throughput bounds a single hot sale. [WithCoalescing]
// (off by default) gathers the concurrent Reserve calls of one activity made
// in this process into batches, each decided by one call of
// reserve_many.lua: a batch is sent when it holds maxBatch requests
// (default 64) or one window (default 500µs) after its first request
// arrived. Each request in it is decided exactly as reserve.lua would decide
// it, one after the other in the order they joined: reservation-ID replay (the
// same ID twice in one batch is decided once, the second gets the replay),
// frozen, the window on Redis TIME (read once per batch: its decisions share
// one Redis instant), stock, the per-user cap and the ledger entry; a batch
// leaves the same meta, buyers and ledger as the same requests one by one.
// A batch never spans activities, nor the shards of a sharded activity, so
// it touches one slot: standalone and Cluster alike.
//
// What stays the same: the in-process sold-out short-circuit (it refuses
// before a request joins a batch), the hooks (each caller's, on its own
// goroutine), [WithFallback] (called per request whose batch failed with
// [ErrUnavailable]), the error of every request of a failed batch (what a
// single call would get: nothing was written, or after a timeout the
// outcome is unknown and a retry with the same reservation IDs is safe) and the
// fence: each decision's fence reply is judged as a single reply is,
// against the knowledge when the batch was sent; since a batch ran on one
// copy in one atomic step, a loss shown by any of its decisions answers all
// of them [Frozen] (reported once).
//
// Cancellation: a caller whose context ends before its batch is sent gets
// the context's error (wrapped in ErrUnavailable, as a single call) and its
// request is never sent; once sent, the caller waits for its real outcome
// whatever its context does. The call runs with the latest deadline of the
// batch's callers (none if one has none; the client's timeouts apply).
//
// The price is latency: a request waits until its batch is full or its
// window has passed (a lone request waits the whole window). The gain, with
// 200 concurrent callers on the reference 2-core machine: 4.7–4.9× the
// reservations per second of one-by-one Reserve, p99 2.3 ms (9 ms one by
// one), and a fifth of the Redis CPU per reservation (see BENCHMARKS.md at
// the repository root). Turn it on for an activity whose Reserve traffic
// approaches one Redis core; leave it off otherwise. Size maxBatch below the
// number of concurrent callers per process (a batch that never fills always
// waits the window), and the window at one or two Redis round trips.
//
// # Sharding
//
// [Activity.Shards] = n (2 to 64) splits an activity's stock into
// n sub-ledgers, "shards", each with the keys of an un-sharded activity
// under its own hash tag {a:<id>:s<k>/<n>:<salt>}, so each lives in its own
// Cluster slot: n masters share one hot sale. The salt is the smallest
// integer that puts shard k's slot in the middle half of the k-th n-th of
// the slot space: deterministic (every process finds the same keys), and on
// masters owning equal slot ranges the n shards land on min(n, masters)
// masters, evenly. A directory, the hash <prefix>{a:<id>}:meta, records n;
// the scripts of an un-sharded activity recognise it and answer with n, so a
// Deductor learns the layout from its first call. Shards 0 or 1 keeps the
// un-sharded layout, keys and behaviour exactly: sharding is opt-in.
//
// When to use it: when one activity's Reserve traffic needs more than one
// Redis core after the sold-out cache, rate limiting and coalescing, on a
// Cluster with several masters. On one server it only adds calls. On the
// 3-master test Cluster, 3 shards cut the busiest master's CPU per
// reservation to about 0.35-0.39 of one slot's (BENCHMARKS.md at the
// repository root); 6 shards on 3 masters cannot go below 1/3. Coalesced
// calls are divided among the shards: batches about n times smaller.
//
// A buyer's shard is splitmix64(u) mod n, u being the int64 a canonical
// decimal user ID spells or the FNV-1a hash of any other ID, so all of a buyer's
// reservations live in one slot, which decides the per-user limit exactly as
// an un-sharded activity does. Reserve and [Deductor.Held] ask that shard
// only; [Deductor.Release], [Deductor.Lookup], [Deductor.Remaining],
// [Deductor.Stats], [Deductor.Freeze], [Deductor.Unfreeze] and
// [Deductor.Rebuild] ask every shard at once (the reservation ID does not name
// its shard: Release asks every shard in probe mode, which writes nothing
// where the ID is absent, and tombstones an ID no shard holds in every
// shard, so its late Reserve deducts nothing on whatever shard).
// [Deductor.Reservations] walks the shards in turn. A reservation ID reused for
// another user is [ErrIDConflict] only when both users hash to the same
// shard.
//
// Borrowing. When the buyer's shard has fewer units than asked, Reserve
// reads every shard and moves units from the fullest ones to its own (half
// of a lender's stock, rounded up, at least what it needs), then asks again,
// up to 4 rounds; one borrow per shard runs at a time in a process, the
// other buyers of that shard wait for it. No unit is stranded while a buyer
// wants it, and sold out is declared only when every shard is empty: on
// SoldOut, Result.Remaining is what the borrow saw in all shards (units in
// transfer included), and the in-process sold-out flag is set only when it
// is 0. When the other units are in frozen shards, or a shard is missing
// (lost: its units are unknown), the answer is [Frozen], not SoldOut;
// a borrow that could not read a shard and moved nothing fails with
// [ErrUnavailable].
//
// Fairness across shards: within a shard arrival order decides, as without
// sharding; across shards it is close, not exact. A buyer whose shard is
// empty waits one borrow (a few round trips) while buyers of a shard with
// stock are served at once, and near the end a buyer can be refused (4
// rounds lost to other buyers of its shard) while units remain elsewhere:
// SoldOut with Remaining > 0, which sets no flag. Skew costs transfers, not
// units.
//
// The transfer protocol. One script cannot touch two slots, so a transfer
// is three atomic steps, each on one shard: (1) give.lua on the lender takes
// q units out of its stock into a pending record xout[id] (out += q), id
// random, the record naming the borrower and the borrower's epoch; (2)
// credit.lua on the borrower applies it, idempotently by id, if it holds no
// decision for id yet and still has that epoch: stock += q, in += q,
// xin[id] = A; (3) settle.lua on the lender deletes the record, and refunds
// the units (out -= q) if the borrower voided it. The borrower's xin[id] is
// the one decision: once A or V it never changes. A transfer cut short is
// finished by the recovery: it voids the transfer at the borrower (which
// answers "applied" if it was, else records V, so that a late step 2 credits
// nothing) and settles it at the lender accordingly. So at every moment
// Σ remaining + Σ held + in transfer = the loaded stock, in transfer being
// Σ out - Σ in ([Stats.InTransfer]). A borrow finishes the transfers older
// than the grace ([WithTransferGrace], 2s, on Redis TIME) before it decides
// that the other shards are empty; each [Preloader] pass finishes those of
// its sharded activities; [Deductor.SettleTransfers] finishes all at once.
// Every step increments its shard's seq and is judged by the fence.
//
// A shard's loss. The fence (below) runs per shard, each with its own epoch
// and seq. A Deductor that sees a shard lost or rolled back answers that
// shard's buyers Frozen, freezes that shard and calls [WithOnLoss] (the
// reason names the shard); the other shards keep selling, and neither lend
// to nor borrow from a frozen shard. The lost shard's share cannot be
// recomputed while the others sell, so recovery is per activity: a
// [Preloader] with [WithRecovery] freezes every shard and, once the
// database is ready, rebuilds all of them (each live reservation in its
// buyer's shard, the units left split evenly, pending transfers dropped;
// every shard stays frozen until all are written).
//
// Layout. [Deductor.Load] writes the shards, then the directory
// (set-if-absent in any layout; a load cut short is completed by the next
// Load). [Deductor.Reset] and Rebuild may change the number of shards: the
// old shards are frozen, the new layout written, the old shards dropped; a
// Deductor that knew the old layout reads the directory again when a shard
// it asks is gone, before judging that with the fence, so it is not
// reported as a loss.
//
// # Redis data loss
//
// Redis is fast, not durable: a restart without persistence, a failover to
// a replica that missed the last writes, or a restore of an older snapshot
// loses or rolls back reservations, and a set-if-absent Load would then
// reopen the sale at full stock. The package fences that:
//
//   - The meta hash carries an epoch (a random integer in [1, 2^52) from
//     Go, new at each Load, Reset and Rebuild), seq (incremented by every
//     reservation, release and tombstone), born (the Redis time the epoch
//     was created), origin (Load, Reset, Rebuild or recovery placeholder)
//     and frozen. reserve.lua and release.lua return them with every reply.
//   - A Deductor remembers, per activity, the epoch and the highest seq it
//     has seen, and judges each reply against its knowledge when the call
//     was sent (replies of concurrent calls arrive in any order; a call sent
//     after seq s was seen runs after it). Same epoch with a lower seq, an
//     older epoch, a newer epoch made by Load before the old copy's expiry,
//     or "not loaded" before that expiry mean the data was lost or rolled
//     back: that call answers [Frozen] (never Reserved from a possibly lost ledger), the Deductor
//     freezes the activity (best effort) and calls the [WithOnLoss] hook
//     once. A newer epoch made by Reset, Rebuild or a recovery placeholder
//     is a deliberate replacement and is adopted; keys gone at or after
//     their expiry are the normal end of a sale.
//   - Frozen: reserve.lua answers [Frozen] for every new request (replays
//     of existing entries still answer from the ledger); Release works.
//     [Deductor.Freeze] and [Deductor.Unfreeze] set and clear it by hand.
//   - [Deductor.Rebuild] writes the activity again from the truth in one
//     script call, only when its meta is absent or frozen ([ErrLive]
//     otherwise): stock = total - the live quantities, buyers and one held
//     ledger entry per live reservation, a new epoch, seq 0, not frozen.
//     Ten thousand live reservations fit in one call.
//   - A [Preloader] with [WithRecovery] asks the caller's recovery for an
//     activity that is absent or frozen; while it is not ready (the
//     pipeline still has reservations or releases in flight) the activity
//     stays frozen, with a frozen placeholder (stock 0) written if the keys
//     are gone, so buyers get [Frozen], not [NotLoaded]; once ready it calls
//     Rebuild with the live reservations. A never-loaded activity has none,
//     so this is also its first load.
//   - [Deductor.ReleaseReserved] releases a reservation the caller knows
//     was made (its order exists, by ReservedBy): a ledger without the
//     entry, in a copy created at or before ReservedBy, lost it. It writes
//     no tombstone (which would bump seq and hide the loss), freezes the
//     activity, calls WithOnLoss once per copy and answers [ErrLost]; in a
//     copy created later (a Rebuild since) it answers [ReleaseRebuilt].
//
// What is detected: a wipe or a reload at full stock, seen by any Deductor
// that saw the activity before; a rollback seen by a Deductor that saw the
// newer writes. What is not: a loss that no running Deductor saw before
// (a process started after it has nothing to compare with; the keys simply
// look new, or absent until the next load); a rollback to a state newer than
// anything a Deductor had seen; a copy whose meta predates the fence (epoch
// 0). Without WithRecovery a Preloader still uses set-if-absent Load: after
// a loss that nobody noticed it reopens the sale at full stock, and oversell
// is possible. The caller supplies the truth: the live reservations per
// activity (orders created or paid) and whether anything is in flight.
// Calls in flight when a loss happens may still be answered from the lost
// copy until the freeze lands; the one that detects it has run on that copy
// too (its entry is there) but is answered Frozen. A Rebuild from the
// database drops both kinds that did not become orders.
//
// # Variants
//
// [Activity.Variants] splits a sale into keyed sub-stocks (sizes, colours,
// capacities). Each variant is a ledger of its own, with the keys of an
// activity under the activity's hash tag:
// "<prefix>{a:<id>}:v:<variant>:meta|buyers|resv|ever|adj", beside the
// activity's "<prefix>{a:<id>}:vars" (the variant list and the per-user
// limit over all variants). A variant is addressed by the activity string
// [VariantOf](id, variant) = "<id>/<variant>" ('/' is outside ValidID's
// alphabet) wherever an activity ID is taken, so everything that holds for
// an activity holds per variant: no oversell, idempotence by reservation
// ID, conservation (remaining + held = total ± adjustments, per variant),
// the data-loss fence (each variant has its epoch and seq; a lost variant
// is frozen alone), Pause and Resume, Adjust (a top-up or withdrawal of one
// variant), Freeze, Rebuild (one variant at a time), the sold-out cache
// (sold out per variant; the activity is sold out overall when
// [Deductor.Variants] shows every variant at 0) and the ledger the
// reconciler reads ([Deductor.Reservations] of the variant).
//
// The activity's plain ID answers for the whole sale where that has a
// meaning. [Deductor.SoldOut], [Deductor.SoldOutFor] and
// [Deductor.SoldOutForPrefix] of it read every variant's in-process flag
// (no Redis call, no allocation): sold out when this process refuses every
// variant of the list it last learnt (a variant's Reserve, Variants or Held
// learn it), and a reservation ID or prefix is refused only when no
// variant's ledger held it; a process that has not learnt the list answers
// false. A variant's flag clears as an activity's does (a release or
// top-up of that variant, its expiry), and a Reset in this process drops
// the flags of the old and the new list's variants; a Reset elsewhere is
// seen as for an activity (its variants' flags are stale until the
// re-check). [Deductor.Held] of it is the buyer's units over all its
// variants, one read-only script call (vheld.lua) once the list is known.
//
// A variant's Reserve runs reserve_lines.lua with one line: the variant's
// own checks as reserve.lua makes them (its per-user limit, default the
// activity's), then the activity's per-user limit over all its variants
// (the buyer's held units summed over the variants' buyers hashes, all in
// one slot). An activity loaded without Variants is today's layout and
// runs reserve.lua exactly as before (a single-variant sale needs no
// Variants). Coalescing does not batch variant Reserves; a sale with
// variants is not sharded. NoRebuy holds per variant; the activity's limit
// counts the units held now. Load writes the vars hash first, then each
// variant (set-if-absent each, so a Load cut short is completed by the
// next); Reset overwrites both (a variant it drops is off sale, answering
// [NotLoaded], though its keys stay until they expire); Rebuild and the
// Preloader's recovery take
// one variant at a time (Activity.ID = VariantOf(...)).
//
// # Multi-line reservations
//
// [Deductor.ReserveLines] reserves a cart ([Lines]) for one buyer, all or
// nothing, idempotent by its reservation ID; line i is an ordinary ledger
// entry "<id>#<i>" of its activity or variant (buyer, quantity, Redis
// time). The variant lines of one activity are one script call (one slot,
// atomic). Lines of different activities (different slots) are reserved
// one step at a time in a fixed order; a refusal releases the steps
// already reserved before answering, so a returned refusal holds nothing.
// A kill between steps (or a Redis failure) leaves the first steps held as
// ordinary entries with no order: a retry with the same ID continues, and
// otherwise [Deductor.ReleaseLines] or the reconciler (no order for the
// entry: Release) gives them back; ReleaseLines tombstones the lines never
// reserved, so a late step deducts nothing. Between the steps other buyers
// may see the first lines held; never more than the stock.
//
// A hold's expiry is counted by the order pipeline from the entry's time
// (ReservedAt). [Deductor.ExtendLines] moves that time forward once per
// line, for the buyer only (extend.lua); a second extension changes
// nothing.
//
// # Limit groups
//
// A [Line] with a Group counts against the buyer's allowance in that limit
// group: at most GroupLimit units of a product over all of its sales. The
// group has its own hash tag, "<prefix>{g:<group>}:held|resv" (a counter
// per buyer and a ledger by line reservation ID), so it may live on
// another Cluster master than any sale. ReserveLines takes the allowances
// first, all of a cart's lines in one group in one call (group_take.lua:
// held + their units <= GroupLimit, all or nothing, idempotent by each
// line's ID; two concurrent carts of one buyer never each hold part of
// their lines and refuse each other), then reserves the stock, and gives the allowance back
// on a refusal and in ReleaseLines (group_give.lua, exactly once; an ID
// never taken is tombstoned). A buyer can therefore never hold more than
// GroupLimit over the group, whatever runs concurrently on whatever slot;
// a crash between the take and the stock errs on the buyer's side (the
// allowance stays taken until ReleaseLines, or SweepGroup — the group's
// reconciler, which gives back every allowance whose line no longer holds
// a unit, tombstoning a line never reserved —, or the group's keys expire
// 30 days after its last take). A Release of one line gives back its
// stock, not its allowance, until a SweepGroup sees the line released. The database side of the
// group limit is the order consumer's: count a buyer's live order lines of
// the group before inserting (see the stock README). The group has a
// data-loss fence of its own, on the activities' rules (below): its keys
// carry an epoch and a write count that every take and give-back returns,
// and a Deductor that sees them go back (a failover to a replica that
// missed takes, the keys wiped) freezes the group: its new takes answer
// Frozen (LinesResult.Group true) while give-backs and replays go on.
// RebuildGroup takes again the allowances of the live lines the database
// lists, over every activity of the group, and lifts the freeze. The fence
// judges only the group calls a Deductor makes, so the database's guard
// stays the cap's last word.
//
// # Redis and Cluster
//
// Redis 7.0 or later (tested on 7.0.15) or miniredis; EVAL scripts only, no
// Functions. The read-only calls (Remaining, Stats, Lookup, Reservations)
// use EVALSHA_RO, so a ClusterClient with ReadOnly or RouteByLatency, or a
// failover client reading from replicas, serves them off the write path
// (the ledger read of the sold-out cache runs on the master: a replica may
// lack the reservation it is there to find). All keys of one activity carry
// the hash tag {a:<id>} (those of one shard of a sharded activity, the
// shard's tag), so every script touches one Cluster slot and the package
// works unchanged on Client, ClusterClient, Ring and failover clients. The
// flip side is that one un-sharded activity is one slot on one shard: a
// single hot sale is bounded by one Redis core (about 46–53k reserve calls
// per second one by one on the reference box, BENCHMARKS.md);
// spread load by refusing early (the sold-out cache, rate limiting in
// front), let [WithCoalescing] decide many reservations per script call, and
// split the sale over several slots with [Activity.Shards] (see Sharding).
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
