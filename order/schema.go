package order

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/seckillkit/seckill/internal/dbschema"
	"github.com/seckillkit/seckill/order/internal/dbx"
	"gorm.io/gorm"
)

// schemaMySQL is the MySQL/MariaDB DDL of the default tables (schema.sql).
// [Schema] gives it for other table names.
//
//go:embed schema.sql
var schemaMySQL string

// schemaPostgres is the PostgreSQL DDL of the default tables
// (schema_postgres.sql). [Schema] gives it for other table names.
//
//go:embed schema_postgres.sql
var schemaPostgres string

// schemaNames matches, as whole words, every name of the DDL templates
// that depends on the table names: the tables, their indexes and their
// CHECK constraint.
var schemaNames = func() *regexp.Regexp {
	pat := `\b(` + defaultActivityTable + `|` + defaultOrderTable + `|` + defaultDedupTable + `|` + defaultAdjustTable + `|` + defaultPaymentTable + `|` + defaultLineTable
	for _, sp := range defaultTables().specs() {
		for _, ix := range append(append([]index(nil), sp.indexes...), sp.checks...) {
			pat += "|" + ix.legacy
		}
	}
	return regexp.MustCompile(pat + `)\b`)
}()

// Schema returns the DDL of the tables for a gorm dialect name ("mysql"
// for MySQL and MariaDB, "postgres"), for the names given by [WithTables]:
// [schemaMySQL] or [schemaPostgres] with the tables' names, and the names
// of their indexes and CHECK constraint derived from them, in place of the
// defaults. Other dialects (SQLite: use [AutoMigrate]) fail with
// [ErrInvalidConfig]; invalid names with [ErrInvalidConfig].
func Schema(dialect string, opts ...TableOption) (string, error) {
	t, err := TablesOf(opts...)
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
		return "", fmt.Errorf("%w: no schema for %q (use AutoMigrate)", ErrInvalidConfig, dialect)
	}
	names := map[string]string{}
	for _, sp := range t.specs() {
		names[sp.def] = sp.name
		for _, ix := range append(append([]index(nil), sp.indexes...), sp.checks...) {
			names[ix.legacy] = ix.name(sp.name, sp.def)
		}
	}
	return schemaNames.ReplaceAllStringFunc(ddl, func(s string) string { return names[s] }), nil
}

// AutoMigrate creates or updates the activity, order, dedup, adjustment,
// payment and line tables (named by [WithTables], default seckill_activity,
// seckill_order, message_dedup, seckill_activity_adjust, seckill_payment and
// seckill_order_line): a missing table is created from its model, a missing
// column added; an existing column (but for the ID conversions below) or
// index is never dropped or rebuilt (gorm's own AutoMigrate is not run over
// existing tables: it drops unique indexes the struct tags do not declare,
// the dedup table's among them, which the fence relies on), so running it
// again over an up-to-date schema runs no DDL and a process may migrate at
// start while others sell. It then creates whichever of their indexes is
// missing and, on MySQL/MariaDB and PostgreSQL, the activity's CHECK (stock
// >= 0) — SQLite cannot add a constraint to an existing table and goes
// without it. The user and activity ID columns are VARCHAR(64), the
// reservation_id columns VARCHAR(128) ([ValidReservationID]), on
// MySQL/MariaDB CHARACTER SET ascii COLLATE ascii_bin (see [Activity]); a
// VARCHAR(64) reservation_id of earlier releases is widened in place; on
// MySQL/MariaDB and PostgreSQL, tables of releases with BIGINT IDs are
// converted in place, numbers becoming their decimal strings (the activity
// id loses its auto-increment). Index and constraint names are those of
// schema.sql on the default names and derived from the table's name
// otherwise (see [WithTables]). DBAs who manage schemas by hand apply
// [Schema]'s DDL (schema.sql, schema_postgres.sql) instead; both give the
// same tables.
func AutoMigrate(ctx context.Context, db *gorm.DB, opts ...TableOption) error {
	if db == nil {
		return fmt.Errorf("%w: AutoMigrate needs a db", ErrInvalidConfig)
	}
	t, err := TablesOf(opts...)
	if err != nil {
		return err
	}
	// Processes starting together (an api and a worker) migrate together:
	// one at a time, under a database-wide lock held on one connection, or
	// gorm's column and index changes race and one of them fails.
	return db.WithContext(ctx).Connection(func(d *gorm.DB) error {
		unlock, err := migrationLock(d)
		if err != nil {
			return err
		}
		defer unlock()
		return autoMigrate(d, t)
	})
}

