package stock

import (
	"context"
	"fmt"
	"time"
)

// ReleaseReservedParams names a reservation the caller knows was made.
type ReleaseReservedParams struct {
	Activity      string
	ReservationID string
	// ReservedBy is a time at or after the reservation (for example the
	// creation time of the order it became); required. It is compared with
	// the Redis time at which the activity's copy was created, so the
	// clocks of the caller and of Redis should agree to well within the
	// time between a load of the activity and its first sales.
	ReservedBy time.Time
}

// ReleaseReserved is [Deductor.Release] for a reservation the caller knows
// was made (an order exists for it), so that a missing ledger entry is
// evidence rather than a "release before reserve". A held entry is
// released exactly as Release does (ReleaseDone, or ReleaseDuplicate when
// released before). When the ledger has no entry for ReservationID it writes
// no tombstone and:
//
//   - when the activity's copy in Redis was created after ReservedBy (a
//     Rebuild, Reset or Load since the reservation counted its stock
//     without it), answers [ReleaseRebuilt]: nothing to give back;
//   - otherwise the ledger that held the reservation lost it (a failover
//     that dropped acknowledged writes): the activity is frozen (every
//     shard of a sharded one), the loss is reported once per copy through
//     [WithOnLoss] and the logger, and the error wraps [ErrLost]. A
//     [Preloader] with [WithRecovery] rebuilds the frozen activity from the
//     database; a later ReleaseReserved then answers ReleaseRebuilt (or
//     releases the entry the rebuild restored).
//
// A sharded activity is probed shard by shard, as Release does.
func (d *Deductor) ReleaseReserved(ctx context.Context, p ReleaseReservedParams) (ReleaseResult, error) {
	var start time.Time
	if d.o.obs != nil {
		start = time.Now()
	}
	res, err := d.releaseReserved(ctx, p)
	if d.o.obs != nil {
		d.observeRelease(ctx, start, p.Activity, res, err)
	}
	if err != nil {
		d.o.logger.WarnContext(ctx, "stock: release failed", "activity", showID(p.Activity), "request", p.ReservationID, "err", err)
	} else if res.Status == ReleaseDone && res.Remaining > 0 {
		d.clearSoldOut(ctx, p.Activity)
	}
	if d.o.onRelease != nil {
		d.o.onRelease(ctx, p.Activity, p.ReservationID, res, err)
	}
	return res, err
}

func (d *Deductor) releaseReserved(ctx context.Context, p ReleaseReservedParams) (ReleaseResult, error) {
	if err := checkActivity(p.Activity); err != nil {
		return ReleaseResult{}, err
	}
	if err := d.validateID(p.ReservationID); err != nil {
		return ReleaseResult{}, err
	}
	if p.ReservedBy.IsZero() {
		return ReleaseResult{}, fmt.Errorf("%w: release of %q: ReservedBy is zero", ErrInvalidArgument, p.ReservationID)
	}
	by := p.ReservedBy.UnixMilli()
	return onLayout(d, p.Activity, func(l *layout) (ReleaseResult, *layout, error) {
		if l != nil {
			return d.releaseReservedSharded(ctx, l, p.ReservationID, by)
		}
		u := plain(p.Activity)
		r, err := d.releaseUnit(ctx, u, d.keyList(u), p.ReservationID, true)
		switch {
		case err != nil:
			return ReleaseResult{}, nil, err
		case r.dir != 0:
			next, err := d.learn(p.Activity, r.dir)
			return ReleaseResult{}, next, err
		case r.res.Status != releaseAbsent:
			return r.res, nil, nil
		}
		res, err := d.missing(ctx, u, p.ReservationID, r, by)
		return res, nil, err
	})
}

// releaseReservedSharded probes every shard of l for reservationID; when none
// holds it, the shard created earliest decides.
func (d *Deductor) releaseReservedSharded(ctx context.Context, l *layout, reservationID string, by int64) (ReleaseResult, *layout, error) {
	res, next, done, err := d.releasePass(ctx, l, reservationID, true)
	if done || err != nil || next != l {
		return res, next, err
	}
	// Absent from every loaded shard: read their births (a second probe
	// pass; it changes nothing).
	rs := make([]releaseReply, l.n)
	errs := make([]error, l.n)
	fanOut(l.n, func(k int) { rs[k], errs[k] = d.releaseUnit(ctx, l.unit(k), l.lists[k], reservationID, true) })
	oldest := -1
	for k := range rs {
		switch {
		case errs[k] != nil:
			return ReleaseResult{}, l, fmt.Errorf("stock: release %q in activity %s: %w", reservationID, l.activity, errs[k])
		case rs[k].res.Status != releaseAbsent:
			if releaseRank(rs[k].res) >= 4 {
				return rs[k].res, l, nil // released meanwhile by another caller
			}
			continue // a shard not loaded: judged by the next call
		case oldest < 0 || rs[k].born < rs[oldest].born:
			oldest = k
		}
	}
	if oldest < 0 {
		return ReleaseResult{Status: ReleaseNotLoaded}, l, nil
	}
	out, err := d.missing(ctx, plain(l.activity), reservationID, rs[oldest], by)
	return out, l, err
}

// missing judges a reservation absent from a ledger whose copy (r.epoch,
// r.born) answered: created after by, nothing to release; created at or
// before by, the ledger lost it. u is the ledger reported (the activity
// itself for a sharded one: every shard is frozen).
func (d *Deductor) missing(ctx context.Context, u unit, reservationID string, r releaseReply, by int64) (ReleaseResult, error) {
	if r.born > by {
		return ReleaseResult{Status: ReleaseRebuilt, Remaining: r.res.Remaining}, nil
	}
	d.mu.Lock()
	first := d.missed[u] != r.epoch || r.epoch == 0
	if first {
		if d.missed == nil || len(d.missed) >= maxStates {
			d.missed = map[unit]int64{}
		}
		d.missed[u] = r.epoch
	}
	d.mu.Unlock()
	if first {
		d.act(ctx, u, verdict{frozen: true, freeze: true, reason: fmt.Sprintf(
			"lost: reservation %q, made by %s, is missing from the ledger of epoch %d (created %s)",
			reservationID, msString(by), r.epoch, msString(r.born))})
	}
	return ReleaseResult{}, fmt.Errorf("stock: release of reservation %q in activity %s: %w", reservationID, u.activity, ErrLost)
}
