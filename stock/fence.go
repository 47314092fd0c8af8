package stock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// The Redis data-loss fence.
//
// Every copy of an activity's state in Redis carries, in its meta hash, an
// epoch (a random number chosen when the copy is created by Load, Reset,
// Rebuild or a recovery placeholder), born (the Redis time of that
// creation), origin (which of those created it) and seq (the number of
// writes made to it since: reservations, releases, tombstones). reserve.lua
// and release.lua return all of them with every answer.
//
// A Deductor remembers, per activity, the epoch and the highest seq it has
// seen. Before each call it takes a snapshot of that knowledge, and judges
// the reply against the snapshot, not against knowledge updated by calls
// that finished in the meantime: replies of concurrent calls arrive in any
// order, but a call sent after a reply with seq s was read executes after
// that write, so its own reply must show seq >= s. A reply that does not is
// a rollback. The verdicts:
//
//   - same epoch, seq lower than the snapshot's: rolled back (a failover to
//     a replica that missed writes, a restore of an older snapshot);
//   - another epoch, created before the snapshot's (born earlier): rolled
//     back to an older copy;
//   - another, newer epoch created by Load (origin 1) before the old one's
//     expiry: the data was lost and a set-if-absent Load reopened the sale
//     at full stock (created at or after that expiry: a new sale);
//   - another, newer epoch created by Reset, Rebuild or a placeholder: a
//     deliberate replacement; adopted;
//   - not loaded, before the expiry time the Deductor saw (exp, on Redis
//     TIME): the keys were lost. At or after exp it is the normal end of the
//     activity and the Deductor forgets it.
//
// A loss is answered Frozen, reported once (WithOnLoss, the logger) and the
// activity is frozen in Redis (best effort: not when its keys are gone).
// The reply that revealed the loss becomes the new baseline, so a frozen
// and later unfrozen activity is not reported again for the same loss.

// Origins of an epoch (meta field "origin").
const (
	originLoad        = 1 // Load: set-if-absent at full stock
	originReset       = 2 // Reset: admin overwrite
	originRebuild     = 3 // Rebuild from the caller's truth
	originPlaceholder = 4 // frozen placeholder of a recovering Preloader
)

// MaxQuantity is the largest stock, quantity or per-user limit accepted:
// 2^53-1, the largest integer a Lua number (a double) holds exactly.
const MaxQuantity int64 = 1<<53 - 1

// newEpoch returns a random epoch in [1, 2^52).
func newEpoch() int64 { return rand.Int64N(1<<52-1) + 1 }

// fenceReply is the fence part of a script reply.
type fenceReply struct{ epoch, seq, exp, born, origin int64 }

// fenceSnap is a Deductor's knowledge of an activity when a call is sent.
type fenceSnap struct {
	known                      bool
	epoch, seq, exp, born, gen int64
}

// verdict tells the caller of observe what to do with a reply.
type verdict struct {
	frozen bool   // answer Frozen instead of the reply's outcome
	reason string // non-empty: report this loss (first detection only)
	freeze bool   // and freeze the activity in Redis (its meta still exists)
}

// actState is what a Deductor knows about one activity Redis reported as
// loaded. keys is immutable; the rest is guarded by mu.
type actState struct {
	keys []string

	mu                    sync.Mutex
	known                 bool  // epoch, seq, exp, born are set
	lost                  bool  // the keys vanished before exp; answer Frozen
	epoch, seq, exp, born int64 // exp is unix ms on Redis time
	gen                   int64 // bumped by each reported loss
}

func (s *actState) snap() fenceSnap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fenceSnap{known: s.known, epoch: s.epoch, seq: s.seq, exp: s.exp, born: s.born, gen: s.gen}
}

func (s *actState) adopt(r fenceReply) {
	s.known, s.lost = true, false
	s.epoch, s.seq, s.exp, s.born = r.epoch, r.seq, r.exp, r.born
}

