package order

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// Order statuses stored in seckill_order.status.
const (
	OrderCreated   = "CREATED"
	OrderPaid      = "PAID"
	OrderCancelled = "CANCELLED"
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

// Activity is a row of seckill_activity. Stock is the DB guard: the consumer
// only ever runs UPDATE … SET stock = stock - n WHERE id = ? AND stock >= n.
// UserLimit is the per-user cap; when it is 1 the DB also enforces one live
// order per (user, activity).
type Activity struct {
	ID            int64     `gorm:"primaryKey;autoIncrement"`
	Name          string    `gorm:"size:128;not null;default:''"`
	ProductID     int64     `gorm:"not null;default:0"`
	ProductName   string    `gorm:"size:255;not null;default:''"`
	OriginalPrice Cents     `gorm:"type:decimal(12,2);not null;default:0"`
	ActivityPrice Cents     `gorm:"type:decimal(12,2);not null;default:0"`
	TotalStock    int64     `gorm:"not null;default:0"`
	Stock         int64     `gorm:"not null;default:0"`
	UserLimit     int64     `gorm:"not null;default:1"`
	Version       int64     `gorm:"not null;default:0"`
	Status        int8      `gorm:"not null;default:1"`
	StartTime     time.Time `gorm:"not null"`
	EndTime       time.Time `gorm:"not null"`
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// TableName implements gorm's Tabler.
func (Activity) TableName() string { return "seckill_activity" }

// Order is a row of seckill_order.
//
// LiveSlot is 1 while the order is live (CREATED or PAID) and the
// activity's UserLimit is 1, and NULL otherwise; UNIQUE(user_id,
// activity_id, live_slot) is therefore "UNIQUE(user_id, activity_id) when
// the cap is 1" — NULLs never collide (MySQL, MariaDB and SQLite alike), so
// caps above 1 and re-buying after a cancellation still work. Caps above 1
// are enforced by Redis only. The same index serves lookups by (user,
// activity).
type Order struct {
	ID            int64     `gorm:"primaryKey;autoIncrement:false"`
	OrderNo       string    `gorm:"size:32;not null;uniqueIndex:uk_order_no"`
	ReservationID string    `gorm:"size:64;not null;uniqueIndex:uk_reservation"`
	UserID        int64     `gorm:"not null;uniqueIndex:uk_user_activity_live,priority:1"`
	ActivityID    int64     `gorm:"not null;uniqueIndex:uk_user_activity_live,priority:2"`
	LiveSlot      *int8     `gorm:"uniqueIndex:uk_user_activity_live,priority:3"`
	Qty           int64     `gorm:"not null"`
	Price         Cents     `gorm:"type:decimal(12,2);not null;default:0"`
	Status        string    `gorm:"size:16;not null;index:idx_status_expire,priority:1"`
	ExpireTime    time.Time `gorm:"not null;index:idx_status_expire,priority:2"`
	PayTime       *time.Time
	CancelTime    *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// TableName implements gorm's Tabler.
func (Order) TableName() string { return "seckill_order" }

// Dedup is a row of message_dedup, written in the same transaction as the
// order (or alone, for a FAILED outcome). Its primary key is the message ID:
// a redelivered message finds its row and is answered from it.
type Dedup struct {
	MsgID         string    `gorm:"primaryKey;size:64"`
	ReservationID string    `gorm:"size:64;not null;uniqueIndex:uk_dedup_reservation"` // the consume/release fence (Fence)
	ActivityID    int64     `gorm:"not null;index:idx_dedup_user,priority:2"`
	UserID        int64     `gorm:"not null;index:idx_dedup_user,priority:1"`
	Outcome       string    `gorm:"size:16;not null"`
	OrderNo       string    `gorm:"size:32;not null;default:''"`
	Reason        string    `gorm:"size:255;not null;default:''"`
	CreatedAt     time.Time `gorm:"not null"` // no index: it cost ≈ 13 % of the consumer's throughput (PruneDedup)
}

// TableName implements gorm's Tabler.
func (Dedup) TableName() string { return "message_dedup" }

// AutoMigrate creates or updates seckill_activity, seckill_order and
// message_dedup. Production MySQL may use schema.sql instead.
func AutoMigrate(ctx context.Context, db *gorm.DB) error {
	if err := db.WithContext(ctx).AutoMigrate(&Activity{}, &Order{}, &Dedup{}); err != nil {
		return fmt.Errorf("order: migrate: %w", err)
	}
	return nil
}

// isDuplicate reports a unique-key violation on MySQL/MariaDB or SQLite,
// whether or not gorm's TranslateError is on.
func isDuplicate(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) && me.Number == 1062 {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") || strings.Contains(s, "Duplicate entry")
}
