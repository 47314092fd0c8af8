package handoff

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/dbx"
	"gorm.io/gorm"
)

// fenceMsgPrefix marks the message_dedup rows written by [Fence.Release].
const fenceMsgPrefix = "fence:"

// ReleaseRequest names one reservation for [Fence.Release].
type ReleaseRequest struct {
	Activity      string // the activity ID ([order.ValidID]), or a variant's "a/v"
	User          string // the buyer ([order.ValidID]); "" when unknown (the result is then found by reservation only)
	ReservationID string
	Reason        string // stored as the FAILED outcome's Reason; default ReasonReleased
	// Lines, for a cart (order.Message.Lines): the reservation is fenced
	// as one (its message then finds the fence), and what goes back to
	// Redis is each line's reservation, "<ReservationID>#<i>" in line i's
	// activity.
	Lines []order.Line
}

// Fence decides, once per reservation and in one place, between "consumed"
// (an order) and "released" (no order, units back in Redis). The decision is
// one unique key in the database: message_dedup.reservation_id. The
// consumer's transaction writes the reservation's dedup row together with
// its order; Fence.Release writes a FAILED dedup row for the reservation
// before it releases anything in Redis. Whichever commits first wins and the
// other sees a duplicate key:
//
//   - a message whose reservation was fenced as released is answered FAILED
//     (ReasonReleased) and deducts nothing, however late it arrives;
//   - a Release of a consumed reservation returns [ErrConsumed] and gives
//     back nothing.
//
// Redis is therefore released only for reservations that can never become
// an order. The fence holds while the dedup row lives: operate.PruneDedup's
// horizon must exceed the oldest message still deliverable (Kafka retention,
// outbox age). Fence implements [order.Releaser] for the [Submitter]; the
// reconcile.Reconciler uses one internally. Safe for concurrent use.
type Fence struct {
	db     *gorm.DB
	rel    order.Releaser
	tables order.Tables
	o      options
}

// NewFence returns a fence over db that gives units back through rel (the
// raw Redis release, stock.Deductor.Release). Options: [WithClock],
// [WithResults] (a FAILED result is recorded after a release),
// [WithTables], [WithLogger].
func NewFence(db *gorm.DB, rel order.Releaser, opts ...FenceOption) (*Fence, error) {
	if db == nil || rel == nil {
		return nil, fmt.Errorf("%w: NewFence needs a db and a releaser", order.ErrInvalidConfig)
	}
	o, err := buildOptions(opts, FenceOption.applyFence)
	if err != nil {
		return nil, err
	}
	tables, err := order.TablesOf(order.WithTables(o.tables))
	if err != nil {
		return nil, err
	}
	return &Fence{db: db, rel: rel, tables: tables, o: o}, nil
}

// Release implements [order.Releaser]: it fences the reservation with reason
// [ReasonReleased] and an unknown user, then releases it.
func (f *Fence) Release(ctx context.Context, activity string, reservationID string) error {
	return f.ReleaseFor(ctx, ReleaseRequest{Activity: activity, ReservationID: reservationID})
}

// ReleaseFor fences r's reservation as released in the database, then
// releases it in Redis. It returns [ErrConsumed] when the reservation has an
// order (nothing is released). A reservation fenced earlier is released
// again (Redis release is idempotent), so a retry after a failed Redis
// release finishes the job. On a database error nothing was decided and
// nothing is released: retry later.
//
// A reservation ID that is not [order.ValidReservationID] (longer than the
// columns, or bytes they cannot compare — made under an earlier rule) can
// never become an order, since no message with it passes
// [order.Message.Validate]: it is released without a fence row (none could be
// written), unless an order under that ID exists, which wins
// ([ErrConsumed]). Only an empty ID is refused ([order.ErrInvalidMessage]).
func (f *Fence) ReleaseFor(ctx context.Context, r ReleaseRequest) error {
	if r.ReservationID == "" {
		return fmt.Errorf("%w: empty reservation ID", order.ErrInvalidMessage)
	}
	if err := checkActivity(r.Activity); err != nil {
		return err
	}
	for _, l := range r.Lines {
		if err := checkActivity(l.ActivityID); err != nil {
			return err
		}
	}
	if r.User != "" {
		if err := checkID("user", r.User); err != nil {
			return err
		}
	}
	if r.Reason == "" {
		r.Reason = ReasonReleased
	}
	var out outcome
	var err error
	if order.ValidReservationID(r.ReservationID) {
		out, err = f.fence(ctx, r)
	} else {
		out, err = f.refused(ctx, r)
	}
	if err != nil {
		return err
	}
	if out.Status == order.StatusSuccess {
		return fmt.Errorf("%w: %s (order %s)", ErrConsumed, r.ReservationID, out.OrderNo)
	}
	if len(r.Lines) == 0 {
		if err := f.rel.Release(context.WithoutCancel(ctx), r.Activity, r.ReservationID); err != nil {
			return fmt.Errorf("order: release %s after fencing: %w", r.ReservationID, err)
		}
	}
	for i, l := range r.Lines {
		id := r.ReservationID + "#" + strconv.Itoa(i)
		if err := f.rel.Release(context.WithoutCancel(ctx), l.ActivityID, id); err != nil {
			return fmt.Errorf("order: release %s after fencing: %w", id, err)
		}
	}
	if f.o.results != nil && r.User != "" {
		if err := f.o.results.SetMany(context.WithoutCancel(ctx), []order.Result{{Activity: r.Activity, User: r.User,
			Status: order.StatusFailed, Reason: out.Reason, ReservationID: r.ReservationID, At: f.o.clock.Now()}}); err != nil {
			f.o.logger.WarnContext(ctx, "order: failed result not written (the DB answers)", "err", err)
		}
	}
	return nil
}

