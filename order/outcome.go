package order

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// lookupReservation answers m from the dedup row of its message or of its
// reservation (whichever exists), or from the reservation's order.
func lookupReservation(ctx context.Context, db *gorm.DB, t Tables, m Message) (Outcome, error) {
	var d []Dedup
	if err := db.WithContext(ctx).Table(t.Dedup).Where("msg_id = ? OR reservation_id = ?", m.MsgID, m.ReservationID).
		Limit(2).Find(&d).Error; err != nil {
		return Outcome{}, fmt.Errorf("order: lookup %s: %w", m.ReservationID, err)
	}
	for _, row := range d {
		if row.ReservationID == m.ReservationID {
			return outcomeOf(m, row), nil
		}
	}
	if len(d) > 0 {
		return outcomeOf(m, d[0]), nil
	}
	var o []Order
	if err := db.WithContext(ctx).Table(t.Order).Select("order_no").Where("reservation_id = ?", m.ReservationID).
		Limit(1).Find(&o).Error; err != nil {
		return Outcome{}, fmt.Errorf("order: lookup %s: %w", m.ReservationID, err)
	}
	if len(o) == 1 {
		return Outcome{Message: m, Status: StatusSuccess, OrderNo: o[0].OrderNo, Duplicate: true}, nil
	}
	// A concurrent writer rolled back after our conflict: retry.
	return Outcome{}, fmt.Errorf("order: lookup %s: dedup row vanished", m.ReservationID)
}

// Outcome is what the database made of one message.
type Outcome struct {
	Message Message
	// Status is StatusSuccess (an order exists for the reservation) or
	// StatusFailed (no order; the reservation must be released).
	Status     Status
	OrderID    int64  // set on a new order
	OrderNo    string // set when Status is SUCCESS
	Reason     string // set when Status is FAILED: ReasonSoldOut, ReasonDuplicate, ReasonUnknownActivity
	Duplicate  bool   // answered from an earlier delivery (dedup row or existing order)
	ExpireTime time.Time
}

// release reports whether the reservation of this outcome must be given back
// to Redis: a FAILED outcome owns no order. It stays true for a duplicate
// FAILED delivery, because the earlier release may not have happened
// (Release is idempotent).
func (o Outcome) release() bool { return o.Status == StatusFailed }

// result returns the user-facing status of the outcome.
func (o Outcome) result() Result {
	return Result{Activity: o.Message.ActivityID, User: o.Message.UserID, Status: o.Status,
		OrderNo: o.OrderNo, Reason: o.Reason, ReservationID: o.Message.ReservationID}
}

func dedupOf(m Message, status Status, orderNo, reason string, now time.Time) Dedup {
	return Dedup{MsgID: m.MsgID, ReservationID: m.ReservationID, ActivityID: m.ActivityID, UserID: m.UserID,
		Outcome: string(status), OrderNo: orderNo, Reason: reason, CreatedAt: now}
}

func outcomeOf(m Message, d Dedup) Outcome {
	return Outcome{Message: m, Status: Status(d.Outcome), OrderNo: d.OrderNo, Reason: d.Reason, Duplicate: true}
}
