package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/operate"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/order/status"
	"github.com/seckillkit/seckill/outbox"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
)

// adminBackend is the admin API's Backend over this service's parts: the
// stock deductor (Redis), the order tables (the DB), the outbox and the
// blacklist. Every change goes to both stores in the order that keeps the
// invariants while the second step has not run yet:
//   - a top-up is written to the DB first (a unit the DB has and Redis has
//     not yet is merely unsold), then to Redis;
//   - a withdrawal is taken from Redis first (no one can reserve it any
//     more), then from the DB;
//   - a pause is set in Redis (where the buy is decided) and recorded in
//     the activity row.
//
// Both stores key the adjustment by the audited action's ID
// (admin.ActionOf), so each step applies once. When the second step fails,
// the first is undone (an opposite ledger entry under "<id>~undo") and the
// action fails as a whole: the operator retries it as a new action.
type adminBackend struct {
	a      *App
	orders *status.Orders
	recon  *reconcile.Reconciler // nil until the workers are wired
	dry    *reconcile.Reconciler
}

var _ admin.Backend = (*adminBackend)(nil)

// mapErr turns the packages' sentinels into the admin API's.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, stock.ErrNotLoaded), errors.Is(err, order.ErrActivityNotFound), errors.Is(err, gorm.ErrRecordNotFound):
		return fmt.Errorf("%w: %w", admin.ErrNotFound, err)
	case errors.Is(err, stock.ErrInsufficient), errors.Is(err, operate.ErrInsufficientStock), errors.Is(err, operate.ErrAdjustConflict):
		return fmt.Errorf("%w: %w", admin.ErrConflict, err)
	case errors.Is(err, stock.ErrInvalidArgument), errors.Is(err, order.ErrInvalidID),
		errors.Is(err, operate.ErrInvalidAdjust), errors.Is(err, risk.ErrInvalidArgument):
		return fmt.Errorf("%w: %w", admin.ErrInvalidArgument, err)
	case errors.Is(err, stock.ErrUnavailable), errors.Is(err, stock.ErrFrozen):
		return fmt.Errorf("%w: %w", admin.ErrUnavailable, err)
	}
	return err
}

// state reads the activity's state from Redis (an activity with
// variants: their units together).
func (b *adminBackend) state(ctx context.Context, activity string) (admin.ActivityState, error) {
	st, err := b.a.p.stock.Stats(ctx, activity)
	if err != nil {
		return admin.ActivityState{}, mapErr(err)
	}
	if !st.Loaded {
		if vs, err := b.a.p.stock.Variants(ctx, activity); err == nil {
			out := admin.ActivityState{Activity: activity, Loaded: true}
			for _, v := range vs {
				vst, err := b.a.p.stock.Stats(ctx, stock.VariantOf(activity, v.ID))
				if err != nil {
					return admin.ActivityState{}, mapErr(err)
				}
				out.Remaining += vst.Remaining
				out.Total += vst.Total
				out.PerUserLimit, out.Start, out.End = vst.Limit, vst.Start, vst.End
				out.Paused = out.Paused || vst.Paused
			}
			return out, nil
		}
	}
	return admin.ActivityState{Activity: activity, Loaded: st.Loaded, Paused: st.Paused, Remaining: st.Remaining,
		Total: st.Total, PerUserLimit: st.Limit, Start: st.Start, End: st.End}, nil
}

