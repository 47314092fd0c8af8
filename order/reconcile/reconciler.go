package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"gorm.io/gorm"
)

// Report is what one [Reconciler.Reconcile] found and did for an activity.
type Report struct {
	Activity string
	DryRun   bool // nothing was released
	// ActivityMissing: seckill_activity has no row for Activity (wrong
	// database, deleted row, wrong ID). Reconcile then returns
	// [order.ErrActivityNotFound], releases nothing and fills only the ledger
	// fields: without the row the DB cannot vouch that a reservation has
	// no order, and its stock is unknown, not 0.
	ActivityMissing bool

	Reservations  int   // entries in the Redis ledger
	ReservedUnits int64 // their quantity
	// LiveOrders: the orders holding units, CREATED + PAID + REFUNDED
	// without a restock to the sale (a refund restocked to the sale gave
	// its units back to DBStock, as a cancellation does), and likewise the
	// order lines of this activity (an order with lines counts by its
	// lines: a line is its own reservation, "<id>#<i>", and its own units).
	LiveOrders int
	SoldUnits  int64 // their quantity: the truth for sold units
	DBStock    int64 // seckill_activity.stock
	TotalStock int64 // seckill_activity.total_stock
	Conserved  bool  // DBStock + SoldUnits == TotalStock
	// Drift is TotalStock − DBStock − SoldUnits: units the DB lost (> 0)
	// or made up (< 0); 0 when Conserved. [AdjustStock] moves stock and
	// total_stock together, so top-ups and withdrawals make no drift.
	Drift int64

	Matched int // reservations with a live order
	// Released: reservations without a live order, older than the grace
	// period and with no message pending — released (or, in a dry run,
	// to be released). Includes reservations of cancelled orders, and of
	// orders refunded with a restock to the sale, whose release was lost. Only releases that took effect are listed: a
	// failed one is in ReleaseErrors instead.
	Released []string
	// InGrace: reservations without an order, younger than the grace
	// period (their message may still be on its way); left alone.
	InGrace []string
	// Pending: reservations whose message [Pending] says is still queued.
	Pending []string
	// Orphans: order numbers of live orders (or of live lines) whose
	// reservation is not in the ledger. Reported only: the DB is the truth and the order stands; a
	// human (or stock's own repair) decides about the Redis side.
	Orphans []string
	// ReleaseErrors: reservations whose release (or whose [Pending] check)
	// failed, by ID; none of them is in Released. The next run retries.
	ReleaseErrors map[string]error
}

// Reconciler compares the Redis reservation ledger of an activity with the
// orders in the database and repairs Redis from the DB, which is the truth
// for sold units (every accepted reservation ends as exactly one order or
// one release).
//
// A reservation is released when it has no live order, is older than the
// grace period ([WithGrace], default 10 min) and [Pending] (if set) does not
// report its message as still queued. The release goes through a [Fence]:
// the reservation is first recorded as released in the database, so a
// message that is still in Kafka (a consumer lagging past the grace) is
// answered FAILED ([ReasonReleased]) when it arrives and deducts nothing;
// and a reservation whose order committed in the meantime is not released.
// The grace period is therefore about not failing buyers needlessly, not
// about safety. A reservation of a CANCELLED order is released regardless
// of age (cancel's own release was lost). Live orders without a reservation are
// reported, never deleted. An activity without a DB row is reported
// ([order.ErrActivityNotFound]) and left alone. Release is idempotent, so
// running two reconcilers at once is safe, if wasteful. Safe for
// concurrent use.
type Reconciler struct {
	db     *gorm.DB
	ledger Ledger
	rel    order.Releaser
	fence  *handoff.Fence
	tables order.Tables
	o      options
}

