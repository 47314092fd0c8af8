package app

import (
	"context"
	"time"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/outbox"
	"github.com/seckillkit/seckill/stock"
)

// cancellerOptions builds the unpaid-order canceller (Redis delay queue + DB
// scan backstop) and the reconciler, starts both, and returns the consumer
// option that schedules each new order's cancellation.
func (a *App) cancellerOptions(ctx context.Context, proc *order.Processor, rel order.Releaser) ([]order.ConsumerOption, error) {
	log := a.log
	// The canceller knows each reservation it releases was made (its order
	// exists): ReleaseOrder turns a ledger entry Redis lost into a freeze
	// and a rebuild instead of a tombstone.
	canc, err := order.NewCanceller(a.in.DB, a.in.Redis, orderReleaser{Releaser: rel, a: a},
		order.WithKeyPrefix(a.cfg.KeyPrefix),
		order.WithPollInterval(500*time.Millisecond),
		order.WithScanInterval(30*time.Second),
		order.WithLogger(log),
		order.WithOnPayCancelled(func(ctx context.Context, o order.Order) {
			log.Warn("payment for a cancelled order: refund it", "order_no", o.OrderNo, "user", o.UserID)
		}),
		order.WithOnError(func(ctx context.Context, err error) {
			a.m.workerErrors.WithLabelValues("canceller").Inc()
			log.Warn("canceller", "err", err)
		}))
	if err != nil {
		return nil, err
	}
	if a.cfg.works() {
		a.goWorker("canceller", canc.Run)
	}
	a.closers = append(a.closers, canc.Close)
	a.parts.pay = canc.Pay

	// Reconciler: the Redis ledger against the DB, every ReconcileEvery.
	// A reservation is released only when it has no live order, is older
	// than the grace period and no outbox row still carries its message;
	// and it is fenced in the DB first, so a message still in Kafka (a
	// consumer lagging past the grace) deducts nothing when it arrives and
	// its buyer reads "failed", not "queued".
	ledger := order.LedgerFunc(func(ctx context.Context, activity string, cursor uint64, count int64) ([]order.Reservation, uint64, error) {
		page, next, err := a.stock.Reservations(ctx, activity, cursor, count)
		if err != nil {
			return nil, 0, err
		}
		if next == 0 && activity == a.act.ID { // the DB pool's reservations come with the last page
			pool, err := a.poolReservations(ctx)
			if err != nil {
				return nil, 0, err
			}
			page = append(page, pool...)
		}
		out := make([]order.Reservation, 0, len(page))
		for _, r := range page {
			if r.State == stock.Held {
				out = append(out, order.Reservation{ID: r.RequestID, User: r.User, Qty: r.Qty, At: r.ReservedAt})
			}
		}
		return out, next, nil
	})
	pending := order.PendingFunc(func(ctx context.Context, resv string) (bool, error) {
		return outbox.HasPendingRef(ctx, a.in.DB, resv)
	})
	rec, err := order.NewReconciler(a.in.DB, ledger, rel, order.WithGrace(a.cfg.ReconcileGrace), order.WithPending(pending),
		order.WithResults(a.results), order.WithLogger(log))
	if err != nil {
		return nil, err
	}
	// The admin API's dry run: the same comparison, releasing nothing.
	if a.reconDry, err = order.NewReconciler(a.in.DB, ledger, rel, order.WithGrace(a.cfg.ReconcileGrace), order.WithPending(pending),
		order.WithResults(a.results), order.WithLogger(log), order.WithDryRun(true)); err != nil {
		return nil, err
	}
	a.recon = rec
	if !a.cfg.works() {
		return []order.ConsumerOption{order.WithScheduler(canc)}, nil
	}
	a.goWorker("reconciler", func(ctx context.Context) error {
		t := time.NewTicker(a.cfg.ReconcileEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				rep, err := rec.Reconcile(ctx, a.act.ID)
				if err != nil {
					a.m.workerErrors.WithLabelValues("reconciler").Inc()
					log.Warn("reconcile", "err", err)
					continue
				}
				if len(rep.Released) > 0 || len(rep.Orphans) > 0 || !rep.Conserved {
					a.m.released.WithLabelValues("reconciler").Add(float64(len(rep.Released)))
					log.Warn("reconciler repaired", "released", len(rep.Released), "orphans", len(rep.Orphans), "conserved", rep.Conserved)
				}
			case <-ctx.Done():
				return nil
			}
		}
	})
	return []order.ConsumerOption{order.WithScheduler(canc)}, nil
}
