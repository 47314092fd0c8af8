package order

import (
	"database/sql/driver"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Order statuses stored in seckill_order.status.
const (
	OrderCreated   = "CREATED"
	OrderPaid      = "PAID"
	OrderCancelled = "CANCELLED"
	// OrderRefunded is a paid order whose payment went back
	// (status.Canceller.Refund); its Restock column says where its units
	// went: "sale" (back to the sale's stock, DB and Redis), "shop" (the
	// shop's own inventory) or "none" (they stay sold).
	OrderRefunded = "REFUNDED"
)

// Cents is a money amount in hundredths, stored in a DECIMAL(12,2) column.
type Cents int64

// String formats c as "12.34".
func (c Cents) String() string {
	sign := ""
	v := int64(c)
	if v < 0 {
		sign, v = "-", -v
	}
	frac := strconv.FormatInt(v%100, 10)
	if len(frac) == 1 {
		frac = "0" + frac
	}
	return sign + strconv.FormatInt(v/100, 10) + "." + frac
}

// Value implements driver.Valuer.
func (c Cents) Value() (driver.Value, error) { return c.String(), nil }

// Scan implements sql.Scanner for DECIMAL text, float and integer values.
func (c *Cents) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c = 0
	case int64:
		*c = Cents(v * 100)
	case float64:
		*c = Cents(math.Round(v * 100))
	case []byte:
		return c.parse(string(v))
	case string:
		return c.parse(v)
	default:
		return fmt.Errorf("order: scan cents from %T", src)
	}
	return nil
}

func (c *Cents) parse(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return fmt.Errorf("order: scan cents %q: %w", s, err)
	}
	*c = Cents(math.Round(f * 100))
	return nil
}

// RawJSON is a JSON value kept as its text: the type of [Order.Ext]. Like
// json.RawMessage it marshals as the JSON itself (null when empty); in the
// database it is text, NULL when empty, scanned from the string or bytes a
// driver returns.
type RawJSON []byte

// MarshalJSON returns r itself, or null when r is empty.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// UnmarshalJSON keeps a copy of b; null becomes empty.
func (r *RawJSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = nil
		return nil
	}
	*r = append((*r)[:0], b...)
	return nil
}

// Value implements driver.Valuer: the text, or NULL when r is empty.
func (r RawJSON) Value() (driver.Value, error) {
	if len(r) == 0 {
		return nil, nil
	}
	return string(r), nil
}

// Scan implements sql.Scanner for text, bytes and NULL.
func (r *RawJSON) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*r = nil
	case string:
		*r = RawJSON(v)
	case []byte:
		*r = append(RawJSON(nil), v...)
	default:
		return fmt.Errorf("order: scan JSON text from %T", src)
	}
	return nil
}

