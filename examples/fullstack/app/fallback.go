package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/internal/fused"
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
//
// A sale in sizes (-variants) has a pool per size, "<sale>/<size>", of
// min(N, the size's stock) units (dbfallback.Store.Open with the
// variants); Redis loads each size with its stock minus its pool. Each
// size is handled as the plain sale is: its own sold-out memory of the
// pool, its releases, its reconciler pass and its invariants; the pool
// store holds the sale's per-user limit over the sizes as Redis does.

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
	act := stock.Activity{ID: s.act.ID, Stock: s.act.Stock, PerUserLimit: s.act.PerUserLimit,
		Start: s.act.Start, End: s.act.End, Variants: s.variants}
	if err := fb.Open(ctx, act, quota); err != nil {
		return nil, fmt.Errorf("db fallback pool: %w", err)
	}
	log.Info("db fallback pool open", "activity", s.act.ID, "quota", quota, "sizes", len(s.variants))
	return fb, nil
}

// poolQuota is the number of units of activity set aside in the DB pool:
// the sale's -db-fallback-quota, or for a size of a sale in sizes
// ("<sale>/<size>") min(quota, the size's stock).
func (a *App) poolQuota(activity string) int64 {
	if a.p.fallback == nil {
		return 0
	}
	if activity == a.sale.act.ID && len(a.sale.variants) == 0 {
		return a.cfg.DBFallbackQuota
	}
	if v, ok := a.sale.variantOfSale(activity); ok {
		for _, x := range a.sale.variants {
			if x.ID == v {
				return min(a.cfg.DBFallbackQuota, x.Stock)
			}
		}
	}
	return 0
}

// hasPool reports whether activity has a DB pool: the sale's, or a size's.
func (a *App) hasPool(activity string) bool {
	return a.p.fallback != nil && slices.Contains(a.sale.ledgers(), activity)
}

// saleStock is the sale's stock as checkout takes it (checkout.Stock): the
// Redis deductor, and the DB pool beside it when there is one. It counts
// every Reserve's answer (seckill_reserve_total{status}).
type saleStock struct {
	d       *stock.Deductor
	pool    *dbfallback.Store // nil unless -db-fallback-quota > 0
	poolOut sync.Map          // activity (the sale, or a size) → *atomic.Int64: unix nanos until which its DB pool is known sold out
	counted *counterVec       // seckill_reserve_total
}

// SoldOut reports, with no I/O, that Redis's share of activity (the sale,
// or a size) is sold out and so is its DB pool (poolSoldOut).
func (s *saleStock) SoldOut(activity string) bool {
	return s.d.SoldOut(activity) && s.poolSoldOut(activity)
}

// SoldOutFor and SoldOutForPrefix are the deductor's: with a pool, SoldOut
// is true only while the pool is known sold out too.
func (s *saleStock) SoldOutFor(activity, id string) bool { return s.d.SoldOutFor(activity, id) }

func (s *saleStock) SoldOutForPrefix(activity, prefix string) bool {
	return s.d.SoldOutForPrefix(activity, prefix)
}

// Variants is the deductor's list of the sale's variants (a sale in
// sizes), each with the units Redis has left (its pool's are apart).
func (s *saleStock) Variants(ctx context.Context, activity string) ([]stock.Variant, error) {
	return s.d.Variants(ctx, activity)
}

// poolSoldOut reports whether activity's DB pool answered SoldOut within
// the last second (its units come back only through releases, which are
// rare): the in-process sold-out short-circuit then refuses without a DB
// query.
func (s *saleStock) poolSoldOut(activity string) bool {
	if s.pool == nil {
		return true
	}
	at, ok := s.poolOut.Load(activity)
	return ok && time.Now().UnixNano() < at.(*atomic.Int64).Load()
}

// markPoolSoldOut remembers for a second that activity's DB pool is sold
// out.
func (s *saleStock) markPoolSoldOut(activity string) {
	at, _ := s.poolOut.LoadOrStore(activity, new(atomic.Int64))
	at.(*atomic.Int64).Store(time.Now().Add(time.Second).UnixNano())
}

// Reserve is the one Lua call, then the DB pool for a unit Redis no longer
// has (with an unreachable Redis the deductor asks the pool itself:
// stock.WithFallback).
func (s *saleStock) Reserve(ctx context.Context, req stock.Request) (stock.Result, error) {
	res, err := s.d.Reserve(ctx, req)
	if err == nil {
		res, err = s.reserveFromPool(ctx, req, res)
	}
	if err != nil {
		s.counted.WithLabelValues("error").Inc()
		return res, err
	}
	s.counted.WithLabelValues(res.Status.String()).Inc()
	return res, nil
}

