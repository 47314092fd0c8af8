package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/stock/dbfallback"
)

// The DB fallback (-db-fallback-quota N): N units of the sale live in a
// database pool instead of Redis. Redis and the pool hold disjoint units,
// so together they cannot oversell however a request is routed or
// retried. The pool sells
//
//   - when the stock Redis cannot be reached (stock.WithFallback: the
//     Deductor asks it after an error matching stock.ErrUnavailable), and
//   - when Redis's share is sold out, so that its units are never stranded
//     while buyers are still asking.
//
// Releases go to both stores (each ignores the other's IDs, leaving a
// tombstone), the reconciler lists both ledgers, and the invariants count
// both. The per-user limit is held per store and, across the two, by the
// database's own check in the consumer's transaction: a buyer who got a
// unit from each store sees the second end FAILED (limit_reached).

// openDBPool opens the sale's DB pool of quota units, or returns nil when
// the fallback is off (quota 0). It is I/O (a migration and the pool's row),
// so New runs it before build, which only wires the pool in.
func openDBPool(ctx context.Context, db *gorm.DB, s *sale, quota int64, log *slog.Logger) (*dbfallback.Store, error) {
	if quota <= 0 {
		return nil, nil
	}
	fb, err := dbfallback.New(db)
	if err != nil {
		return nil, err
	}
	if err := fb.AutoMigrate(ctx); err != nil {
		return nil, err
	}
	act := stock.Activity{ID: s.act.ID, Stock: s.act.TotalStock, PerUserLimit: s.act.UserLimit,
		Start: s.act.StartTime, End: s.act.EndTime}
	if err := fb.Open(ctx, act, quota); err != nil {
		return nil, fmt.Errorf("db fallback pool: %w", err)
	}
	log.Info("db fallback pool open", "activity", s.act.ID, "quota", quota)
	return fb, nil
}

// poolQuota is the number of units of activity set aside in the DB pool.
func (a *App) poolQuota(activity string) int64 {
	if a.p.fallback == nil || activity != a.sale.act.ID {
		return 0
	}
	return a.cfg.DBFallbackQuota
}

// poolSoldOut reports whether the DB pool answered SoldOut within the last
// second (its units come back only through releases, which are rare): the
// in-process sold-out short-circuit then refuses without a DB query.
func (a *App) poolSoldOut() bool {
	return a.p.fallback == nil || time.Now().UnixNano() < a.p.poolOut.Load()
}

// reserveFromPool asks the DB pool for the unit Redis no longer has. It
// returns res unchanged unless the pool reserved.
func (a *App) reserveFromPool(ctx context.Context, req stock.Request, res stock.Result) (stock.Result, error) {
	if a.p.fallback == nil || res.Status != stock.SoldOut || res.Fallback || a.poolSoldOut() {
		return res, nil
	}
	pres, err := a.p.fallback.Reserve(ctx, req)
	if err != nil {
		return res, fmt.Errorf("db fallback pool: %w", err)
	}
	switch pres.Status {
	case stock.Reserved:
		pres.Fallback = true
		return pres, nil
	case stock.SoldOut:
		a.p.poolOut.Store(time.Now().Add(time.Second).UnixNano())
	}
	return res, nil
}

// releaseUnits gives a reservation's units back to whichever store holds
// them: Redis and the DB pool (each is idempotent and leaves a tombstone
// for an ID it does not hold).
func (a *App) releaseUnits(ctx context.Context, activity, id string) error {
	_, err := a.p.stock.Release(ctx, activity, id)
	if a.p.fallback != nil {
		_, ferr := a.p.fallback.Release(ctx, activity, id)
		err = errors.Join(err, ferr)
	}
	return err
}

// orderReleaser is the releaser the Canceller gets: Release for the other
// callers, ReleaseOrder (order.OrderReleaser) for a cancelled order.
type orderReleaser struct {
	order.Releaser
	a *App
}

// ReleaseOrder gives a cancelled order's units back. A reservation the DB
// pool held (released now or before; a tombstone has qty 0) goes the old
// way. Any other was made in Redis by o.CreatedAt, so ReleaseReserved
// tells a ledger entry Redis lost (a failover that dropped acknowledged
// writes: the activity is frozen and the Preloader's recovery rebuilds it
// from the DB; the error, stock.ErrLost, makes the Canceller retry, and
// the retry after the rebuild finds a newer copy: nothing to release) from
// one the layout never had since a rebuild. No tombstone hides the loss.
func (r orderReleaser) ReleaseOrder(ctx context.Context, o order.Order) error {
	a := r.a
	if a.p.fallback != nil {
		pres, err := a.p.fallback.Release(ctx, o.ActivityID, o.ReservationID)
		if err != nil {
			return err
		}
		if pres.Status == stock.ReleaseDone || pres.Status == stock.ReleaseDuplicate && pres.Qty > 0 {
			_, err := a.p.stock.Release(ctx, o.ActivityID, o.ReservationID)
			return err
		}
	}
	_, err := a.p.stock.ReleaseReserved(ctx, stock.ReleaseReservedParams{
		Activity: o.ActivityID, ReservationID: o.ReservationID, ReservedBy: o.CreatedAt})
	return err
}

// poolHeld returns the IDs of the reservations the DB pool holds.
func (a *App) poolHeld(ctx context.Context) (map[string]bool, error) {
	rs, err := a.poolReservations(ctx)
	if err != nil {
		return nil, err
	}
	held := make(map[string]bool, len(rs))
	for _, r := range rs {
		held[r.ID] = true
	}
	return held, nil
}

// poolReservations lists the reservations the DB pool holds.
func (a *App) poolReservations(ctx context.Context) ([]stock.Reservation, error) {
	var out []stock.Reservation
	if a.p.fallback == nil {
		return out, nil
	}
	cursor := ""
	for pages := 0; pages < 1_000_000; pages++ {
		page, next, err := a.p.fallback.Reservations(ctx, a.sale.act.ID, cursor, 1000)
		if err != nil {
			return nil, fmt.Errorf("db fallback pool: %w", err)
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
	return nil, errors.New("db fallback pool: reservation cursor does not end")
}

// lookupReservation finds resv in the Redis ledger, else in the DB pool.
// With a pool, a Redis that cannot be reached is asked nothing more: the
// pool answers alone (a reservation Redis made before the outage and whose
// reply was lost may then be reserved in the pool too; the order is one
// either way, and dbfallback.Store.Overlap finds such doubles afterwards).
func (a *App) lookupReservation(ctx context.Context, resv string) (stock.Reservation, bool, error) {
	r, ok, err := a.p.stock.Lookup(ctx, a.sale.act.ID, resv)
	if ok || a.p.fallback == nil || (err != nil && !errors.Is(err, stock.ErrUnavailable)) {
		return r, ok, err
	}
	return a.p.fallback.Lookup(ctx, a.sale.act.ID, resv)
}

// poolRemaining is what the DB pool can still sell (0 without one).
func (a *App) poolRemaining(ctx context.Context) int64 {
	if a.p.fallback == nil {
		return 0
	}
	st, err := a.p.fallback.Stats(ctx, a.sale.act.ID)
	if err != nil {
		return 0
	}
	return st.Remaining
}

// held is what user holds in the sale across both stores: Redis and the DB
// pool. Zero means no reservation in flight and no live order of theirs.
func (a *App) held(ctx context.Context, user string) (int64, error) {
	n, err := a.p.stock.Held(ctx, a.sale.act.ID, user)
	if err != nil || a.p.fallback == nil {
		return n, err
	}
	p, err := a.p.fallback.Held(ctx, a.sale.act.ID, user)
	return n + p, err
}
