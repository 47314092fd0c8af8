package dbfallback

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	mysqldrv "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/seckillkit/seckill/stock"
)

// SchemaMySQL is the MySQL/MariaDB DDL of the two tables with the default
// prefix (schema.sql). [Store.AutoMigrate] builds the same tables, indexes
// and checks; DBAs who manage DDL by hand apply this instead (replace
// "seckill_fallback_" when using [WithTablePrefix]).
//
//go:embed schema.sql
var SchemaMySQL string

// Reservation states stored in the state column.
const (
	stateHeld     = "R" // the units are held for the buyer
	stateReleased = "X" // released; with qty 0, a tombstone
)

// poolRow is a row of <prefix>pool: the units of one activity carved out
// for the fallback. Invariant: remaining + held units = quota.
type poolRow struct {
	ActivityID   activityColumn `gorm:"column:activity_id;primaryKey;autoIncrement:false"`
	Quota        int64          `gorm:"column:quota;not null;check:quota >= remaining"`
	Remaining    int64          `gorm:"column:remaining;not null;check:remaining >= 0"`
	Drained      int64          `gorm:"column:drained;not null;default:0"`
	PerUserLimit int64          `gorm:"column:per_user_limit;not null"`
	StartMs      int64          `gorm:"column:start_ms;not null;default:0"`
	EndMs        int64          `gorm:"column:end_ms;not null;default:0"`
	UpdatedMs    int64          `gorm:"column:updated_ms;not null"`
	Sizes        int64          `gorm:"column:sizes;not null;default:0"`
}

// reservationRow is a row of <prefix>reservation, one per reservation ID.
type reservationRow struct {
	ReservationID reservationID  `gorm:"column:request_id;primaryKey;index:,composite:held,priority:3"`
	ActivityID    activityColumn `gorm:"column:activity_id;not null;index:,composite:user,priority:1;index:,composite:held,priority:1"`
	UserID        idColumn       `gorm:"column:user_id;not null;index:,composite:user,priority:2"`
	Qty           int64          `gorm:"column:qty;not null"`
	State         string         `gorm:"column:state;type:char(1);not null;index:,composite:held,priority:2"`
	CreatedMs     int64          `gorm:"column:created_ms;not null"`
	ReleasedMs    int64          `gorm:"column:released_ms;not null;default:0"`
}

// reservationID is the request_id column: compared byte for byte on every
// database (VARBINARY on MySQL, where a _ci collation would make "a" and
// "A" one key; TEXT with the default BINARY collation on SQLite).
type reservationID string

// GormDBDataType implements gorm's GormDBDataTypeInterface.
func (reservationID) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Dialector.Name() == "mysql" {
		return "varbinary(128)"
	}
	return "text"
}

// maxPoolIDBytes is the width of the activity_id columns: a size's pool
// "<sale>/<size>" ([stock.VariantOf]) of two [stock.MaxIDLen]-byte IDs.
const maxPoolIDBytes = 2*stock.MaxIDLen + 1

// activityColumn is an activity_id column: a [stock.ValidID] activity, or
// a size of a sale in sizes, "<sale>/<size>" ([stock.VariantOf]), of at
// most maxPoolIDBytes ASCII bytes, compared byte for byte like idColumn.
type activityColumn string

// GormDBDataType implements gorm's GormDBDataTypeInterface.
func (activityColumn) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Dialector.Name() == "mysql" {
		return "varchar(129) CHARACTER SET ascii COLLATE ascii_bin"
	}
	return "varchar(129)"
}

// idColumn is a user_id column: a [stock.ValidID] string of
// at most [stock.MaxIDLen] ASCII bytes, compared byte for byte like the
// Redis keys ("a" and "A" are two users): VARCHAR(64) in the ascii charset
// with its binary collation on MySQL (a _ci collation would make them one),
// VARCHAR(64) (TEXT affinity, BINARY collation) on SQLite.
type idColumn string

// GormDBDataType implements gorm's GormDBDataTypeInterface.
func (idColumn) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Dialector.Name() == "mysql" {
		return "varchar(64) CHARACTER SET ascii COLLATE ascii_bin"
	}
	return "varchar(64)"
}

// AutoMigrate creates or updates the Store's two tables, their indexes and
// check constraints (on MySQL: InnoDB, utf8mb4). It is the equivalent of
// [SchemaMySQL] for the Store's table prefix. Tables of a release with
// BIGINT activity_id and user_id columns are altered to the VARCHAR(64) ID
// columns in place; their rows keep their IDs in decimal (activity 7 is
// "7"), which is what a shop with numeric IDs passes.
func (s *Store) AutoMigrate(ctx context.Context) error {
	d := s.db.WithContext(ctx)
	if s.mysql {
		d = d.Set("gorm:table_options", "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
	}
	if err := s.widenPoolID(d); err != nil {
		return fmt.Errorf("dbfallback: migrate %s: %w", s.pool, err)
	}
	if err := d.Table(s.pool).AutoMigrate(&poolRow{}); err != nil {
		return fmt.Errorf("dbfallback: migrate %s: %w", s.pool, err)
	}
	if err := d.Table(s.resv).AutoMigrate(&reservationRow{}); err != nil {
		return fmt.Errorf("dbfallback: migrate %s: %w", s.resv, err)
	}
	return nil
}

// widenPoolID alters the activity_id of an existing pool table to the
// column type when it is narrower: the BIGINT of a release before string
// IDs, or the VARCHAR(64) of a release before sales in sizes (a size's
// pool is "<sale>/<size>", up to maxPoolIDBytes). gorm's AutoMigrate never
// changes the type of a primary key column; the reservation table's
// activity_id it alters itself. On MySQL the column is modified in place
// (MODIFY COLUMN keeps the rows, the key and the checks); on SQLite gorm
// copies the table into one with the new column in one transaction (the
// rows and checks kept; AutoMigrate then makes the indexes again).
func (s *Store) widenPoolID(d *gorm.DB) error {
	m := d.Table(s.pool).Migrator()
	if !m.HasTable(s.pool) {
		return nil
	}
	cols, err := m.ColumnTypes(s.pool)
	if err != nil {
		return err
	}
	for _, c := range cols {
		if c.Name() != "activity_id" {
			continue
		}
		n, sized := c.Length()
		if strings.Contains(strings.ToLower(c.DatabaseTypeName()), "int") || sized && n > 0 && n < maxPoolIDBytes {
			return m.AlterColumn(&poolRow{}, "ActivityID")
		}
	}
	return nil
}

// isDuplicate reports a primary-key violation on MySQL/MariaDB or SQLite,
// whether or not gorm's TranslateError is on.
func isDuplicate(err error) bool {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// isDeadlock reports an InnoDB deadlock (the transaction was rolled back
// and may be run again).
func isDeadlock(err error) bool {
	var me *mysqldrv.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}
