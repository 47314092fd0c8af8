package stock

import (
	"context"
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

// maxStates bounds the per-activity knowledge; it only holds activities
// Redis reported as loaded. When full it starts afresh (forgetting only
// weakens loss detection for a while, it never causes a false alarm).
const maxStates = 1024

// state returns what the Deductor knows of activity, or nil.
func (d *Deductor) state(activity int64) *actState {
	if m := d.states.Load(); m != nil {
		return (*m)[activity]
	}
	return nil
}

// remember returns the state of an activity Redis reported as loaded,
// creating it (so activity IDs made up by clients cannot grow the map).
func (d *Deductor) remember(activity int64) *actState {
	if s := d.state(activity); s != nil {
		return s
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.states.Load()
	if old != nil {
		if s, ok := (*old)[activity]; ok {
			return s
		}
	}
	m := make(map[int64]*actState, 8)
	if old != nil && len(*old) < maxStates {
		for k, v := range *old {
			m[k] = v
		}
	}
	s := &actState{keys: d.keys(activity).list()}
	m[activity] = s
	d.states.Store(&m)
	return s
}

// keyList returns the KEYS of an activity, from the state when the activity
// was seen loaded before (saves five allocations per Reserve). The returned
// slice is shared and must not be modified.
func (d *Deductor) keyList(activity int64) []string {
	if s := d.state(activity); s != nil {
		return s.keys
	}
	return d.keys(activity).list()
}

// act carries out a verdict's report: log, freeze (best effort), hook.
func (d *Deductor) act(ctx context.Context, activity int64, v verdict) {
	if v.reason == "" {
		return
	}
	d.o.logger.ErrorContext(ctx, "stock: redis lost or rolled back the activity's data; answering frozen",
		"activity", activity, "reason", v.reason)
	if v.freeze {
		if err := d.Freeze(context.WithoutCancel(ctx), activity); err != nil {
			d.o.logger.WarnContext(ctx, "stock: freeze after data loss failed", "activity", activity, "err", err)
		}
	}
	if d.o.onLoss != nil {
		d.o.onLoss(activity, v.reason)
	}
}

// Freeze freezes a loaded activity: every new Reserve answers [Frozen]
// (replays of existing reservations still answer from the ledger) until
// [Deductor.Unfreeze] or [Deductor.Rebuild]. Release keeps working. It is
// idempotent; the error wraps [ErrNotLoaded] when the activity is not in
// Redis. A Deductor freezes an activity by itself when it detects that
// Redis lost or rolled back its data.
func (d *Deductor) Freeze(ctx context.Context, activity int64) error {
	return d.setFrozen(ctx, activity, true)
}

// Unfreeze lets Reserve decide again for a frozen activity. It is
// idempotent; the error wraps [ErrNotLoaded] when the activity is not in
// Redis. Unfreezing after a detected loss without a [Deductor.Rebuild]
// reopens the sale on the data Redis has left: do it only after checking
// that data against the database.
func (d *Deductor) Unfreeze(ctx context.Context, activity int64) error {
	return d.setFrozen(ctx, activity, false)
}

func (d *Deductor) setFrozen(ctx context.Context, activity int64, frozen bool) error {
	op, arg := "unfreeze", "0"
	if frozen {
		op, arg = "freeze", "1"
	}
	if activity <= 0 {
		return fmt.Errorf("%w: activity ID %d must be > 0", ErrInvalidRequest, activity)
	}
	v, err := freezeScript.Run(ctx, d.rdb, []string{d.keys(activity).meta}, arg).Result()
	if err != nil {
		return classify(op, err)
	}
	n, ok := v.(int64)
	switch {
	case !ok:
		return badReply(op, "reply of type %T", v)
	case n == 0:
		return fmt.Errorf("stock: %s activity %d: %w", op, activity, ErrNotLoaded)
	case n != 1:
		return badReply(op, "status code %d", n)
	}
	d.o.logger.InfoContext(ctx, "stock: activity "+op+"d", "activity", activity)
	return nil
}
