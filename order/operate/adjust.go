package operate

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/dbx"
	"gorm.io/gorm"
)

// Errors of [AdjustStock] and [SetActivityStatus].
var (
	// ErrInsufficientStock is returned by [AdjustStock] when a withdrawal
	// would take the activity's stock below 0 (units already sold or
	// reserved cannot be withdrawn). Nothing was written.
	ErrInsufficientStock = errors.New("order: insufficient stock for the adjustment")

	// ErrAdjustConflict is returned by [AdjustStock] when the adjustment ID
	// was already used for another activity or another delta. Nothing was
	// written.
	ErrAdjustConflict = errors.New("order: adjustment id already used with other values")

	// ErrInvalidAdjust reports [AdjustParams] that fail validation, or an
	// unknown [order.ActivityStatus].
	ErrInvalidAdjust = errors.New("order: invalid adjustment")
)

// Limits of [AdjustParams] fields, in bytes: the widths of their columns.
const (
	maxAdjustIDLen = 128
	maxOperatorLen = 64
	maxReasonLen   = 255
)

// AdjustParams is one stock adjustment of an activity.
type AdjustParams struct {
	Activity string // the activity ([order.ValidID]), or a size of a sale in sizes ("a/v", stock.VariantOf)
	// ID is the caller's idempotency key: 1 to 128 bytes of
	// printable ASCII without spaces (a UUID, "topup-2026-12-01-1"),
	// compared byte for byte. Sending the same adjustment again under the
	// same ID changes nothing.
	ID       string
	Delta    int64     // units: > 0 a top-up, < 0 a withdrawal; not 0
	Operator string    // who, at most 64 bytes of UTF-8
	Reason   string    // why, at most 255 bytes of UTF-8
	At       time.Time // recorded as created_at; zero means time.Now()
}

func (p AdjustParams) validate() error {
	if err := checkID("activity", p.Activity); err != nil {
		return err
	}
	if p.ID == "" || len(p.ID) > maxAdjustIDLen {
		return fmt.Errorf("%w: id must be 1..%d bytes (got %d)", ErrInvalidAdjust, maxAdjustIDLen, len(p.ID))
	}
	for i := 0; i < len(p.ID); i++ {
		if c := p.ID[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: id must be printable ASCII without spaces (byte %d is %#x)", ErrInvalidAdjust, i, c)
		}
	}
	switch {
	case p.Delta == 0:
		return fmt.Errorf("%w: delta must not be 0", ErrInvalidAdjust)
	case len(p.Operator) > maxOperatorLen || !utf8.ValidString(p.Operator):
		return fmt.Errorf("%w: operator must be at most %d bytes of UTF-8", ErrInvalidAdjust, maxOperatorLen)
	case len(p.Reason) > maxReasonLen || !utf8.ValidString(p.Reason):
		return fmt.Errorf("%w: reason must be at most %d bytes of UTF-8", ErrInvalidAdjust, maxReasonLen)
	}
	return nil
}

var errAdjustExists = errors.New("order: adjustment exists")

// Adjustment is a row of seckill_activity_adjust (or the table
// [order.WithTables] names): one entry of the activities' stock ledger, written
// by [AdjustStock]. An activity's total_stock is its initial stock plus the
// deltas of its adjustments.
type Adjustment struct {
	AdjustID   string    `gorm:"primaryKey;type:varchar(128);size:128"`
	ActivityID string    `gorm:"type:varchar(64);size:64;not null"`
	Delta      int64     `gorm:"not null"`
	Operator   string    `gorm:"size:64;not null;default:''"`
	Reason     string    `gorm:"size:255;not null;default:''"`
	CreatedAt  time.Time `gorm:"not null"`
	// Replay is true when [AdjustStock] answered from the stored row (the
	// ID was used before with the same activity and delta). Not stored.
	Replay bool `gorm:"-"`
}

// AdjustStock tops up (Delta > 0) or withdraws (Delta < 0) units of an
// activity in the database, as an entry of its stock ledger: ONE
// transaction inserts the adjustment row (primary key p.ID) and runs
//
//	UPDATE activity SET stock = stock + Delta, total_stock = total_stock + Delta
//	WHERE id = ? AND stock + Delta >= 0
//
// so both columns move together and the conservation stock + live orders
// = total_stock still holds (the [Reconciler] sees no drift). A
// withdrawal of more than the unsold stock fails with
// [ErrInsufficientStock], an unknown activity with [order.ErrActivityNotFound];
// then nothing is written.
//
// The ID makes it idempotent: an ID already recorded with the same
// activity and delta is a replay — the stored row is returned with
// Replay set and nothing changes (its Operator, Reason and At are the
// stored ones); with another activity or delta it fails with
// [ErrAdjustConflict]. Concurrent calls with one ID are settled by the
// primary key: one applies, the others replay. The adjustment runs
// alongside a running [order.Consumer] (the stock row is locked only for the
// UPDATE); make the same change to the Redis stock (the stock package)
// under the same ID.
//
// Invalid params fail with [ErrInvalidAdjust] or [order.ErrInvalidID]. The only
// option is [order.WithTables].
func AdjustStock(ctx context.Context, db *gorm.DB, p AdjustParams, opts ...order.TableOption) (Adjustment, error) {
	if db == nil {
		return Adjustment{}, fmt.Errorf("%w: AdjustStock needs a db", order.ErrInvalidConfig)
	}
	t, err := order.TablesOf(opts...)
	if err != nil {
		return Adjustment{}, err
	}
	if err := p.validate(); err != nil {
		return Adjustment{}, err
	}
	at := p.At
	if at.IsZero() {
		at = time.Now()
	}
	a := Adjustment{AdjustID: p.ID, ActivityID: p.Activity, Delta: p.Delta, Operator: p.Operator, Reason: p.Reason, CreatedAt: at}
	update := "UPDATE " + dbx.QuoteIdent(db, t.Activity) +
		" SET stock = stock + ?, total_stock = total_stock + ?, updated_at = ? WHERE id = ? AND stock + ? >= 0"
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The ledger row first: a second call with the same ID waits here
		// for the first to commit, then finds its row.
		if err := tx.Table(t.Adjust).Create(&a).Error; err != nil {
			if dbx.IsDuplicate(err) {
				return errAdjustExists
			}
			return err
		}
		res := tx.Exec(update, p.Delta, p.Delta, at, p.Activity, p.Delta)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 1 {
			return nil
		}
		var n int64
		if err := tx.Table(t.Activity).Where("id = ?", p.Activity).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: adjust %s: no activity %s", order.ErrActivityNotFound, p.ID, p.Activity)
		}
		return fmt.Errorf("%w: adjust %s: activity %s, delta %d", ErrInsufficientStock, p.ID, p.Activity, p.Delta)
	})
	switch {
	case err == nil:
		return a, nil
	case errors.Is(err, errAdjustExists):
		var rows []Adjustment
		if err := db.WithContext(ctx).Table(t.Adjust).Where("adjust_id = ?", p.ID).Limit(1).Find(&rows).Error; err != nil {
			return Adjustment{}, fmt.Errorf("order: adjust %s: read stored adjustment: %w", p.ID, err)
		}
		if len(rows) == 0 { // cannot happen: adjustments are never deleted
			return Adjustment{}, fmt.Errorf("order: adjust %s: stored adjustment vanished", p.ID)
		}
		stored := rows[0]
		if stored.ActivityID != p.Activity || stored.Delta != p.Delta {
			return Adjustment{}, fmt.Errorf("%w: %s was activity %s delta %d, now activity %s delta %d",
				ErrAdjustConflict, p.ID, stored.ActivityID, stored.Delta, p.Activity, p.Delta)
		}
		stored.Replay = true
		return stored, nil
	case errors.Is(err, ErrInsufficientStock), errors.Is(err, order.ErrActivityNotFound):
		return Adjustment{}, err
	default:
		return Adjustment{}, fmt.Errorf("order: adjust %s: %w", p.ID, err)
	}
}