// NewReconciler returns a reconciler. Options: [WithGrace], [WithDryRun],
// [WithPending], [WithClock], [WithTables], [WithObserver], and
// [WithResults] and [WithLogger] for the [Fence] it releases through.
func NewReconciler(db *gorm.DB, ledger Ledger, rel order.Releaser, opts ...Option) (*Reconciler, error) {
	if db == nil || ledger == nil || rel == nil {
		return nil, fmt.Errorf("%w: NewReconciler needs a db, a ledger and a releaser", order.ErrInvalidConfig)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.grace < 0 {
		return nil, fmt.Errorf("%w: negative grace", order.ErrInvalidConfig)
	}
	tables, err := order.TablesOf(order.WithTables(o.tables))
	if err != nil {
		return nil, err
	}
	fence, err := handoff.NewFence(db, rel, o.fenceOptions()...)
	if err != nil {
		return nil, err
	}
	return &Reconciler{db: db, ledger: ledger, rel: rel, fence: fence, tables: tables, o: o}, nil
}

const (
	ledgerPage     = 500       // reservations asked of the Ledger per page
	maxLedgerPages = 1_000_000 // a cursor that has not ended by then never will
)

// Reconcile checks one activity. The error is non-nil when the ledger or
// the DB could not be read, or when the activity has no row in the DB
// ([order.ErrActivityNotFound], with Report.ActivityMissing set): then nothing is
// released. An activity that is not [order.ValidID] fails with [order.ErrInvalidID].
// Individual release failures are in the report.
func (r *Reconciler) Reconcile(ctx context.Context, activity string) (rep Report, err error) {
	if r.o.observer != nil {
		start := time.Now()
		defer func() { r.observeReconcile(ctx, start, rep, err) }()
	}
	rep = Report{Activity: activity, DryRun: r.o.dryRun, ReleaseErrors: map[string]error{}}
	if err := checkActivity(activity); err != nil {
		return rep, err
	}
	resv, err := r.readLedger(ctx, activity)
	if err != nil {
		return rep, err
	}
	for _, x := range resv {
		rep.ReservedUnits += x.Qty
	}
	rep.Reservations = len(resv)
	if err := r.readActivity(ctx, &rep); err != nil {
		return rep, err
	}
	status, err := r.readOrders(ctx, &rep, resv)
	if err != nil {
		return rep, err
	}
	r.settle(ctx, &rep, resv, status)
	slices.Sort(rep.Orphans)
	return rep, nil
}

// readLedger reads every reservation the Redis ledger holds for activity,
// by reservation ID.
func (r *Reconciler) readLedger(ctx context.Context, activity string) (map[string]Reservation, error) {
	resv := map[string]Reservation{}
	var cursor uint64
	for pages := 0; ; pages++ {
		page, next, err := r.ledger(ctx, activity, cursor, ledgerPage)
		if err != nil {
			return nil, fmt.Errorf("order: reconcile %s: ledger: %w", activity, err)
		}
		for _, x := range page {
			resv[x.ID] = x
		}
		if next == 0 {
			return resv, nil
		}
		if pages > maxLedgerPages {
			return nil, fmt.Errorf("order: reconcile %s: ledger cursor does not end", activity)
		}
		cursor = next
	}
}

// readActivity fills the report's DB stock fields from the activity row;
// without the row it sets ActivityMissing and fails with
// [order.ErrActivityNotFound].
func (r *Reconciler) readActivity(ctx context.Context, rep *Report) error {
	var acts []order.Activity
	if err := r.db.WithContext(ctx).Table(r.tables.Activity).Select("id", "stock", "total_stock").
		Where("id = ?", rep.Activity).Limit(1).Find(&acts).Error; err != nil {
		return fmt.Errorf("order: reconcile %s: activity: %w", rep.Activity, err)
	}
	if len(acts) == 0 {
		rep.ActivityMissing = true
		return fmt.Errorf("%w: reconcile %s: %d reservations in the ledger, none released", order.ErrActivityNotFound, rep.Activity, rep.Reservations)
	}
	rep.DBStock, rep.TotalStock = acts[0].Remaining, acts[0].Stock
	return nil
}

// readOrders counts the activity's live orders into the report (sold
// units, orphans, conservation, drift) and returns every order's status
// by reservation ID.
func (r *Reconciler) readOrders(ctx context.Context, rep *Report, resv map[string]Reservation) (map[string]string, error) {
	type row struct {
		OrderNo       string
		ReservationID string
		Qty           int64
		Status        string
		Restock       string
	}
	var rows []row
	if err := r.db.WithContext(ctx).Table(r.tables.Order).Select("order_no", "reservation_id", "qty", "status", "restock").
		Where("activity_id = ?", rep.Activity).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("order: reconcile %s: orders: %w", rep.Activity, err)
	}
	// The lines of the orders with lines in this activity: each is its own
	// reservation ("<id>#<i>") and its own units.
	var lines []row
	if err := r.db.WithContext(ctx).Table(r.tables.Line).Select("order_no", "reservation_id", "qty", "status", "restock").
		Where("activity_id = ?", rep.Activity).Find(&lines).Error; err != nil {
		return nil, fmt.Errorf("order: reconcile %s: order lines: %w", rep.Activity, err)
	}
	status := make(map[string]string, len(rows)+len(lines))
	for _, o := range append(rows, lines...) {
		if o.Qty == 0 {
			continue // an order with lines: its units and reservations are its lines'
		}
		if !holds(o.Status, o.Restock) {
			status[o.ReservationID] = order.OrderCancelled // its units went back: its reservation must go
			continue
		}
		status[o.ReservationID] = o.Status // "" for a line that follows its order: live
		rep.LiveOrders++
		rep.SoldUnits += o.Qty
		if _, ok := resv[o.ReservationID]; !ok {
			rep.Orphans = append(rep.Orphans, o.OrderNo)
		}
	}
	rep.Conserved = rep.DBStock+rep.SoldUnits == rep.TotalStock
	rep.Drift = rep.TotalStock - rep.DBStock - rep.SoldUnits
	return status, nil
}