// observe judges a reply of a loaded activity against sn, the knowledge
// when the call was sent.
func (s *actState) observe(sn fenceSnap, r fenceReply) verdict {
	if r.epoch == 0 {
		return verdict{} // meta written before the fence existed: nothing to check
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !sn.known:
		// Nothing to compare with when the call was sent.
		if !s.known {
			s.adopt(r)
		} else if s.epoch == r.epoch && r.seq > s.seq {
			s.seq = r.seq
		}
		return verdict{}
	case r.epoch == sn.epoch && r.seq < sn.seq:
		return s.loss(sn, r, fmt.Sprintf("rolled back: epoch %d at seq %d after seq %d was seen", r.epoch, r.seq, sn.seq))
	case r.epoch == sn.epoch:
		if s.epoch == r.epoch && r.seq > s.seq {
			s.seq = r.seq
		}
		if s.epoch == r.epoch && r.exp > s.exp { // a limit group's keys live on after each take
			s.exp = r.exp
		}
		if s.epoch == r.epoch {
			s.lost = false
		}
		return verdict{}
	case r.born < sn.born:
		return s.loss(sn, r, fmt.Sprintf("rolled back: epoch %d (created %s) replaced the newer epoch %d (created %s)",
			r.epoch, msString(r.born), sn.epoch, msString(sn.born)))
	case r.origin == originLoad && (sn.exp == 0 || r.born < sn.exp):
		return s.loss(sn, r, fmt.Sprintf("lost: epoch %d was replaced by a Load of epoch %d at full stock", sn.epoch, r.epoch))
	default:
		// A newer copy made on purpose (Reset, Rebuild, recovery
		// placeholder), or loaded after the old one expired as planned.
		if !s.known || s.epoch == sn.epoch || r.born > s.born {
			s.adopt(r)
		} else if s.epoch == r.epoch && r.seq > s.seq {
			s.seq = r.seq
		}
		return verdict{}
	}
}

// loss records a detected loss: the reply becomes the new baseline. Only the
// first of the calls that were in flight when it happened reports it.
func (s *actState) loss(sn fenceSnap, r fenceReply, reason string) verdict {
	s.adopt(r)
	if s.gen != sn.gen {
		return verdict{frozen: true} // reported by a concurrent call
	}
	s.gen++
	return verdict{frozen: true, reason: reason, freeze: true}
}

// observeGone judges a "not loaded" reply; now is Redis now (ms).
func (s *actState) observeGone(sn fenceSnap, now int64) verdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.known:
		return verdict{}
	case s.exp > 0 && now >= s.exp:
		s.known, s.lost = false, false // expired as planned: forget it
		return verdict{}
	case s.lost:
		return verdict{frozen: true}
	case !sn.known || sn.gen != s.gen:
		// Learnt of the activity (or of a loss) after the call was sent:
		// the call may have run before the load.
		return verdict{}
	}
	s.lost = true
	s.gen++
	return verdict{frozen: true, reason: fmt.Sprintf("lost: the keys of epoch %d (seq %d) are gone before their expiry %s",
		s.epoch, s.seq, msString(s.exp))}
}