// migrationLock takes the migration lock on MySQL/MariaDB (GET_LOCK) and
// PostgreSQL (a session advisory lock); SQLite serialises writers anyway.
func migrationLock(d *gorm.DB) (func(), error) {
	const name = "seckill_order_migrate"
	switch d.Dialector.Name() {
	case "mysql":
		var got int
		if err := d.Raw("SELECT GET_LOCK(?, 60)", name).Scan(&got).Error; err != nil || got != 1 {
			return nil, fmt.Errorf("order: migrate: lock %s: %v (got %d)", name, err, got)
		}
		return func() { d.Exec("SELECT RELEASE_LOCK(?)", name) }, nil
	case "postgres":
		if err := d.Exec("SELECT pg_advisory_lock(hashtext(?))", name).Error; err != nil {
			return nil, fmt.Errorf("order: migrate: lock %s: %w", name, err)
		}
		return func() { d.Exec("SELECT pg_advisory_unlock(hashtext(?))", name) }, nil
	}
	return func() {}, nil
}

func autoMigrate(d *gorm.DB, t Tables) error {
	dialect := d.Dialector.Name()
	for _, sp := range t.specs() {
		if err := dbschema.CreateOrAddColumns(d, sp.name, sp.model); err != nil {
			return fmt.Errorf("order: migrate %s: %w", sp.name, err)
		}
		switch dialect {
		case "mysql":
			if err := binaryIDColumns(d, sp); err != nil {
				return err
			}
		case "postgres":
			if err := varcharIDColumns(d, sp); err != nil {
				return err
			}
		}
		m := d.Migrator()
		for _, ix := range sp.indexes {
			name := ix.name(sp.name, sp.def)
			if m.HasIndex(sp.name, name) {
				continue
			}
			if err := d.Exec(createIndexSQL(d, ix, sp.name, sp.def)).Error; err != nil {
				return fmt.Errorf("order: migrate %s: index %s: %w", sp.name, name, err)
			}
		}
		if dialect != "mysql" && dialect != "postgres" {
			continue
		}
		for _, ck := range sp.checks {
			name := ck.name(sp.name, sp.def)
			if m.HasConstraint(sp.name, name) {
				continue
			}
			q := "ALTER TABLE " + dbx.QuoteIdent(d, sp.name) + " ADD CONSTRAINT " + dbx.QuoteIdent(d, name) + " CHECK (" + ck.check + ")"
			if err := d.Exec(q).Error; err != nil {
				return fmt.Errorf("order: migrate %s: constraint %s: %w", sp.name, name, err)
			}
		}
	}
	return nil
}

// idColumnMySQL is the MySQL/MariaDB type of the user and activity ID
// columns: ASCII (every [ValidID] is) compared byte for byte, as Redis
// compares them. Under the server's default collation (utf8mb4_general_ci
// and the like) "Alice" and "alice" would be one buyer in the unique key,
// the caps and the result lookups, but two in Redis.
const idColumnMySQL = "VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL"

// keyColumnMySQL is the MySQL/MariaDB type of a table's ASCII key column
// (the adjustment ID): compared byte for byte, as the other databases do.
const keyColumnMySQL = "VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL"