// Load writes the activity row (when absent) and loads the activity into
// Redis (set-if-absent: a loaded activity is left as it is).
func (b *adminBackend) Load(ctx context.Context, p admin.LoadParams) (admin.Change, error) {
	before, err := b.state(ctx, p.Activity)
	if err != nil {
		return admin.Change{}, err
	}
	limit := max(p.PerUserLimit, 1)
	row := order.Activity{ID: p.Activity, Name: p.Activity, Stock: p.Stock, Remaining: p.Stock, PerUserLimit: limit,
		Status: order.ActivityActive, Start: p.Start, End: p.End}
	if err := b.a.in.DB.WithContext(ctx).Where("id = ?", p.Activity).FirstOrCreate(&row).Error; err != nil {
		return admin.Change{}, err
	}
	act := stock.Activity{ID: p.Activity, Stock: row.Remaining, PerUserLimit: limit, Start: p.Start, End: p.End, Shards: b.a.cfg.Shards}
	if len(p.Variants) > 0 {
		if act.Variants, err = b.loadVariants(ctx, row, p.Variants); err != nil {
			return admin.Change{}, mapErr(err)
		}
		act.Stock, act.Shards = 0, 1
	}
	if _, err := b.a.p.stock.Load(ctx, act); err != nil {
		return admin.Change{}, mapErr(err)
	}
	after, err := b.state(ctx, p.Activity)
	return admin.Change{Before: before, After: after}, err
}

// Stats reads Redis and the DB (the activity row, live orders).
func (b *adminBackend) Stats(ctx context.Context, activity string) (admin.Stats, error) {
	st, err := b.a.p.stock.Stats(ctx, activity)
	if err != nil {
		return admin.Stats{}, mapErr(err)
	}
	out := admin.Stats{Activity: activity, Redis: admin.RedisStats{Loaded: st.Loaded, Paused: st.Paused, Remaining: st.Remaining,
		Held: st.Total - st.Remaining, Reservations: st.LedgerEntries, Buyers: st.Buyers, Total: st.Total,
		PerUserLimit: st.Limit, Start: st.Start, End: st.End}}
	if !st.Loaded {
		out.Redis.Held = 0
	}
	var row order.Activity
	err = b.a.in.DB.WithContext(ctx).Where("id = ?", activity).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return out, nil
	case err != nil:
		return admin.Stats{}, err
	}
	out.DB = admin.DBStats{Found: true, Stock: row.Remaining, TotalStock: row.Stock}
	live, err := reconcile.LiveReservations(ctx, b.a.in.DB, activity)
	if err != nil {
		return admin.Stats{}, err
	}
	for _, r := range live {
		out.DB.Orders++
		out.DB.SoldUnits += r.Qty
	}
	return out, nil
}

func ledgerEntry(r stock.Reservation) *admin.Reservation {
	return &admin.Reservation{ID: r.ID, User: r.User, Qty: r.Qty, State: r.State.String(), ReservedAt: r.ReservedAt, ReleasedAt: r.ReleasedAt}
}

