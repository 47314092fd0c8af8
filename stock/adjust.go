package stock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Top-ups and withdrawals (Deductor.Adjust).
//
// An adjustment moves an activity's stock and total by the same delta in
// one atomic script call (adjust.lua) and records it in the activity's
// adjustment log, the hash "<prefix>{a:<id>}:adj" (same hash tag as the
// rest of the activity; adjustmentID -> "delta:atMs:stockAfter:totalAfter:
// requested"; it expires with the activity). The ID makes it idempotent: a
// second call with the same ID answers the first outcome and writes
// nothing. Like a reservation it increments the fence's seq, so a Redis
// rollback that loses an adjustment is detected like one that loses a
// reservation. After every adjustment, at every quiet moment:
//
//	total = loaded stock + Σ top-ups − Σ withdrawals = remaining + held (+ in transfer)
//
// A sharded activity is adjusted shard by shard, each step one atomic,
// idempotent call under the derived ID "<id>#<k>" in shard k's log: a
// top-up is split over the shards as Load splits the stock; a withdrawal
// takes from the shards in order, each step as many units as the shard
// holds unreserved, up to what is still wanted.

// AdjustParams asks [Deductor.Adjust] to add (Delta > 0) or withdraw
// (Delta < 0) units of Activity, once per ID.
type AdjustParams struct {
	Activity string // activity ID (see ValidID)
	// ID names the adjustment: 1..128 bytes (the reservation ID limit, see
	// WithMaxReservationIDBytes), unique per adjustment of the activity.
	ID string
	// Delta is the units to add (> 0) or to withdraw (< 0); not 0, |Delta|
	// <= MaxQuantity. A withdrawal takes only units nobody holds.
	Delta int64
}

// Level is an activity's units at one moment.
type Level struct {
	Remaining int64 // units nobody holds (for a sharded activity: the shards' stock, without units in transfer)
	Total     int64 // loaded stock + top-ups − withdrawals
}

// Adjustment is the outcome of [Deductor.Adjust], and one entry of an
// activity's adjustment log as read by [Deductor.Adjustments] (ID, Delta,
// Applied and At; a sharded activity's steps summed per ID; Before and
// After are not logged and stay zero there).
type Adjustment struct {
	ID    string
	Delta int64 // the delta asked
	// Applied is the units added (> 0) or withdrawn (< 0): Delta, except
	// for a sharded withdrawal that found fewer units than a first read
	// showed (the error then wraps ErrInsufficient), and 0 when nothing
	// was written.
	Applied int64
	// Before and After are the activity's levels around the adjustment
	// (for a replay: around the first one). For a sharded activity, sums
	// over the shards, each read at its own step (not one snapshot).
	Before, After Level
	// At is the Redis time of the adjustment (of its first step).
	At time.Time
	// Replayed is true when nothing was written by this call: the ID had
	// been applied before, and this is its outcome.
	Replayed bool
}