// refused decides a reservation whose ID order refuses (not
// [order.ValidReservationID]: longer than the columns, or bytes they cannot
// compare): no message with it passes [order.Message.Validate], so it can never
// become an order and needs no fence row (none could be written). An order
// under that ID made by an older release (whose rule differed) still wins:
// it is looked up first.
func (f *Fence) refused(ctx context.Context, r ReleaseRequest) (outcome, error) {
	var o []order.Order
	if err := f.db.WithContext(ctx).Table(f.tables.Order).Select("order_no").Where("reservation_id = ?", r.ReservationID).
		Limit(1).Find(&o).Error; err != nil {
		return outcome{}, fmt.Errorf("order: fence %s: %w", r.ReservationID, err)
	}
	if len(o) == 1 {
		return outcome{Status: order.StatusSuccess, OrderNo: o[0].OrderNo}, nil
	}
	return outcome{Status: order.StatusFailed, Reason: r.Reason}, nil
}

// fenceMsgID is the msg_id of the fence row of reservationID: "fence:" and
// the ID, or, when that exceeds the 64 bytes of msg_id, "fence:" and 58 hex
// digits of the ID's SHA-256 (cutting the ID instead would give every
// reservation sharing its first 58 bytes one row). The row is found by
// reservation_id; msg_id only has to be unique.
func fenceMsgID(reservationID string) string {
	const maxMsgID = 64
	if len(fenceMsgPrefix)+len(reservationID) <= maxMsgID {
		return fenceMsgPrefix + reservationID
	}
	sum := sha256.Sum256([]byte(reservationID))
	return (fenceMsgPrefix + hex.EncodeToString(sum[:]))[:maxMsgID]
}

// fence writes the FAILED dedup row of r, or reads the row that won.
func (f *Fence) fence(ctx context.Context, r ReleaseRequest) (outcome, error) {
	now := f.o.clock.Now()
	m := order.Message{MsgID: fenceMsgID(r.ReservationID), ReservationID: r.ReservationID,
		ActivityID: r.Activity, UserID: r.User}
	d := order.Dedup{MsgID: m.MsgID, ReservationID: m.ReservationID, ActivityID: m.ActivityID, UserID: m.UserID,
		Outcome: string(order.StatusFailed), Reason: r.Reason, CreatedAt: now}
	err := f.db.WithContext(ctx).Table(f.tables.Dedup).Create(&d).Error
	if err == nil {
		return outcome{Status: order.StatusFailed, Reason: r.Reason}, nil
	}
	if !dbx.IsDuplicate(err) {
		return outcome{}, fmt.Errorf("order: fence %s: %w", r.ReservationID, err)
	}
	return lookupReservation(ctx, f.db, f.tables, m)
}

// lookupReservation answers m from the dedup row of its message or of its
// reservation (whichever exists), or from the reservation's order.
func lookupReservation(ctx context.Context, db *gorm.DB, t order.Tables, m order.Message) (outcome, error) {
	var d []order.Dedup
	if err := db.WithContext(ctx).Table(t.Dedup).Where("msg_id = ? OR reservation_id = ?", m.MsgID, m.ReservationID).
		Limit(2).Find(&d).Error; err != nil {
		return outcome{}, fmt.Errorf("order: lookup %s: %w", m.ReservationID, err)
	}
	for _, row := range d {
		if row.ReservationID == m.ReservationID {
			return outcomeOf(row), nil
		}
	}
	if len(d) > 0 {
		return outcomeOf(d[0]), nil
	}
	var o []order.Order
	if err := db.WithContext(ctx).Table(t.Order).Select("order_no").Where("reservation_id = ?", m.ReservationID).
		Limit(1).Find(&o).Error; err != nil {
		return outcome{}, fmt.Errorf("order: lookup %s: %w", m.ReservationID, err)
	}
	if len(o) == 1 {
		return outcome{Status: order.StatusSuccess, OrderNo: o[0].OrderNo}, nil
	}
	// A concurrent writer rolled back after our conflict: retry.
	return outcome{}, fmt.Errorf("order: lookup %s: dedup row vanished", m.ReservationID)
}

// outcome is what the database decided for a reservation: an order
// (SUCCESS, OrderNo) or none (FAILED, Reason).
type outcome struct {
	Status  order.Status
	OrderNo string
	Reason  string
}

func outcomeOf(d order.Dedup) outcome {
	return outcome{Status: order.Status(d.Outcome), OrderNo: d.OrderNo, Reason: d.Reason}
}