// reserveFromPool asks the DB pool for the unit Redis no longer has. It
// returns res unchanged unless the pool reserved.
func (s *saleStock) reserveFromPool(ctx context.Context, req stock.Request, res stock.Result) (stock.Result, error) {
	if s.pool == nil || res.Status != stock.SoldOut || res.Fallback || s.poolSoldOut(req.Activity) {
		return res, nil
	}
	pres, err := s.pool.Reserve(ctx, req)
	if err != nil {
		return res, fmt.Errorf("db fallback pool: %w", err)
	}
	switch pres.Status {
	case stock.Reserved:
		pres.Fallback = true
		return pres, nil
	case stock.SoldOut:
		s.markPoolSoldOut(req.Activity)
	}
	return res, nil
}

// Release gives a reservation's units back to whichever store holds them:
// Redis and the DB pool (each is idempotent and leaves a tombstone for an
// ID it does not hold). The result is the store's that gave units back.
func (s *saleStock) Release(ctx context.Context, activity, id string) (stock.ReleaseResult, error) {
	res, err := s.d.Release(ctx, activity, id)
	if s.pool != nil {
		pres, perr := s.pool.Release(ctx, activity, id)
		if perr == nil && pres.Status == stock.ReleaseDone {
			res = pres
		}
		err = errors.Join(err, perr)
	}
	return res, err
}

// release is Release as an order.Releaser.
func (s *saleStock) release(ctx context.Context, activity, id string) error {
	_, err := s.Release(ctx, activity, id)
	return err
}

// Lookup finds id in the Redis ledger, else in the DB pool. With a pool, a
// Redis that cannot be reached is asked nothing more: the pool answers
// alone (a reservation Redis made before the outage and whose reply was
// lost may then be reserved in the pool too; the order is one either way,
// and dbfallback.Store.Overlap finds such doubles afterwards).
func (s *saleStock) Lookup(ctx context.Context, activity, id string) (stock.Reservation, bool, error) {
	r, ok, err := s.d.Lookup(ctx, activity, id)
	if ok || s.pool == nil || (err != nil && !errors.Is(err, stock.ErrUnavailable)) {
		return r, ok, err
	}
	return s.pool.Lookup(ctx, activity, id)
}

// forCheckout is s as checkout takes it. With no DB pool and the stock in
// the Redis of the fused admission (fused: no -stock-redis), a fusedStock,
// whose replay lookup runs in the fused script; otherwise s itself, which
// offers no fused form. With a pool, a lookup that misses in Redis reads
// the pool too, and the fused script cannot: it goes on past a Redis miss
// to the captcha and the access token, spending them, where the chain
// answers the reservation the pool holds before reaching them. With the
// stock in its own Redis, the script would read a ledger that is not
// there.
func (s *saleStock) forCheckout(fused bool) checkout.Stock {
	if s.pool != nil || !fused {
		return s
	}
	return fusedStock{s}
}

// fusedStock is a saleStock without a DB pool, whose Lookup is the
// deductor's: it offers the deductor's fused lookup, which answers the
// same.
type fusedStock struct{ *saleStock }

// LookupCheck is the deductor's fused lookup (checkout's replay step).
func (f fusedStock) LookupCheck(activity, id string) (fused.Check[stock.Reservation], error) {
	return f.d.LookupCheck(activity, id)
}

// Held is what user holds in the sale across both stores. Zero means no
// reservation in flight and no live order of theirs.
func (s *saleStock) Held(ctx context.Context, activity, user string) (int64, error) {
	n, err := s.d.Held(ctx, activity, user)
	if err != nil || s.pool == nil {
		return n, err
	}
	p, err := s.pool.Held(ctx, activity, user)
	return n + p, err
}

// orderReleaser is the releaser the Canceller gets: Release for the other
// callers, ReleaseOrder (status.OrderReleaser) for a cancelled order.
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

// poolHeld returns the IDs of the reservations the DB pool holds: the
// sale's, or every size's of a sale in sizes.
func (a *App) poolHeld(ctx context.Context) (map[string]bool, error) {
	held := map[string]bool{}
	for _, l := range a.sale.ledgers() {
		rs, err := a.poolReservations(ctx, l)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			held[r.ID] = true
		}
	}
	return held, nil
}

// poolReservations lists the reservations the DB pool of activity (the
// sale, or a size) holds.
func (a *App) poolReservations(ctx context.Context, activity string) ([]stock.Reservation, error) {
	var out []stock.Reservation
	if !a.hasPool(activity) {
		return out, nil
	}
	cursor := ""
	for pages := 0; pages < 1_000_000; pages++ {
		page, next, err := a.p.fallback.Reservations(ctx, activity, cursor, 1000)
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

// poolRemaining is what the DB pool of activity (the sale, or a size) can
// still sell (0 without one).
func (a *App) poolRemaining(ctx context.Context, activity string) int64 {
	if !a.hasPool(activity) {
		return 0
	}
	st, err := a.p.fallback.Stats(ctx, activity)
	if err != nil {
		return 0
	}
	return st.Remaining
}