// Adjust adds units to a loaded activity (Delta > 0) or withdraws units
// that nobody holds (Delta < 0), as an entry of the activity's adjustment
// log, never as a blind overwrite: the meta hash's stock and total move by
// Delta in one atomic step, which is recorded under p.ID and increments the
// data-loss fence's seq. A second call with the same ID answers the first
// outcome with Replayed set and changes nothing; the same ID with another
// Delta is an error wrapping [ErrIDConflict]. A top-up publishes on
// the release channel, so that processes which had learnt the activity is
// sold out ask Redis again (and this process clears its own flag).
//
// A withdrawal of more units than remain is refused with an error
// wrapping [ErrInsufficient], nothing written. Paused activities are
// adjusted as usual (pause, top up, resume); a frozen one is refused
// ([ErrFrozen]: its data may be lost; Rebuild it with the new total).
// Other errors: bad input ([ErrInvalidArgument]), [ErrNotLoaded],
// [ErrUnavailable] (retry with the same ID: it is applied at most once).
//
// A sharded activity is adjusted shard by shard (see "Adjusting a live
// sale" in the package doc): a top-up split as Load splits the stock, a
// withdrawal taken from the shards in order. A withdrawal first reads
// every shard and is refused, nothing written, when together they hold too
// few units; a Reserve racing with it can still leave fewer than it read:
// it then withdraws what the shards held, reports it in Applied and
// returns an error wrapping ErrInsufficient (a retry with the same ID
// answers the same). A step that fails (frozen shard, Redis error) leaves
// the others applied: retry with the same ID to finish.
func (d *Deductor) Adjust(ctx context.Context, p AdjustParams) (Adjustment, error) {
	var start time.Time
	if d.o.obs != nil {
		start = time.Now()
	}
	a, err := d.adjust(ctx, p)
	if a.Applied > 0 && !a.Replayed {
		d.clearSoldOut(ctx, p.Activity)
	}
	if err != nil {
		d.o.logger.WarnContext(ctx, "stock: adjust failed", "activity", showID(p.Activity), "adjustment", p.ID,
			"delta", p.Delta, "applied", a.Applied, "err", err)
	} else if !a.Replayed {
		d.o.logger.InfoContext(ctx, "stock: activity adjusted", "activity", p.Activity, "adjustment", p.ID,
			"delta", p.Delta, "remaining", a.After.Remaining, "total", a.After.Total)
	}
	if d.o.obs != nil {
		d.observeAdjust(ctx, start, p.Activity, a, err)
	}
	return a, err
}

func (d *Deductor) validateAdjust(p AdjustParams) error {
	if err := checkActivity(p.Activity); err != nil {
		return err
	}
	switch {
	case p.ID == "":
		return fmt.Errorf("%w: empty adjustment ID", ErrInvalidArgument)
	case len(p.ID) > d.o.maxIDBytes:
		return fmt.Errorf("%w: adjustment ID longer than %d bytes", ErrInvalidArgument, d.o.maxIDBytes)
	case p.Delta == 0:
		return fmt.Errorf("%w: adjustment delta 0", ErrInvalidArgument)
	case p.Delta > MaxQuantity || p.Delta < -MaxQuantity:
		return fmt.Errorf("%w: adjustment delta %d beyond ±(2^53-1)", ErrInvalidArgument, p.Delta)
	}
	return nil
}

func (d *Deductor) adjust(ctx context.Context, p AdjustParams) (Adjustment, error) {
	if err := d.validateAdjust(p); err != nil {
		return Adjustment{}, err
	}
	return onLayout(d, p.Activity, func(l *layout) (Adjustment, *layout, error) {
		if l != nil {
			return d.adjustSharded(ctx, l, p)
		}
		r, err := d.adjustUnit(ctx, plain(p.Activity), d.keys(p.Activity), p.ID, p.Delta, p.Delta, "exact")
		if err != nil {
			return Adjustment{}, nil, err
		}
		if r.dir > 0 {
			next, err := d.learn(p.Activity, r.dir)
			return Adjustment{}, next, err
		}
		a := Adjustment{ID: p.ID, Delta: p.Delta, Applied: r.delta, Before: r.before, After: r.after,
			At: fromMilli(r.at), Replayed: r.replayed}
		return a, nil, r.err(p)
	})
}

// adjReply is one ledger's answer to adjust.lua.
type adjReply struct {
	code          adjustCode
	delta         int64
	before, after Level
	replayed      bool
	at            int64
	dir           int64 // the number of shards when the key asked was a directory
}