// Reservations pages through the activity's ledger for the buyer's
// entries (an operator's query, not a hot path).
func (b *adminBackend) Reservations(ctx context.Context, activity, user string) ([]admin.Reservation, error) {
	var out []admin.Reservation
	var cursor uint64
	for range 100_000 { // bounded: 100k pages of 500
		page, next, err := b.a.p.stock.Reservations(ctx, activity, cursor, 500)
		if err != nil {
			return nil, mapErr(err)
		}
		for _, r := range page {
			if r.User == user {
				out = append(out, *ledgerEntry(r))
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	return out, nil
}

// Story puts a reservation's traces side by side: the Redis ledger entry,
// the outbox row of its message, the result the buyer reads, the order and
// the consumer's dedup row.
func (b *adminBackend) Story(ctx context.Context, activity, resv string) (admin.Story, error) {
	s := admin.Story{Activity: activity, Reservation: resv}
	r, found, err := b.a.p.stock.Lookup(ctx, activity, resv)
	if err != nil {
		return s, mapErr(err)
	}
	user := ""
	if found {
		s.Ledger, user = ledgerEntry(r), r.User
	}
	db := b.a.in.DB.WithContext(ctx)
	var m outbox.Message
	if err := db.Where("ref = ?", resv).Order("id DESC").Limit(1).Take(&m).Error; err == nil {
		s.Outbox = &admin.OutboxRow{ID: m.ID, Status: string(m.Status), Attempts: int64(m.Attempts), LastError: m.LastError, CreatedAt: m.CreatedAt}
		if m.SentAt != nil {
			s.Outbox.SentAt = *m.SentAt
		}
	} else if !errors.Is(err, gorm.ErrRecordNotFound) {
		return s, err
	}
	if o, err := b.orders.ByReservation(ctx, resv); err == nil {
		s.Order = &admin.Order{OrderNo: o.OrderNo, User: o.UserID, Qty: o.Qty, Status: o.Status, CreatedAt: o.CreatedAt}
		user = o.UserID
	} else if !errors.Is(err, status.ErrOrderNotFound) {
		return s, err
	}
	var d order.Dedup
	if err := db.Where("reservation_id = ?", resv).Limit(1).Take(&d).Error; err == nil {
		s.Dedup = &admin.Dedup{Key: d.MsgID, CreatedAt: d.CreatedAt}
		if user == "" {
			user = d.UserID
		}
	} else if !errors.Is(err, gorm.ErrRecordNotFound) {
		return s, err
	}
	if s.Ledger != nil {
		s.Ledger.State = storyState(s.Ledger.State, s.Order)
	}
	if user != "" {
		res, err := b.a.p.results.Reservation(ctx, status.ResultQuery{Activity: activity, User: user, ReservationID: resv})
		if err != nil {
			return s, err
		}
		s.Result = &admin.Result{Status: string(res.Status), Reason: res.Reason, OrderNo: res.OrderNo, At: res.At}
	}
	return s, nil
}

// storyState names a ledger entry's state for the operator, with what the
// order makes of it: Redis keeps a sold unit "held" for good (the order
// consumed it), which read alone looks unsettled. The ledger state comes
// first, unchanged:
//
//	held (order PAID: consumed)                     sold and paid
//	held (order CREATED: consumed, awaiting payment) sold, not paid yet
//	held (order CANCELLED: to be released)           the cancel's release is due (the reconciler does it)
//	held (no order yet)                              in flight; past the grace period, the reconciler releases it
//	freed (order CANCELLED: released)                given back after a cancel
//	freed / tombstone                                given back (no order), or without a ledger of its own
//
// Any other pair is shown as "<ledger> (order <status>)".
func storyState(ledger string, o *admin.Order) string {
	switch {
	case o == nil && ledger == stock.Held.String():
		return ledger + " (no order yet)"
	case o == nil:
		return ledger
	case ledger == stock.Held.String() && o.Status == order.OrderPaid:
		return ledger + " (order PAID: consumed)"
	case ledger == stock.Held.String() && o.Status == order.OrderCreated:
		return ledger + " (order CREATED: consumed, awaiting payment)"
	case ledger == stock.Held.String() && o.Status == order.OrderCancelled:
		return ledger + " (order CANCELLED: to be released)"
	case o.Status == order.OrderCancelled:
		return ledger + " (order CANCELLED: released)"
	}
	return ledger + " (order " + o.Status + ")"
}

// Pause stops new reservations in Redis (a buyer reads "paused", not "sold
// out") and records the pause in the activity row.
func (b *adminBackend) Pause(ctx context.Context, activity string) (admin.Change, error) {
	return b.control(ctx, activity, b.a.p.stock.Pause, order.ActivityPaused)
}

// Resume lets Redis decide again and records it in the activity row.
func (b *adminBackend) Resume(ctx context.Context, activity string) (admin.Change, error) {
	return b.control(ctx, activity, b.a.p.stock.Resume, order.ActivityActive)
}

func (b *adminBackend) control(ctx context.Context, activity string, f func(context.Context, string) error, status order.ActivityStatus) (admin.Change, error) {
	before, err := b.state(ctx, activity)
	if err != nil {
		return admin.Change{}, err
	}
	if err := f(ctx, activity); err != nil {
		return admin.Change{}, mapErr(err)
	}
	if err := b.a.fairPause(ctx, activity, status == order.ActivityPaused); err != nil { // the queue pauses with the sale
		return admin.Change{}, err
	}
	if err := operate.SetActivityStatus(ctx, b.a.in.DB, activity, status); err != nil {
		return admin.Change{}, mapErr(err)
	}
	after, err := b.state(ctx, activity)
	return admin.Change{Before: before, After: after}, err
}

// TopUp adds n units: the DB first, then Redis, both under the action's ID.
func (b *adminBackend) TopUp(ctx context.Context, activity string, n int64) (admin.Change, error) {
	return b.adjust(ctx, activity, n)
}

// Withdraw takes n unsold units off sale: Redis first, then the DB.
func (b *adminBackend) Withdraw(ctx context.Context, activity string, n int64) (admin.Change, error) {
	return b.adjust(ctx, activity, -n)
}

func (b *adminBackend) adjust(ctx context.Context, activity string, delta int64) (admin.Change, error) {
	act, ok := admin.ActionOf(ctx)
	if !ok {
		return admin.Change{}, fmt.Errorf("%w: a stock adjustment needs an audited action", admin.ErrInvalidArgument)
	}
	before, err := b.state(ctx, activity)
	if err != nil {
		return admin.Change{}, err
	}
	db := func(id string, d int64) error {
		_, err := operate.AdjustStock(ctx, b.a.in.DB, operate.AdjustParams{Activity: activity, ID: id, Delta: d, Operator: act.Operator, Reason: "admin"})
		return err
	}
	redis := func(id string, d int64) error {
		_, err := b.a.p.stock.Adjust(ctx, stock.AdjustParams{Activity: activity, ID: id, Delta: d})
		return err
	}
	first, second := db, redis
	if delta < 0 {
		first, second = redis, db
	}
	if err := first(act.ID, delta); err != nil {
		return admin.Change{}, mapErr(err)
	}
	if err := second(act.ID, delta); err != nil {
		// Undo the first store's step (a ledger entry of its own, under a
		// derived ID, so a retried undo applies once): the stores never
		// stay apart, and the operator retries the action as a whole.
		if uerr := first(act.ID+"~undo", -delta); uerr != nil {
			return admin.Change{}, fmt.Errorf("%w (and undoing the first step failed, reconcile the stock by hand: %v)", mapErr(err), uerr)
		}
		return admin.Change{}, mapErr(err)
	}
	after, err := b.state(ctx, activity)
	if err != nil {
		return admin.Change{}, err
	}
	// New units, new access tokens: the pool is topped up to the new
	// total × k (Issue never shrinks it; a withdrawal leaves tokens that
	// simply find less stock).
	if delta > 0 && activity == b.a.sale.key {
		if _, err := b.a.p.pool.Issue(ctx, activity, after.Total); err != nil {
			return admin.Change{}, mapErr(err)
		}
	}
	// A size of the sale in sizes: the pool is the sale's, topped up to
	// the sale's new total (every size together).
	if sale, _, ok := strings.Cut(activity, "/"); delta > 0 && ok && sale == b.a.sale.key {
		st, err := b.state(ctx, sale)
		if err != nil {
			return admin.Change{}, err
		}
		if _, err := b.a.p.pool.Issue(ctx, sale, st.Total); err != nil {
			return admin.Change{}, mapErr(err)
		}
	}
	return admin.Change{Before: before, After: after}, nil
}

// Reconcile compares the Redis ledger with the DB. A dry run releases
// nothing. An apply releases the reservations of p.Plan (the operator's
// dry run) that are still due, by the reconciler's own rules (no live
// order, past the grace period, no message pending, fenced in the DB
// first), and no other: it runs a reconciler over the ledger cut to the
// plan. Its counters, in-grace, pending and orphan lists are those of a
// dry run just before the releases.
func (b *adminBackend) Reconcile(ctx context.Context, p admin.ReconcileParams) (admin.ReconcileReport, error) {
	if b.dry == nil || (!p.DryRun && b.recon == nil) {
		return admin.ReconcileReport{}, fmt.Errorf("%w: the reconciler is not wired", admin.ErrUnavailable)
	}
	found, err := b.dry.Reconcile(ctx, p.Activity)
	if err != nil {
		return admin.ReconcileReport{}, mapErr(err)
	}
	out := admin.ReconcileReport{Activity: p.Activity, DryRun: p.DryRun, Reservations: int64(found.Reservations),
		ReservedUnits: found.ReservedUnits, LiveOrders: int64(found.LiveOrders), SoldUnits: found.SoldUnits,
		DBStock: found.DBStock, TotalStock: found.TotalStock, Drift: found.Drift, Conserved: found.Conserved,
		Release: found.Released, InGrace: found.InGrace, Pending: found.Pending, Orphans: found.Orphans,
		ReleaseErrors: int64(len(found.ReleaseErrors))}
	if p.DryRun {
		return out, nil
	}
	rec, err := b.planReconciler(p.Plan)
	if err != nil {
		return admin.ReconcileReport{}, err
	}
	applied, err := rec.Reconcile(ctx, p.Activity)
	if err != nil {
		return admin.ReconcileReport{}, mapErr(err)
	}
	out.Release = applied.Released
	out.Failed = slices.Sorted(maps.Keys(applied.ReleaseErrors))
	out.ReleaseErrors = int64(len(out.Failed))
	for _, id := range p.Plan {
		if !slices.Contains(out.Release, id) && applied.ReleaseErrors[id] == nil {
			out.Skipped = append(out.Skipped, id)
		}
	}
	slices.Sort(out.Skipped)
	for id, err := range applied.ReleaseErrors {
		b.a.log.Warn("admin reconcile: release failed", "activity", p.Activity, "reservation", id, "err", err)
	}
	return out, nil
}

// planReconciler is the service's reconciler (buildReconcilers: the same
// grace, pending check, results and releaser) over the ledger cut to plan:
// it can release a planned reservation and no other.
func (b *adminBackend) planReconciler(plan []string) (*reconcile.Reconciler, error) {
	in := make(map[string]bool, len(plan))
	for _, id := range plan {
		in[id] = true
	}
	a := b.a
	ledger := reconcile.Ledger(func(ctx context.Context, activity string, cursor uint64, count int64) ([]reconcile.Reservation, uint64, error) {
		page, next, err := a.ledgerPage(ctx, activity, cursor, count)
		if err != nil {
			return nil, 0, err
		}
		kept := make([]reconcile.Reservation, 0, len(page))
		for _, r := range page {
			if in[r.ID] {
				kept = append(kept, r)
			}
		}
		return kept, next, nil
	})
	pending := reconcile.Pending(func(ctx context.Context, resv string) (bool, error) {
		return outbox.HasPendingReservation(ctx, a.in.DB, resv)
	})
	return reconcile.NewReconciler(a.in.DB, ledger, order.ReleaserFunc(a.p.units.release),
		reconcile.WithGrace(a.cfg.ReconcileGrace), reconcile.WithPending(pending), reconcile.WithResults(a.p.results), reconcile.WithLogger(a.log))
}

func (b *adminBackend) outboxStats(ctx context.Context) (admin.OutboxStats, error) {
	bl, err := outbox.Stats(ctx, b.a.in.DB)
	if err != nil {
		return admin.OutboxStats{}, err
	}
	return admin.OutboxStats{Pending: bl.Pending, Failed: bl.Failed, OldestPending: bl.OldestPending}, nil
}

// OutboxStats counts the outbox's pending and FAILED rows.
func (b *adminBackend) OutboxStats(ctx context.Context) (admin.OutboxStats, error) {
	return b.outboxStats(ctx)
}

// OutboxRetry puts FAILED rows back to PENDING (attempts reset).
func (b *adminBackend) OutboxRetry(ctx context.Context, ids []int64) (admin.OutboxRetryResult, error) {
	before, err := b.outboxStats(ctx)
	if err != nil {
		return admin.OutboxRetryResult{}, err
	}
	if b.a.p.relay == nil {
		return admin.OutboxRetryResult{}, fmt.Errorf("%w: no outbox relay on this process", admin.ErrUnavailable)
	}
	n, err := b.a.p.relay.Requeue(ctx, ids...)
	if err != nil {
		return admin.OutboxRetryResult{}, err
	}
	after, err := b.outboxStats(ctx)
	return admin.OutboxRetryResult{Requeued: n, Before: before, After: after}, err
}

var banKinds = map[admin.BanKind]risk.Kind{admin.BanUser: risk.KindUser, admin.BanIP: risk.KindIP, admin.BanDevice: risk.KindDevice}

func (b *adminBackend) banned(ctx context.Context, kind admin.BanKind, id string) (*admin.Ban, error) {
	ban, ok, err := b.a.p.blacklist.Banned(ctx, banKinds[kind], id)
	if err != nil || !ok {
		return nil, mapErr(err)
	}
	return &admin.Ban{Kind: kind, ID: ban.ID, Reason: ban.Reason, Until: ban.Until, Permanent: ban.Permanent}, nil
}

// Ban bans a user, an IP or a device (for Duration, or escalating when 0).
func (b *adminBackend) Ban(ctx context.Context, p admin.BanParams) (admin.BanChange, error) {
	before, err := b.banned(ctx, p.Kind, p.ID)
	if err != nil {
		return admin.BanChange{}, err
	}
	if p.Duration > 0 {
		_, err = b.a.p.blacklist.AddFor(ctx, banKinds[p.Kind], p.ID, p.Reason, p.Duration)
	} else {
		_, err = b.a.p.blacklist.Add(ctx, banKinds[p.Kind], p.ID, p.Reason)
	}
	if err != nil {
		return admin.BanChange{}, mapErr(err)
	}
	after, err := b.banned(ctx, p.Kind, p.ID)
	return admin.BanChange{Before: before, After: after}, err
}

// Unban lifts a ban.
func (b *adminBackend) Unban(ctx context.Context, kind admin.BanKind, id string) (admin.BanChange, error) {
	before, err := b.banned(ctx, kind, id)
	if err != nil {
		return admin.BanChange{}, err
	}
	if err := b.a.p.blacklist.Remove(ctx, banKinds[kind], id); err != nil {
		return admin.BanChange{}, mapErr(err)
	}
	return admin.BanChange{Before: before}, nil
}

// Bans lists a page of the blacklist's bans of kind through its index
// (risk.Blacklist.List): by ID, from after, up to limit. Bans written
// before the index existed (or by hand) are enforced but not listed until
// their next Add.
func (b *adminBackend) Bans(ctx context.Context, kind admin.BanKind, after string, limit int) ([]admin.Ban, string, error) {
	rk, ok := banKinds[kind]
	if !ok {
		return nil, "", fmt.Errorf("%w: ban kind %q", admin.ErrInvalidArgument, kind)
	}
	page, next, err := b.a.p.blacklist.List(ctx, rk, after, limit)
	if err != nil {
		return nil, "", mapErr(err)
	}
	out := make([]admin.Ban, len(page))
	for i, x := range page {
		out[i] = admin.Ban{Kind: kind, ID: x.ID, Reason: x.Reason, Until: x.Until, Permanent: x.Permanent}
	}
	return out, next, nil
}

// adminLabelKey keys the operator labels of the audit log
// (admin.BearerToken): derived from the service secret through the stream
// ticket key, never from the admin token alone. With SECKILL_SECRET set it
// is the same on every instance and across restarts; without one it is
// random per process (and so are the labels, and with them the operators'
// Idempotency-Keys).
func (a *App) adminLabelKey() []byte {
	m := hmac.New(sha256.New, a.p.ticketKey)
	m.Write([]byte("seckill admin audit labels v1"))
	return m.Sum(nil)
}

// adminHandler builds the admin API over this service, or nil when no
// admin token is configured.
func (a *App) adminHandler() (http.Handler, error) {
	if a.cfg.AdminToken == "" {
		return nil, nil
	}
	auth, err := admin.BearerToken(a.cfg.AdminToken, a.adminLabelKey())
	if err != nil {
		return nil, fmt.Errorf("SECKILL_ADMIN_TOKEN: %w", err)
	}
	b := &adminBackend{a: a, orders: a.p.orders, recon: a.p.recon, dry: a.p.reconDry}
	h, err := admin.New(b, a.in.DB, auth, admin.WithPrefix("/admin/"), admin.WithLogger(a.log))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.AutoMigrate(ctx); err != nil {
		return nil, err
	}
	return a.fairAdmin(h, auth), nil
}
