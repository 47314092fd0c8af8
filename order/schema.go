package order

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"

	"gorm.io/gorm"
)

// SchemaMySQL is the MySQL/MariaDB DDL of the default tables (schema.sql).
// [Schema] gives it for other table names.
//
//go:embed schema.sql
var SchemaMySQL string

// SchemaPostgres is the PostgreSQL DDL of the default tables
// (schema_postgres.sql). [Schema] gives it for other table names.
//
//go:embed schema_postgres.sql
var SchemaPostgres string

// schemaNames matches, as whole words, every name of the DDL templates
// that depends on the table names: the tables, their indexes and their
// CHECK constraint.
var schemaNames = func() *regexp.Regexp {
	pat := `\b(` + DefaultActivityTable + `|` + DefaultOrderTable + `|` + DefaultDedupTable
	for _, sp := range DefaultTables().specs() {
		for _, ix := range append(append([]index(nil), sp.indexes...), sp.checks...) {
			pat += "|" + ix.legacy
		}
	}
	return regexp.MustCompile(pat + `)\b`)
}()

// Schema returns the DDL of the tables for a gorm dialect name ("mysql"
// for MySQL and MariaDB, "postgres"), for the names given by [WithTables]:
// [SchemaMySQL] or [SchemaPostgres] with the tables' names, and the names
// of their indexes and CHECK constraint derived from them, in place of the
// defaults. Other dialects (SQLite: use [AutoMigrate]) fail with
// [ErrUnsupportedDialect]; invalid names with [ErrInvalidOption].
func Schema(dialect string, opts ...TableOption) (string, error) {
	t, err := tablesOf(opts)
	if err != nil {
		return "", err
	}
	var ddl string
	switch dialect {
	case "mysql":
		ddl = SchemaMySQL
	case "postgres":
		ddl = SchemaPostgres
	default:
		return "", fmt.Errorf("%w: no schema for %q (use AutoMigrate)", ErrUnsupportedDialect, dialect)
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

// AutoMigrate creates or updates the activity, order and dedup tables
// (named by [WithTables], default seckill_activity, seckill_order and
// message_dedup) with gorm's AutoMigrate, then creates whichever of their
// indexes is missing and, on MySQL/MariaDB and PostgreSQL, the activity's
// CHECK (stock >= 0) — SQLite cannot add a constraint to an existing table
// and goes without it. Index and constraint names are those of
// schema.sql on the default names and derived from the table's name
// otherwise (see [WithTables]). DBAs who manage schemas by hand apply
// [Schema]'s DDL (schema.sql, schema_postgres.sql) instead; both give the
// same tables.
func AutoMigrate(ctx context.Context, db *gorm.DB, opts ...TableOption) error {
	if db == nil {
		return fmt.Errorf("%w: AutoMigrate needs a db", ErrInvalidOption)
	}
	t, err := tablesOf(opts)
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
		if err := d.Table(sp.name).AutoMigrate(sp.model); err != nil {
			return fmt.Errorf("order: migrate %s: %w", sp.name, err)
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
			q := "ALTER TABLE " + quoteIdent(d, sp.name) + " ADD CONSTRAINT " + quoteIdent(d, name) + " CHECK (" + ck.check + ")"
			if err := d.Exec(q).Error; err != nil {
				return fmt.Errorf("order: migrate %s: constraint %s: %w", sp.name, name, err)
			}
		}
	}
	return nil
}