// Activity is a row of seckill_activity (or the table [WithTables] names).
// ID is the activity's ID, a [ValidID] string chosen by the application
// (the one stock and the messages use; no auto-increment). The fields
// Stock, PerUserLimit, Start and End mean what they mean in stock.Activity
// (their columns keep the names total_stock, user_limit, start_time and
// end_time). Stock is the units on sale; Remaining (column stock) is the
// DB guard: the consumer only ever runs UPDATE … SET stock = stock - n
// WHERE id = ? AND stock >= n. PerUserLimit is the per-user cap; when it
// is 1 the DB also enforces one live order per (user, activity).
//
// The ID columns (here and the user_id and activity_id of [Order] and
// [Dedup]) are VARCHAR(64), their reservation_id columns VARCHAR(128)
// ([ValidReservationID]); on MySQL/MariaDB [AutoMigrate] and schema.sql
// make them all CHARACTER SET ascii COLLATE ascii_bin, so that they compare
// byte for byte as Redis does ("Alice" and "alice" are two buyers).
type Activity struct {
	ID            string         `gorm:"primaryKey;type:varchar(64);size:64"`
	Name          string         `gorm:"size:128;not null;default:''"`
	ProductID     int64          `gorm:"not null;default:0"`
	ProductName   string         `gorm:"size:255;not null;default:''"`
	OriginalPrice Cents          `gorm:"type:decimal(12,2);not null;default:0"`
	ActivityPrice Cents          `gorm:"type:decimal(12,2);not null;default:0"`
	Stock         int64          `gorm:"column:total_stock;not null;default:0"`
	Remaining     int64          `gorm:"column:stock;not null;default:0"`
	PerUserLimit  int64          `gorm:"column:user_limit;not null;default:1"`
	Version       int64          `gorm:"not null;default:0"`
	Status        ActivityStatus `gorm:"not null;default:1"` // ActivityActive, ActivityPaused, … (operate.SetActivityStatus)
	Start         time.Time      `gorm:"column:start_time;not null"`
	End           time.Time      `gorm:"column:end_time;not null"`
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// TableName implements gorm's Tabler: the default name (see [Order.TableName]).
func (Activity) TableName() string { return defaultActivityTable }

// Order is a row of seckill_order (or the table [WithTables] names).
//
// LiveSlot is 1 while the order is live (CREATED or PAID) and the
// activity's PerUserLimit is 1, and NULL otherwise; UNIQUE(user_id,
// activity_id, live_slot) is therefore "UNIQUE(user_id, activity_id) when
// the cap is 1" — NULLs never collide (MySQL, MariaDB, PostgreSQL and SQLite
// alike), so caps above 1 and re-buying after a cancellation still work.
// Caps above 1 are checked by the [Processor] under a per-buyer lock. The
// same index serves lookups by (user, activity).
//
// ProductID, ProductName and Price are the sale's snapshot, written once
// in the consumer's transaction: the product of the activity row as it
// was then, and the unit price — the message's [Message.Price], else the
// activity price read in that transaction. Ext is the message's extension
// payload ([Message.Ext]), NULL without one.
//
// The struct tags describe the columns only: the secondary indexes, named
// after the table, are created by [AutoMigrate] (so migrate with it, not
// with gorm's AutoMigrate on Order).
type Order struct {
	ID            int64  `gorm:"primaryKey;autoIncrement:false"`
	OrderNo       string `gorm:"size:32;not null"`
	ReservationID string `gorm:"type:varchar(128);size:128;not null"` // ValidReservationID
	UserID        string `gorm:"type:varchar(64);size:64;not null"`
	ActivityID    string `gorm:"type:varchar(64);size:64;not null"`
	LiveSlot      *int8
	Qty           int64     `gorm:"not null"`
	Price         Cents     `gorm:"type:decimal(12,2);not null;default:0"` // unit price at the time of sale
	ProductID     int64     `gorm:"not null;default:0"`
	ProductName   string    `gorm:"size:255;not null;default:''"`
	Ext           RawJSON   `gorm:"type:text"` // opaque JSON, at most maxExtSize bytes; NULL when absent
	Status        string    `gorm:"size:16;not null"`
	ExpireTime    time.Time `gorm:"not null"`
	PayTime       *time.Time
	CancelTime    *time.Time
	RefundTime    *time.Time // set with OrderRefunded
	Restock       string     `gorm:"size:8;not null;default:''"` // of a refunded order: "sale", "shop" or "none"; else ''
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Headers are the Kafka headers of the message that made the order
	// ([Message.Headers]), set on the orders a [TxHook] gets; not a column,
	// nil when read from the database.
	Headers map[string]string `gorm:"-" json:"-"`
	// Lines are the lines of an order made from a message with
	// [Message.Lines], rows of seckill_order_line (see [Line]), in line
	// order; such an order's own Qty and Price are 0 (its units and prices
	// are its lines'; Qty 0 tells such an order, whether or not Lines was
	// read), its LiveSlot NULL. Not a column: set on the orders a
	// [TxHook] gets and by the readers of order/status; nil for an order
	// without lines (today's single-line order, which writes no line row).
	Lines []Line `gorm:"-" json:",omitempty"`
}

// Line is one line of an order with lines: a row of seckill_order_line (or
// the table [WithTables] names), keyed by (OrderNo, LineNo), and the
// element of [Message.Lines] (there only Activity, Qty and Price are set:
// the JSON fields activity, qty, price).
//
// Line i of the order of reservation R holds the stock reservation
// "R#i" (stock.Deductor.ReserveLines records line i under that ID), its
// ReservationID. Activity is an activity ID or a variant's activity string
// "a/v" (stock.VariantOf: both parts [ValidID], at most [MaxIDLen] bytes
// in all); its stock guard is the activity row of that ID — a variant's
// DB stock is the seckill_activity row with id "a/v". Price is the unit
// price in cents (0 in a message: the activity price in the DB).
//
// Status is the line's own state: "" while it follows its order (live
// while the order is CREATED or PAID); [OrderCancelled] once cancelled
// alone (status.Canceller.CancelLine) or with its order;
// [OrderRefunded] once refunded, Restock saying where its units went
// ("sale", "shop", "none"), as for a refunded order.
type Line struct {
	OrderNo       string    `gorm:"primaryKey;size:32" json:"-"`
	LineNo        int       `gorm:"primaryKey;autoIncrement:false" json:"-"`
	ReservationID string    `gorm:"type:varchar(128);size:128;not null" json:"-"` // "<order's reservation>#<LineNo>"
	UserID        string    `gorm:"type:varchar(64);size:64;not null" json:"-"`
	ActivityID    string    `gorm:"type:varchar(64);size:64;not null" json:"activity"`
	Qty           int64     `gorm:"not null" json:"qty"`
	Price         Cents     `gorm:"type:decimal(12,2);not null;default:0" json:"price,omitempty"`
	Status        string    `gorm:"size:16;not null;default:''" json:"status,omitempty"`
	Restock       string    `gorm:"size:8;not null;default:''" json:"restock,omitempty"`
	UpdatedAt     time.Time `json:"-"`
}

// TableName implements gorm's Tabler: the default name. The package itself
// names the table explicitly in every statement ([WithTables]).
func (Order) TableName() string { return defaultOrderTable }

// Dedup is a row of message_dedup (or the table [WithTables] names),
// written in the same transaction as the order (or alone, for a FAILED
// outcome). Its primary key is the message ID: a redelivered message finds
// its row and is answered from it. Its unique reservation_id is the
// consume/release fence (handoff.Fence). Like [Order], its indexes come from
// [AutoMigrate], not from struct tags.
type Dedup struct {
	MsgID         string    `gorm:"primaryKey;size:64"`
	ReservationID string    `gorm:"type:varchar(128);size:128;not null"` // ValidReservationID
	ActivityID    string    `gorm:"type:varchar(64);size:64;not null"`
	UserID        string    `gorm:"type:varchar(64);size:64;not null"` // '' when a Fence did not know the buyer
	Outcome       string    `gorm:"size:16;not null"`
	OrderNo       string    `gorm:"size:32;not null;default:''"`
	Reason        string    `gorm:"size:255;not null;default:''"`
	CreatedAt     time.Time `gorm:"not null"` // no index: it cost ≈ 13 % of the consumer's throughput (PruneDedup)
}

// TableName implements gorm's Tabler: the default name (see [Order.TableName]).
func (Dedup) TableName() string { return defaultDedupTable }

// ActivityStatus is the status column of an activity row: what an
// operator decided. The [Processor] does not read it — a reservation
// taken before a pause still becomes its order — so a pause is enforced
// where reservations are taken (the stock package's reserve script); the
// column records it in the database.
type ActivityStatus int8

// Activity statuses.
const (
	ActivityActive ActivityStatus = 1 // selling (the column's default)
	ActivityPaused ActivityStatus = 2 // paused by an operator, may resume
	ActivityClosed ActivityStatus = 3 // ended by an operator, for good
)

// String returns "active", "paused", "closed" or "status(n)".
func (s ActivityStatus) String() string {
	switch s {
	case ActivityActive:
		return "active"
	case ActivityPaused:
		return "paused"
	case ActivityClosed:
		return "closed"
	}
	return fmt.Sprintf("status(%d)", int8(s))
}

// adjustment is a row of seckill_activity_adjust, the stock ledger
// order/operate writes (operate.Adjustment): the model [AutoMigrate]
// creates the table from.
type adjustment struct {
	AdjustID   string    `gorm:"primaryKey;type:varchar(128);size:128"`
	ActivityID string    `gorm:"type:varchar(64);size:64;not null"`
	Delta      int64     `gorm:"not null"`
	Operator   string    `gorm:"size:64;not null;default:''"`
	Reason     string    `gorm:"size:255;not null;default:''"`
	CreatedAt  time.Time `gorm:"not null"`
}

func (adjustment) TableName() string { return defaultAdjustTable }

// payment is a row of seckill_payment: one payment a provider reported
// for an order (status.Canceller.PayRef), keyed by (provider, reference),
// the primary key, so the same payment reported twice is one row. Outcome
// is what it did: PAID (it paid the order), CONFLICT (a second payment of
// a paid order, handed back to the shop), LATE (it came for a cancelled or
// expired order). Written in the transaction of the order's state change.
type payment struct {
	Provider  string    `gorm:"primaryKey;type:varchar(64);size:64"`
	Reference string    `gorm:"primaryKey;type:varchar(128);size:128"`
	OrderNo   string    `gorm:"size:32;not null"`
	Outcome   string    `gorm:"size:16;not null"`
	CreatedAt time.Time `gorm:"not null"`
}

func (payment) TableName() string { return defaultPaymentTable }

// The default names (the gorm TableName of the models).
const (
	defaultActivityTable = "seckill_activity"
	defaultOrderTable    = "seckill_order"
	defaultDedupTable    = "message_dedup"
	defaultAdjustTable   = "seckill_activity_adjust"
	defaultPaymentTable  = "seckill_payment"
	defaultLineTable     = "seckill_order_line"
)
