package outbox

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckillkit/seckill/internal/dbschema"
	"gorm.io/gorm"
)

// schemaMySQL is the MySQL/MariaDB DDL of the default outbox table.
//
//go:embed schema.sql
var schemaMySQL string

// schemaPostgres is the PostgreSQL DDL of the default outbox table.
//
//go:embed schema_postgres.sql
var schemaPostgres string

// Schema returns the DDL of the outbox table for a gorm dialect name
// ("mysql" for MySQL and MariaDB, "postgres"), for the table named by
// [WithTable] (default "outbox_message"): schema.sql or
// schema_postgres.sql, as embedded in the package, with the table's name,
// and its index names, in place of outbox_message (without WithTable, the
// files' text unchanged). Other dialects (SQLite: use [AutoMigrate]) fail
// with [ErrInvalidArgument].
func Schema(dialect string, opts ...TableOption) (string, error) {
	table, err := tableName(opts)
	if err != nil {
		return "", err
	}
	var ddl string
	switch dialect {
	case "mysql":
		ddl = schemaMySQL
	case "postgres":
		ddl = schemaPostgres
	default:
		return "", fmt.Errorf("%w: no schema for database dialect %q (use AutoMigrate)", ErrInvalidArgument, dialect)
	}
	return strings.ReplaceAll(ddl, defaultTable, table), nil
}