// err is the error of a step's code (nil for applied and peek).
func (r adjReply) err(p AdjustParams) error {
	switch r.code {
	case adjustApplied, adjustPeeked:
		return nil
	case adjustShort:
		return fmt.Errorf("stock: adjust activity %s: withdraw %d units: %w (%d remain)", p.Activity, -p.Delta,
			ErrInsufficient, r.before.Remaining)
	case adjustNotLoaded:
		return fmt.Errorf("stock: adjust activity %s: %w", p.Activity, ErrNotLoaded)
	case adjustFrozen:
		return fmt.Errorf("stock: adjust activity %s: %w", p.Activity, ErrFrozen)
	case adjustConflict:
		return fmt.Errorf("%w: adjustment ID %q of activity %s was applied with another delta", ErrIDConflict,
			p.ID, p.Activity)
	case adjustOverflow:
		return fmt.Errorf("%w: adjustment of activity %s by %d would take its stock or total beyond 2^53-1",
			ErrInvalidArgument, p.Activity, p.Delta)
	}
	return badReply("adjust", "status code %d", r.code)
}

// adjustUnit runs adjust.lua on one ledger and judges its fence.
func (d *Deductor) adjustUnit(ctx context.Context, u unit, k keys, id string, delta, requested int64, mode string) (adjReply, error) {
	st, sn := d.snapOf(u)
	vals, err := adjustScript.Run(ctx, d.rdb, []string{k.meta, k.adj}, id, delta, requested, mode, d.channel, u.activity).Slice()
	if err != nil {
		return adjReply{}, classify("adjust", err)
	}
	n, err := ints("adjust", vals, 13)
	if err != nil {
		return adjReply{}, err
	}
	code := adjustCode(n[0])
	switch code {
	case adjustDirectory:
		if u.n > 1 || !isShardCount(n[1]) {
			return adjReply{}, badReply("adjust", "%s of activity %s answered as a directory of %d shards",
				ledgerName(u), u.activity, n[1])
		}
		return adjReply{dir: n[1]}, nil
	case adjustNotLoaded:
		return adjReply{code: adjustNotLoaded}, nil
	case adjustApplied, adjustShort, adjustPeeked, adjustFrozen, adjustConflict, adjustOverflow:
		d.observeUnit(ctx, u, st, sn, fenceReply{epoch: n[8], seq: n[9], exp: n[10], born: n[11], origin: n[12]})
	default:
		return adjReply{}, badReply("adjust", "status code %d", n[0])
	}
	return adjReply{code: code, delta: n[1], before: Level{n[2], n[3]}, after: Level{n[4], n[5]},
		replayed: n[6] == replyTrue, at: n[7]}, nil
}

// shardAdjID is the ID of shard k's step of adjustment id.
func shardAdjID(id string, k int) string { return id + "#" + strconv.Itoa(k) }

// adjustSharded adjusts a sharded activity shard by shard.
func (d *Deductor) adjustSharded(ctx context.Context, l *layout, p AdjustParams) (Adjustment, *layout, error) {
	rs := make([]adjReply, l.n)
	errs := make([]error, l.n)
	if p.Delta > 0 {
		parts := split(p.Delta, l.n)
		fanOut(l.n, func(k int) {
			mode := "exact"
			if parts[k] == 0 {
				mode = "peek" // nothing to add here: only read the shard's level
			}
			rs[k], errs[k] = d.adjustUnit(ctx, l.unit(k), l.keys[k], shardAdjID(p.ID, k), parts[k], p.Delta, mode)
		})
	} else {
		fanOut(l.n, func(k int) {
			rs[k], errs[k] = d.adjustUnit(ctx, l.unit(k), l.keys[k], shardAdjID(p.ID, k), 0, p.Delta, "peek")
		})
	}
	if next, err := d.adjustCheck(ctx, l, p, rs, errs); err != nil || next != l {
		return Adjustment{}, next, err
	}
	if p.Delta > 0 {
		return sumAdjust(p, rs), l, nil
	}
	a, err := d.withdrawSharded(ctx, l, p, rs)
	return a, l, err
}