// Adjustments returns the stock ledger of an activity, oldest first. The
// only option is [order.WithTables].
func Adjustments(ctx context.Context, db *gorm.DB, activity string, opts ...order.TableOption) ([]Adjustment, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: Adjustments needs a db", order.ErrInvalidConfig)
	}
	t, err := order.TablesOf(opts...)
	if err != nil {
		return nil, err
	}
	if err := checkID("activity", activity); err != nil {
		return nil, err
	}
	var rows []Adjustment
	if err := db.WithContext(ctx).Table(t.Adjust).Where("activity_id = ?", activity).
		Order("created_at").Order("adjust_id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("order: adjustments of %s: %w", activity, err)
	}
	return rows, nil
}

// SetActivityStatus records an operator's decision in the activity row's
// status column ([order.ActivityActive], [order.ActivityPaused], [order.ActivityClosed]).
// It does not stop reservations by itself: pause the sale where
// reservations are taken (the stock package) as well. An unknown status
// fails with [ErrInvalidAdjust], an unknown activity with
// [order.ErrActivityNotFound]. The only option is [order.WithTables].
func SetActivityStatus(ctx context.Context, db *gorm.DB, activity string, status order.ActivityStatus, opts ...order.TableOption) error {
	if db == nil {
		return fmt.Errorf("%w: SetActivityStatus needs a db", order.ErrInvalidConfig)
	}
	t, err := order.TablesOf(opts...)
	if err != nil {
		return err
	}
	if err := checkID("activity", activity); err != nil {
		return err
	}
	if status < order.ActivityActive || status > order.ActivityClosed {
		return fmt.Errorf("%w: unknown activity status %d", ErrInvalidAdjust, int8(status))
	}
	q := db.WithContext(ctx).Table(t.Activity).Where("id = ?", activity)
	res := q.Updates(map[string]any{"status": status, "updated_at": time.Now()})
	if res.Error != nil {
		return fmt.Errorf("order: set status of %s: %w", activity, res.Error)
	}
	if res.RowsAffected > 0 {
		return nil
	}
	// MySQL counts changed rows only: an unchanged row is 0 too.
	var n int64
	if err := db.WithContext(ctx).Table(t.Activity).Where("id = ?", activity).Count(&n).Error; err != nil {
		return fmt.Errorf("order: set status of %s: %w", activity, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: set status: no activity %s", order.ErrActivityNotFound, activity)
	}
	return nil
}