func msString(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// maxStates bounds the per-ledger knowledge; it only holds ledgers Redis
// reported as loaded. When full it starts afresh (forgetting only weakens
// loss detection for a while, it never causes a false alarm).
const maxStates = 1024

// state returns what the Deductor knows of ledger u, or nil.
func (d *Deductor) state(u unit) *actState {
	if m := d.states.Load(); m != nil {
		return (*m)[u]
	}
	return nil
}

// remember returns the state of a ledger Redis reported as loaded, creating
// it (so activity IDs made up by clients cannot grow the map).
func (d *Deductor) remember(u unit) *actState {
	if s := d.state(u); s != nil {
		return s
	}
	k := d.unitKeys(u).list()
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.states.Load()
	if old != nil {
		if s, ok := (*old)[u]; ok {
			return s
		}
	}
	m := make(map[unit]*actState, 8)
	if old != nil && len(*old) < maxStates {
		for k, v := range *old {
			m[k] = v
		}
	}
	s := &actState{keys: k}
	m[u] = s
	d.states.Store(&m)
	return s
}

// snapOf returns the state of u (nil when not known yet) and the snapshot of
// it a call takes before it is sent.
func (d *Deductor) snapOf(u unit) (*actState, fenceSnap) {
	st := d.state(u)
	if st == nil {
		return nil, fenceSnap{}
	}
	return st, st.snap()
}

// observeUnit judges the fence of a reply from ledger u (loaded) against
// sn and carries out the verdict; it reports whether the reply revealed or
// followed a loss.
func (d *Deductor) observeUnit(ctx context.Context, u unit, st *actState, sn fenceSnap, f fenceReply) bool {
	if st == nil {
		st = d.remember(u)
	}
	v := st.observe(sn, f)
	d.act(ctx, u, v)
	return v.frozen
}

// unitKeys returns the keys of ledger u.
func (d *Deductor) unitKeys(u unit) keys {
	if u.n <= 1 {
		return activityKeys(d.o.prefix, u.activity)
	}
	if l := d.layoutOf(u.activity); l != nil && l.n == u.n {
		return l.keys[u.k]
	}
	return shardKeys(d.o.prefix, u.activity, u.n, u.k)
}

// keyList returns the KEYS of ledger u, from its state when it was seen
// loaded before (saves five allocations per Reserve). The returned slice is
// shared and must not be modified.
func (d *Deductor) keyList(u unit) []string {
	if s := d.state(u); s != nil {
		return s.keys
	}
	if u.n > 1 {
		if l := d.layoutOf(u.activity); l != nil && l.n == u.n {
			return l.lists[u.k]
		}
	}
	return d.unitKeys(u).list()
}

// act carries out a verdict's report: log, freeze (best effort: the
// activity, or the one shard whose data was lost), hook.
func (d *Deductor) act(ctx context.Context, u unit, v verdict) {
	if v.reason == "" {
		return
	}
	reason := v.reason
	if u.n > 1 {
		reason = fmt.Sprintf("shard %d of %d: %s", u.k, u.n, reason)
	}
	d.o.logger.ErrorContext(ctx, "stock: redis lost or rolled back the activity's data; answering frozen",
		"activity", u.activity, "shard", u.k, "shards", u.n, "reason", reason)
	if v.freeze {
		var err error
		if u.n > 1 {
			_, err = d.freezeUnit(context.WithoutCancel(ctx), u, d.unitKeys(u).meta, true)
		} else {
			err = d.Freeze(context.WithoutCancel(ctx), u.activity)
		}
		if err != nil {
			d.o.logger.WarnContext(ctx, "stock: freeze after data loss failed", "activity", u.activity, "shard", u.k, "err", err)
		}
	}
	if d.o.onLoss != nil {
		d.o.onLoss(ctx, u.activity, reason)
	}
}

// Freeze freezes a loaded activity: every new Reserve answers [Frozen]
// (replays of existing reservations still answer from the ledger) until
// [Deductor.Unfreeze] or [Deductor.Rebuild]. Release keeps working. It is
// idempotent; the error wraps [ErrNotLoaded] when the activity is not in
// Redis. A Deductor freezes an activity by itself when it detects that
// Redis lost or rolled back its data (only the shard concerned, for a
// sharded activity). A sharded activity is frozen shard by shard; a shard
// missing from Redis is reported in an error wrapping ErrNotLoaded, after
// the others were frozen.
func (d *Deductor) Freeze(ctx context.Context, activity string) error {
	return d.setFrozen(ctx, activity, true)
}

// Unfreeze lets Reserve decide again for a frozen activity (every shard of
// a sharded one). It is idempotent; the error wraps [ErrNotLoaded] when the
// activity is not in Redis. Unfreezing after a detected loss without a
// [Deductor.Rebuild] reopens the sale on the data Redis has left: do it
// only after checking that data against the database.
func (d *Deductor) Unfreeze(ctx context.Context, activity string) error {
	return d.setFrozen(ctx, activity, false)
}

func (d *Deductor) setFrozen(ctx context.Context, activity string, frozen bool) error {
	return d.setFlag(ctx, activity, "frozen", frozen)
}

// Pause pauses a loaded activity: every new Reserve answers [Paused]
// ("paused, come back later", not sold out) until [Deductor.Resume].
// Checked inside the reserve scripts, so it takes effect at once for every
// process: a Reserve that reaches Redis after Pause returned reserves
// nothing. A replay of an existing reservation (same reservation ID) still
// answers from the ledger; Release, [Deductor.Adjust] and the reads keep
// working; a paused shard of a sharded activity lends no units. A process
// that had already learnt the activity is sold out keeps answering
// SoldOut in-process: sold out still answers sold out.
//
// The paused flag is separate from the frozen one ([Deductor.Freeze], set
// on a detected data loss): Resume never unfreezes, Unfreeze never
// resumes. It is idempotent; the error wraps [ErrNotLoaded] when the
// activity is not in Redis. A sharded activity is paused shard by shard
// (not one atomic step: for a moment some shards may still sell, and a
// Reserve whose shard must borrow from a paused one answers Paused); a
// missing shard is reported in an error wrapping ErrNotLoaded, after the
// others were paused. Reset and Rebuild write the activity unpaused.
func (d *Deductor) Pause(ctx context.Context, activity string) error {
	return d.observeFlag(ctx, StagePause, activity, "paused", true)
}

// Resume lets Reserve decide again for a paused activity (every shard of a
// sharded one). It is idempotent and leaves the frozen flag alone; the
// error wraps [ErrNotLoaded] when the activity is not in Redis.
func (d *Deductor) Resume(ctx context.Context, activity string) error {
	return d.observeFlag(ctx, StageResume, activity, "paused", false)
}

// flagOp names the operations on each flag for messages.
func flagOp(field string, on bool) string {
	switch {
	case field == "paused" && on:
		return "pause"
	case field == "paused":
		return "resume"
	case on:
		return "freeze"
	}
	return "unfreeze"
}

// setFlag sets or clears field ("frozen" or "paused") of the activity, or
// of every shard of a sharded one.
func (d *Deductor) setFlag(ctx context.Context, activity, field string, on bool) error {
	op := flagOp(field, on)
	if err := checkActivity(activity); err != nil {
		return err
	}
	_, err := onLayout(d, activity, func(l *layout) (struct{}, *layout, error) {
		if l == nil {
			code, err := d.flagUnit(ctx, plain(activity), d.keys(activity).meta, field, on)
			switch {
			case err != nil:
				return struct{}{}, nil, err
			case code == metaDirectory:
				next, err := d.refreshLayout(ctx, activity)
				return struct{}{}, next, err
			case code == metaAbsent:
				return struct{}{}, nil, fmt.Errorf("stock: %s activity %s: %w", op, activity, ErrNotLoaded)
			}
			return struct{}{}, nil, nil
		}
		return struct{}{}, l, d.flagLayout(ctx, l, field, on)
	})
	if err == nil {
		d.o.logger.InfoContext(ctx, "stock: activity "+op+"d", "activity", activity)
	}
	return err
}

// freezeLayout sets or clears the frozen flag of every shard of l.
func (d *Deductor) freezeLayout(ctx context.Context, l *layout, frozen bool) error {
	return d.flagLayout(ctx, l, "frozen", frozen)
}

// flagLayout sets or clears field of every shard of l. A shard that is not
// loaded is reported (ErrNotLoaded) after the others were set.
func (d *Deductor) flagLayout(ctx context.Context, l *layout, field string, on bool) error {
	op := flagOp(field, on)
	codes := make([]metaKind, l.n)
	errs := make([]error, l.n)
	fanOut(l.n, func(k int) { codes[k], errs[k] = d.flagUnit(ctx, l.unit(k), l.keys[k].meta, field, on) })
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var missing []int
	for k, c := range codes {
		if c != metaLoaded {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("stock: %s activity %s: shards %v of %d: %w", op, l.activity, missing, l.n, ErrNotLoaded)
	}
	return nil
}

// freezeUnit runs freeze.lua on one meta key for the frozen flag.
func (d *Deductor) freezeUnit(ctx context.Context, u unit, meta string, frozen bool) (metaKind, error) {
	return d.flagUnit(ctx, u, meta, "frozen", frozen)
}

// flagUnit runs freeze.lua on one meta key: metaLoaded (the flag is set),
// metaAbsent (not loaded) or metaDirectory (the key is a sharded
// activity's directory; nothing set).
func (d *Deductor) flagUnit(ctx context.Context, u unit, meta, field string, on bool) (metaKind, error) {
	op, arg := flagOp(field, on), "0"
	if on {
		arg = "1"
	}
	v, err := freezeScript.Run(ctx, d.rdb, []string{meta}, arg, field).Result()
	if err != nil {
		return 0, classify(op, err)
	}
	x, ok := v.(int64)
	n := metaKind(x)
	switch {
	case !ok:
		return 0, badReply(op, "reply of type %T", v)
	case n < metaAbsent || n > metaDirectory || n == metaDirectory && u.n > 1:
		return 0, badReply(op, "status code %d", n)
	}
	return n, nil
}