// binaryIDColumns gives the ID and key columns of sp's table, on
// MySQL/MariaDB, the type of schema.sql (idColumnMySQL, keyColumnMySQL),
// which gorm's AutoMigrate cannot spell per dialect: it creates them VARCHAR
// in the table's default collation. A column in another collation, or
// narrower than its type (the VARCHAR(64) reservation_id of releases
// before reservation IDs of 128 bytes), is modified in place. gorm does not
// compare collations, so a later AutoMigrate keeps them.
func binaryIDColumns(d *gorm.DB, sp tableSpec) error {
	var rows []struct {
		ColumnName    string
		CollationName *string
		Width         *int64
	}
	if err := d.Raw("SELECT COLUMN_NAME AS column_name, COLLATION_NAME AS collation_name, CHARACTER_MAXIMUM_LENGTH AS width "+
		"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME IN ?",
		sp.name, append(append([]string(nil), sp.keyColumns...), sp.idColumns...)).Scan(&rows).Error; err != nil {
		return fmt.Errorf("order: migrate %s: read id columns: %w", sp.name, err)
	}
	var mods []string
	for _, r := range rows {
		typ, width := idColumnMySQL, int64(MaxIDLen)
		if slices.Contains(sp.keyColumns, r.ColumnName) {
			typ, width = keyColumnMySQL, MaxReservationIDLen
		}
		if r.CollationName == nil || *r.CollationName != "ascii_bin" || r.Width == nil || *r.Width < width {
			mods = append(mods, "MODIFY "+dbx.QuoteIdent(d, r.ColumnName)+" "+typ)
		}
	}
	if len(mods) == 0 {
		return nil
	}
	slices.Sort(mods)
	q := "ALTER TABLE " + dbx.QuoteIdent(d, sp.name) + " " + strings.Join(mods, ", ")
	if err := d.Exec(q).Error; err != nil {
		return fmt.Errorf("order: migrate %s: id columns: %w", sp.name, err)
	}
	return nil
}

// varcharIDColumns converts, on PostgreSQL, ID columns that are not
// VARCHAR yet — the BIGINT and BIGSERIAL columns of tables made before IDs
// were strings, which gorm's AutoMigrate does not convert — to
// VARCHAR(64), numbers becoming their decimal strings; the activity id
// loses its sequence default (activity IDs are chosen by the application).
// Key columns narrower than VARCHAR(128) (the VARCHAR(64) reservation_id of
// releases before reservation IDs of 128 bytes) are widened in place.
func varcharIDColumns(d *gorm.DB, sp tableSpec) error {
	var rows []struct {
		ColumnName    string
		DataType      string
		ColumnDefault *string
		Width         *int64
	}
	if err := d.Raw("SELECT column_name, data_type, column_default, character_maximum_length AS width FROM information_schema.columns "+
		"WHERE table_schema = current_schema() AND table_name = ? AND column_name IN ?",
		sp.name, append(append([]string(nil), sp.keyColumns...), sp.idColumns...)).Scan(&rows).Error; err != nil {
		return fmt.Errorf("order: migrate %s: read id columns: %w", sp.name, err)
	}
	var alters []string
	for _, r := range rows {
		col := dbx.QuoteIdent(d, r.ColumnName)
		if slices.Contains(sp.keyColumns, r.ColumnName) {
			if r.DataType != "character varying" || r.Width == nil || *r.Width < MaxReservationIDLen {
				alters = append(alters, "ALTER COLUMN "+col+" TYPE VARCHAR(128) USING "+col+"::VARCHAR(128)")
			}
			continue
		}
		if r.DataType == "character varying" {
			continue
		}
		if r.ColumnDefault != nil {
			alters = append(alters, "ALTER COLUMN "+col+" DROP DEFAULT")
		}
		alters = append(alters, "ALTER COLUMN "+col+" TYPE VARCHAR(64) USING "+col+"::VARCHAR(64)")
	}
	if len(alters) == 0 {
		return nil
	}
	q := "ALTER TABLE " + dbx.QuoteIdent(d, sp.name) + " " + strings.Join(alters, ", ")
	if err := d.Exec(q).Error; err != nil {
		return fmt.Errorf("order: migrate %s: id columns: %w", sp.name, err)
	}
	return nil
}