// withdrawSharded is the second pass of a withdrawal from the shards of l,
// given their first answers rs (peeks, or steps of an earlier attempt with
// this ID): it takes what is still missing, shard by shard, in "upto"
// mode.
func (d *Deductor) withdrawSharded(ctx context.Context, l *layout, p AdjustParams, rs []adjReply) (Adjustment, error) {
	// What earlier attempts with this ID took, and what the shards hold.
	var done, avail int64
	seen := false
	for _, r := range rs {
		if r.code == adjustApplied {
			seen = true
			done += r.delta
		} else {
			avail += r.before.Remaining
		}
	}
	if !seen && avail < -p.Delta {
		a := sumAdjust(p, rs)
		return a, fmt.Errorf("stock: adjust activity %s: withdraw %d units: %w (%d remain in %d shards; nothing written)",
			p.Activity, -p.Delta, ErrInsufficient, avail, l.n)
	}
	if d.afterPeek != nil {
		d.afterPeek()
	}
	need := -p.Delta + done // done <= 0
	var stepErrs []error
	for k := range l.n {
		if need <= 0 {
			break
		}
		if rs[k].code == adjustApplied {
			continue
		}
		r, err := d.adjustUnit(ctx, l.unit(k), l.keys[k], shardAdjID(p.ID, k), -need, p.Delta, "upto")
		if err == nil && r.code != adjustApplied {
			err = r.err(p)
		}
		if err != nil {
			stepErrs = append(stepErrs, fmt.Errorf("shard %d of %d: %w", k, l.n, err))
			continue
		}
		rs[k] = r
		need += r.delta
	}
	a := sumAdjust(p, rs)
	switch {
	case need > 0 && len(stepErrs) > 0:
		return a, fmt.Errorf("stock: adjust activity %s: withdrew %d of %d units: %w", p.Activity, -a.Applied, -p.Delta,
			errors.Join(stepErrs...))
	case need > 0:
		return a, fmt.Errorf("stock: adjust activity %s: withdrew %d of %d units, the shards held no more: %w",
			p.Activity, -a.Applied, -p.Delta, ErrInsufficient)
	}
	return a, nil
}

// adjustCheck turns the shards' first answers into an error (or a new
// layout when a shard is missing because the layout changed).
func (d *Deductor) adjustCheck(ctx context.Context, l *layout, p AdjustParams, rs []adjReply, errs []error) (*layout, error) {
	var out []error
	missing := false
	for k, r := range rs {
		err := errs[k]
		if err == nil && r.code != adjustApplied && r.code != adjustPeeked {
			if r.code == adjustNotLoaded {
				missing = true
			}
			err = r.err(p)
		}
		if err != nil {
			out = append(out, fmt.Errorf("shard %d of %d: %w", k, l.n, err))
		}
	}
	if missing {
		if next, err := d.refreshLayout(ctx, l.activity); err == nil && next != l {
			return next, nil
		}
	}
	if len(out) > 0 {
		return l, fmt.Errorf("stock: adjust activity %s (retry with the same ID to finish): %w", p.Activity, errors.Join(out...))
	}
	return l, nil
}

// sumAdjust sums the shards' steps into one Adjustment.
func sumAdjust(p AdjustParams, rs []adjReply) Adjustment {
	a := Adjustment{ID: p.ID, Delta: p.Delta, Replayed: true}
	stepped := false
	for _, r := range rs {
		a.Before.Remaining += r.before.Remaining
		a.Before.Total += r.before.Total
		a.After.Remaining += r.after.Remaining
		a.After.Total += r.after.Total
		if r.code != adjustApplied {
			continue
		}
		stepped = true
		a.Applied += r.delta
		a.Replayed = a.Replayed && r.replayed
		if t := fromMilli(r.at); a.At.IsZero() || t.Before(a.At) {
			a.At = t
		}
	}
	a.Replayed = a.Replayed && stepped
	return a
}