// holds reports whether an order of status (and restock, when refunded)
// holds its units: CREATED, PAID, and REFUNDED unless restocked to the
// sale ("sale": the refund gave them back, as a cancellation does).
func holds(status, restock string) bool {
	switch status {
	case order.OrderCancelled:
		return false
	case order.OrderRefunded:
		return restock != "sale"
	}
	return true
}

// settle decides, reservation by reservation in ID order, what becomes of
// each: matched by a live order, left in its grace period or with its
// message pending, or released.
func (r *Reconciler) settle(ctx context.Context, rep *Report, resv map[string]Reservation, status map[string]string) {
	now := r.o.clock.Now()
	pending := r.passPending(rep.Activity)
	ids := make([]string, 0, len(resv))
	for id := range resv {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		x := resv[id]
		st, hasOrder := status[id]
		switch {
		case hasOrder && st != order.OrderCancelled:
			rep.Matched++
		case hasOrder: // cancelled, but still held in Redis
			r.release(ctx, rep, x, true)
		case r.due(ctx, rep, x, now, pending):
			r.release(ctx, rep, x, false)
		}
	}
}

// due reports whether a reservation without an order may be released: it
// is past the grace period and neither [Pending] nor the pass's pending
// ([PendingPass]) reports its message as on its way. It records the other
// cases in the report.
func (r *Reconciler) due(ctx context.Context, rep *Report, x Reservation, now time.Time, pass func(context.Context) (Pending, error)) bool {
	if now.Sub(x.At) < r.o.grace {
		rep.InGrace = append(rep.InGrace, x.ID)
		return false
	}
	for _, ask := range []func() (Pending, error){
		func() (Pending, error) { return r.o.pending, nil },
		func() (Pending, error) { return pass(ctx) },
	} {
		pending, err := ask()
		if err != nil {
			rep.ReleaseErrors[x.ID] = fmt.Errorf("order: pending %s: %w", x.ID, err)
			return false
		}
		if pending == nil {
			continue
		}
		p, err := pending(ctx, x.ID)
		if err != nil {
			rep.ReleaseErrors[x.ID] = fmt.Errorf("order: pending %s: %w", x.ID, err)
			return false
		}
		if p {
			rep.Pending = append(rep.Pending, x.ID)
			return false
		}
	}
	return true
}

// passPending returns the pass's pending, built from [PendingPass] at its
// first call (once per Reconcile, and only when a reservation needs it);
// it returns a nil Pending without a PendingPass.
func (r *Reconciler) passPending(activity string) func(ctx context.Context) (Pending, error) {
	var (
		done bool
		p    Pending
		err  error
	)
	return func(ctx context.Context) (Pending, error) {
		if r.o.pass == nil {
			return nil, nil
		}
		if !done {
			done = true
			if p, err = r.o.pass(ctx, activity); err == nil && p == nil {
				err = fmt.Errorf("%w: the pending pass returned no Pending", order.ErrInvalidConfig)
			}
		}
		return p, err
	}
}

// release gives a reservation back (or, in a dry run, only lists it). A
// cancelled order owns its reservation (the cancel's release was lost): a
// plain release. Without an order it is fenced in the DB first, so a late
// message deducts nothing; a reservation whose message committed since the
// orders were read counts as matched.
func (r *Reconciler) release(ctx context.Context, rep *Report, x Reservation, cancelled bool) {
	if r.o.dryRun {
		rep.Released = append(rep.Released, x.ID)
		return
	}
	var err error
	if cancelled {
		err = r.rel.Release(context.WithoutCancel(ctx), rep.Activity, x.ID)
	} else {
		err = r.fence.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: rep.Activity, User: x.User, ReservationID: x.ID})
	}
	switch {
	case errors.Is(err, handoff.ErrConsumed):
		rep.Matched++
		return
	case err != nil:
		rep.ReleaseErrors[x.ID] = err // not released: not in Released
		return
	}
	rep.Released = append(rep.Released, x.ID)
}

// observeReconcile reports one Reconcile; callers check r.o.observer.
func (r *Reconciler) observeReconcile(ctx context.Context, start time.Time, rep Report, err error) {
	if err == nil {
		r.o.observer.Observe(ctx, observe.Event{Stage: StageReconcileDrift, Outcome: observe.OK, Activity: rep.Activity, Gauge: true,
			Value: float64(rep.Drift)})
	}
	e := observe.Event{Stage: StageReconcile, Outcome: observe.OK, Activity: rep.Activity, Value: float64(len(rep.Released)), Err: err}
	if err != nil {
		e.Outcome = observe.Error
	}
	e.Duration = time.Since(start)
	r.o.observer.Observe(ctx, e)
}
