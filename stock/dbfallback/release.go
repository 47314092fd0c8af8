package dbfallback

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/stock"
)

// Release gives back the units held by reservationID in activity's pool,
// exactly once however often it is called and however it races with
// Reserve of the same ID: in one transaction the reservation moves from
// held to released and the pool's remaining grows by its quantity. The
// outcome has the shape of [stock.Deductor.Release]:
//
//   - [stock.ReleaseDone]: given back now, by this call;
//   - [stock.ReleaseDuplicate]: released (or tombstoned) before; nothing
//     changed;
//   - [stock.ReleaseUnknown]: no reservation with this ID; a tombstone row
//     (state released, qty 0) is written, so that a Reserve of this ID
//     arriving later (a retry overtaken by the cancellation) deducts nothing
//     and answers [stock.Released];
//   - [stock.ReleaseNotLoaded]: the activity has no pool (a sale in sizes
//     has none of its own: its reservations are its sizes'); nothing
//     written.
//
// A size's reservation is released under its size's ID, "<sale>/<size>"
// (the sale's row is locked first, as by Reserve).
//
// Releasing the ID of a reservation this Store does not hold (it is held in
// Redis) is therefore harmless, and so is the converse, [stock.Deductor]
// Release of a fallback reservation: a canceller may release a reservation ID
// in both stores. A reservation ID held by another activity fails with an
// error wrapping [stock.ErrIDConflict]. As a compensation Release is
// often called with context.WithoutCancel(ctx); after an error it is safe
// to call again.
func (s *Store) Release(ctx context.Context, activity, reservationID string) (stock.ReleaseResult, error) {
	if s.obs == nil {
		return s.releaseTx(ctx, activity, reservationID)
	}
	start := time.Now()
	res, err := s.releaseTx(ctx, activity, reservationID)
	s.observed(ctx, StageRelease, activity, start, snake(res.Status.String()), 0, err)
	return res, err
}

// releaseTx is Release without the observer.
func (s *Store) releaseTx(ctx context.Context, activity, reservationID string) (stock.ReleaseResult, error) {
	if err := checkActivity(activity); err != nil {
		return stock.ReleaseResult{}, err
	}
	if err := validateID(reservationID); err != nil {
		return stock.ReleaseResult{}, err
	}
	var res stock.ReleaseResult
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var err error
		res, err = s.release(tx, activity, reservationID)
		return err
	})
	if err != nil {
		if errors.Is(err, stock.ErrIDConflict) {
			return stock.ReleaseResult{}, err
		}
		return stock.ReleaseResult{}, fmt.Errorf("dbfallback: release %q in activity %s: %w", reservationID, activity, err)
	}
	return res, nil
}

// release is one attempt of Release's transaction.
func (s *Store) release(tx *gorm.DB, activity string, id string) (stock.ReleaseResult, error) {
	_, inSale, err := s.lockSale(tx, activity)
	if err != nil {
		return stock.ReleaseResult{}, err
	}
	p, opened, err := s.lockPool(tx, activity)
	if err != nil {
		return stock.ReleaseResult{}, err
	}
	if !opened || !inSale || p.sizes > 0 {
		return stock.ReleaseResult{Status: stock.ReleaseNotLoaded}, errRollback
	}
	r, found, err := s.lookup(tx, id)
	if err != nil {
		return stock.ReleaseResult{}, err
	}
	nowMs := s.clock.Now().UnixMilli()
	switch {
	case !found:
		err := tx.Exec("INSERT INTO "+s.resv+" ("+rowColumns+") VALUES (?, ?, '', 0, ?, ?, ?)",
			id, activity, stateReleased, nowMs, nowMs).Error
		return stock.ReleaseResult{Status: stock.ReleaseUnknown, Remaining: p.remaining}, err
	case r.activity != activity:
		return stock.ReleaseResult{}, fmt.Errorf("dbfallback: %w: reservation ID %q belongs to activity %s, not %s",
			stock.ErrIDConflict, id, r.activity, activity)
	case r.state != stateHeld:
		return stock.ReleaseResult{Status: stock.ReleaseDuplicate, Qty: r.qty, User: r.user, Remaining: p.remaining}, errRollback
	}
	u := tx.Exec("UPDATE "+s.resv+" SET state = ?, released_ms = ? WHERE request_id = ? AND state = ?",
		stateReleased, nowMs, id, stateHeld)
	if u.Error != nil {
		return stock.ReleaseResult{}, u.Error
	}
	if u.RowsAffected != 1 {
		return stock.ReleaseResult{}, errors.New("reservation " + strconv.Quote(id) + " changed under the pool lock")
	}
	err = tx.Exec("UPDATE "+s.pool+" SET remaining = remaining + ?, updated_ms = ? WHERE activity_id = ?",
		r.qty, nowMs, activity).Error
	return stock.ReleaseResult{Status: stock.ReleaseDone, Qty: r.qty, User: r.user, Remaining: p.remaining + r.qty}, err
}