// Adjustments returns the activity's adjustment log (every Adjust applied
// to this copy of its state; Reset deletes it, Rebuild keeps it), oldest
// first. For a sharded activity the steps of one adjustment are summed.
func (d *Deductor) Adjustments(ctx context.Context, activity string) ([]Adjustment, error) {
	if err := checkActivity(activity); err != nil {
		return nil, err
	}
	return onLayout(d, activity, func(l *layout) ([]Adjustment, *layout, error) {
		if l == nil {
			kind, n, kv, err := d.adjLog(ctx, d.keys(activity))
			switch {
			case err != nil:
				return nil, nil, err
			case kind == metaDirectory:
				next, err := d.learn(activity, n)
				return nil, next, err
			case kind == metaAbsent:
				return nil, nil, fmt.Errorf("stock: adjustments of activity %s: %w", activity, ErrNotLoaded)
			}
			recs, err := parseAdjLog(kv, false)
			return recs, nil, err
		}
		kvs := make([][]any, l.n)
		kinds := make([]metaKind, l.n)
		errs := make([]error, l.n)
		fanOut(l.n, func(k int) { kinds[k], _, kvs[k], errs[k] = d.adjLog(ctx, l.keys[k]) })
		if err := errors.Join(errs...); err != nil {
			return nil, l, err
		}
		if !slices.Contains(kinds, metaLoaded) {
			if next, err := d.refreshLayout(ctx, activity); err == nil && next != l {
				return nil, next, nil
			}
			return nil, l, fmt.Errorf("stock: adjustments of activity %s: %w", activity, ErrNotLoaded)
		}
		var all []any
		for _, kv := range kvs {
			all = append(all, kv...)
		}
		recs, err := parseAdjLog(all, true)
		return recs, l, err
	})
}

// adjLog runs adjlog.lua on one ledger: the kind of its meta key, the
// number of shards when that is a directory, and the log's HGETALL pairs.
func (d *Deductor) adjLog(ctx context.Context, k keys) (metaKind, int64, []any, error) {
	vals, err := adjlogScript.RunRO(ctx, d.rdb, []string{k.meta, k.adj}).Slice()
	if err != nil {
		return 0, 0, nil, classify("adjustments", err)
	}
	if len(vals) != 3 {
		return 0, 0, nil, badReply("adjustments", "%d values, want 3", len(vals))
	}
	x, ok1 := vals[0].(int64)
	n, ok2 := vals[1].(int64)
	kv, ok3 := vals[2].([]any)
	kind := metaKind(x)
	if !ok1 || !ok2 || !ok3 || len(kv)%2 != 0 || kind < metaAbsent || kind > metaDirectory ||
		kind == metaDirectory && (!isShardCount(n) || k.xout != "") {
		return 0, 0, nil, badReply("adjustments", "reply %v", vals)
	}
	return kind, n, kv, nil
}

// parseAdjLog parses HGETALL pairs of adjustment logs; sharded: the IDs
// carry a "#<k>" suffix and the steps of one ID are summed.
func parseAdjLog(kv []any, sharded bool) ([]Adjustment, error) {
	byID := map[string]int{}
	var out []Adjustment
	for i := 0; i < len(kv); i += 2 {
		id, ok1 := kv[i].(string)
		rec, ok2 := kv[i+1].(string)
		if !ok1 || !ok2 {
			return nil, badReply("adjustments", "entry of types %T, %T", kv[i], kv[i+1])
		}
		f := strings.Split(rec, ":")
		if len(f) != 5 {
			return nil, badReply("adjustments", "record %q", rec)
		}
		var v [5]int64
		for j, s := range f {
			x, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, badReply("adjustments", "record %q", rec)
			}
			v[j] = x
		}
		if sharded {
			cut := strings.LastIndexByte(id, '#')
			if cut < 0 {
				return nil, badReply("adjustments", "shard step ID %q", id)
			}
			id = id[:cut]
		}
		at := fromMilli(v[1])
		if j, ok := byID[id]; ok {
			out[j].Applied += v[0]
			if at.Before(out[j].At) {
				out[j].At = at
			}
			continue
		}
		byID[id] = len(out)
		out = append(out, Adjustment{ID: id, Delta: v[4], Applied: v[0], At: at})
	}
	slices.SortFunc(out, func(a, b Adjustment) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}