// AutoMigrate creates the outbox table (named by [WithTable], default
// "outbox_message") from its model or adds the columns it lacks — it never
// drops or rebuilds an existing column or index, so running it again runs
// no DDL (gorm's own AutoMigrate dropped the unique msg_id index on every
// run and made it again) —, then creates whichever of its indexes is
// missing, named after the table (uk_<table>_msg_id,
// idx_<table>_poll, …). On MySQL the table is InnoDB, utf8mb4_bin, so
// topics and keys compare byte for byte as on SQLite and PostgreSQL. DBAs
// who manage schemas by hand apply [Schema]'s DDL (schema.sql,
// schema_postgres.sql) instead; both give the same table.
func AutoMigrate(ctx context.Context, db *gorm.DB, opts ...TableOption) error {
	if db == nil {
		return fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	table, err := tableName(opts)
	if err != nil {
		return err
	}
	d := db.WithContext(ctx)
	if d.Dialector.Name() == "mysql" {
		d = d.Set("gorm:table_options", "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	}
	if err := dbschema.CreateOrAddColumns(d, table, &Message{}); err != nil {
		return fmt.Errorf("outbox: migrate %s: %w", table, err)
	}
	m := d.Migrator()
	for _, ix := range indexes {
		if m.HasIndex(table, ix.name(table)) {
			continue
		}
		if err := d.Exec(ix.createSQL(d, table)).Error; err != nil {
			return fmt.Errorf("outbox: migrate %s: index %s: %w", table, ix.name(table), err)
		}
	}
	return nil
}

// Backlog is a snapshot of undelivered rows, for metrics and alerts.
type Backlog struct {
	// Pending counts rows not yet delivered (including rows a relay is
	// publishing right now and rows waiting for a retry).
	Pending int64
	// Failed counts rows that spent their attempt budget; each one is a
	// message no consumer has received. Alert when non-zero.
	Failed int64
	// OldestPending is the smallest created_at among pending rows (UTC;
	// by timestamp, not by id); zero when Pending is 0. now − OldestPending
	// is the worst delivery lag.
	OldestPending time.Time
}

// Stats returns the outbox backlog in db's outbox table (named by
// [WithTable], default "outbox_message").
func Stats(ctx context.Context, db *gorm.DB, opts ...TableOption) (Backlog, error) {
	if db == nil {
		return Backlog{}, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	table, err := tableName(opts)
	if err != nil {
		return Backlog{}, err
	}
	var b Backlog
	d := db.WithContext(ctx)
	if err := d.Table(table).Where("status = ?", StatusPending).Count(&b.Pending).Error; err != nil {
		return Backlog{}, fmt.Errorf("outbox: count pending: %w", err)
	}
	if err := d.Table(table).Where("status = ?", StatusFailed).Count(&b.Failed).Error; err != nil {
		return Backlog{}, fmt.Errorf("outbox: count failed: %w", err)
	}
	if b.Pending > 0 {
		// The smallest created_at, not the lowest id's: ids follow insert
		// order, but rows may carry explicit timestamps or come from
		// several writers. ORDER BY created_at LIMIT 1 is MIN(created_at);
		// unlike MIN() it keeps the column's type on SQLite, where an
		// aggregate comes back as text. It reads the PENDING rows through
		// the poll index and sorts them: no index of its own, because a
		// (status, created_at) index cost ≈ 13 % of Write's throughput on
		// MariaDB (BENCHMARKS.md) for a monitoring query, and the pending
		// set is small unless Kafka is down.
		var m Message
		err := d.Table(table).Select("created_at").Where("status = ?", StatusPending).
			Order("created_at").Limit(1).Take(&m).Error
		switch {
		case err == nil:
			b.OldestPending = m.CreatedAt.UTC()
		case !errors.Is(err, gorm.ErrRecordNotFound): // delivered meanwhile: fine
			return Backlog{}, fmt.Errorf("outbox: oldest pending: %w", err)
		}
	}
	return b, nil
}

// Failed returns up to limit FAILED rows of db's outbox table (named by
// [WithTable], default "outbox_message"), oldest first (by id), for an
// operator to inspect ([Message.LastError], Attempts) before putting them
// back with [Relay.Requeue]. A limit below 1 fails with
// [ErrInvalidArgument].
func Failed(ctx context.Context, db *gorm.DB, limit int, opts ...TableOption) ([]Message, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: failed rows limit %d < 1", ErrInvalidArgument, limit)
	}
	table, err := tableName(opts)
	if err != nil {
		return nil, err
	}
	var rows []Message
	err = db.WithContext(ctx).Table(table).Where("status = ?", StatusFailed).Order("id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("outbox: list failed: %w", err)
	}
	return rows, nil
}

// HasPending reports whether a PENDING row with this topic and key exists,
// i.e. a relay will still deliver it. A reconciler asks this before
// releasing a reservation that has no order yet: true means "wait, the
// message is on its way". FAILED rows are not pending (no relay will touch
// them until someone calls [Relay.Requeue]); look them up with [Lookup].
// The key is free-form (whatever the writer put in [Message.Key]); to ask
// by reservation, fill [Message.ReservationID] and use
// [HasPendingReservation]. The only option is [WithTable], as for every
// function here.
func HasPending(ctx context.Context, db *gorm.DB, topic, key string, opts ...TableOption) (bool, error) {
	if db == nil {
		return false, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	table, err := tableName(opts)
	if err != nil {
		return false, err
	}
	var ids []int64
	err = db.WithContext(ctx).Table(table).
		Where("topic = ? AND msg_key = ? AND status = ?", topic, key, StatusPending).
		Limit(1).Pluck("id", &ids).Error
	if err != nil {
		return false, fmt.Errorf("outbox: has pending %s/%s: %w", topic, key, err)
	}
	return len(ids) > 0, nil
}

// HasPendingReservation reports whether a PENDING row whose
// [Message.ReservationID] is reservationID exists, whatever its topic.
// Same contract as [HasPending]. An empty reservationID is an
// [ErrInvalidArgument] error (it would match every row written without
// one).
func HasPendingReservation(ctx context.Context, db *gorm.DB, reservationID string, opts ...TableOption) (bool, error) {
	if db == nil {
		return false, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	if reservationID == "" {
		return false, fmt.Errorf("%w: empty reservation ID", ErrInvalidArgument)
	}
	table, err := tableName(opts)
	if err != nil {
		return false, err
	}
	var ids []int64
	err = db.WithContext(ctx).Table(table).
		Where("ref = ? AND status = ?", reservationID, StatusPending).Limit(1).Pluck("id", &ids).Error
	if err != nil {
		return false, fmt.Errorf("outbox: has pending reservation %s: %w", reservationID, err)
	}
	return len(ids) > 0, nil
}

// Lookup returns the row whose MsgID is msgID (found = false if none). Its
// Status says whether it is still pending, sent, or failed.
func Lookup(ctx context.Context, db *gorm.DB, msgID string, opts ...TableOption) (m Message, found bool, err error) {
	if db == nil {
		return Message{}, false, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	table, err := tableName(opts)
	if err != nil {
		return Message{}, false, err
	}
	err = db.WithContext(ctx).Table(table).Where("msg_id = ?", msgID).Limit(1).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Message{}, false, nil
	}
	if err != nil {
		return Message{}, false, fmt.Errorf("outbox: lookup %s: %w", msgID, err)
	}
	return m, true, nil
}
