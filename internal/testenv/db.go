package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/glebarez/sqlite"
	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// EnvPostgresDSN names the PostgreSQL server of [Postgres] and [AllDB]: a
// pgx connection string (keyword/value or URL) whose user may create
// databases.
const EnvPostgresDSN = "SECKILL_POSTGRES_DSN"

// DBKind names a kind of database: what [DB] returns, or a key of [AllDB].
type DBKind string

// Kinds of database. [DB] returns SQLite or MySQL; PostgreSQL comes only
// from [Postgres] and [AllDB].
const (
	KindSQLite   DBKind = "sqlite"
	KindMySQL    DBKind = "mysql"
	KindPostgres DBKind = "postgres"
)

// DBKindInUse reports which database [DB] returns in this process (never
// KindPostgres).
func DBKindInUse() DBKind {
	if os.Getenv(EnvMySQLDSN) != "" {
		return KindMySQL
	}
	return KindSQLite
}

// DB returns a fresh, empty database for the test: a pure-Go SQLite file in
// t.TempDir() by default, or a new database on the MySQL/MariaDB server named
// by SECKILL_MYSQL_DSN (created now, dropped at cleanup).
func DB(t testing.TB) *gorm.DB {
	t.Helper()
	if DBKindInUse() == KindMySQL {
		return MySQL(t)
	}
	return SQLite(t)
}

// SQLite opens a pure-Go SQLite database in a file under t.TempDir(), in WAL
// mode with a busy timeout and a single connection, so concurrent writers in
// one process queue instead of failing with SQLITE_BUSY.
func SQLite(t testing.TB) *gorm.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := OpenSQLite(path)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return db
}

// OpenSQLite opens the SQLite file at path the way [SQLite] does.
func OpenSQLite(path string) (*gorm.DB, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(1)
	return db, nil
}

// MySQL creates a database for the test on the server named by
// SECKILL_MYSQL_DSN and returns it, or skips the test when the variable is
// unset. The database is dropped at cleanup.
func MySQL(t testing.TB) *gorm.DB {
	t.Helper()
	dsn := os.Getenv(EnvMySQLDSN)
	if dsn == "" {
		t.Skipf("%s not set: no real MySQL", EnvMySQLDSN)
	}
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testenv: parse %s: %v", EnvMySQLDSN, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "seckill_t_" + hex.EncodeToString(b[:])

	cfg.DBName = ""
	admin, err := gorm.Open(mysql.Open(cfg.FormatDSN()), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("testenv: connect mysql: %v", err)
	}
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	cfg.DBName = name
	cfg.ParseTime = true
	db, err := gorm.Open(mysql.Open(cfg.FormatDSN()), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("testenv: open %s: %v", name, err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
		_ = admin.Exec("DROP DATABASE IF EXISTS " + name).Error
		if sqlDB, err := admin.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return db
}

// AllDB returns a fresh, empty database of every kind available in this
// process: SQLite always, plus MySQL/MariaDB and PostgreSQL when
// SECKILL_MYSQL_DSN and SECKILL_POSTGRES_DSN are set. Use it for tests
// that must hold on each; [DB] keeps returning one (SQLite or MySQL).
func AllDB(t testing.TB) map[DBKind]*gorm.DB {
	t.Helper()
	m := map[DBKind]*gorm.DB{KindSQLite: SQLite(t)}
	if os.Getenv(EnvMySQLDSN) != "" {
		m[KindMySQL] = MySQL(t)
	}
	if os.Getenv(EnvPostgresDSN) != "" {
		m[KindPostgres] = Postgres(t)
	}
	return m
}

// Postgres creates a database for the test on the PostgreSQL server named
// by SECKILL_POSTGRES_DSN (a pgx connection string, keyword/value or URL)
// and returns it, or skips the test when the variable is unset. The
// database is dropped at cleanup, closing any connection left to it.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	dsn := os.Getenv(EnvPostgresDSN)
	if dsn == "" {
		t.Skipf("%s not set: no real PostgreSQL", EnvPostgresDSN)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("testenv: parse %s: %v", EnvPostgresDSN, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "seckill_t_" + hex.EncodeToString(b[:])

	admin, err := openPostgres(*cfg)
	if err != nil {
		t.Fatalf("testenv: connect postgres: %v", err)
	}
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		closeDB(admin)
		t.Fatalf("testenv: create database: %v", err)
	}
	cfg.Database = name
	db, err := openPostgres(*cfg)
	if err != nil {
		_ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error
		closeDB(admin)
		t.Fatalf("testenv: open %s: %v", name, err)
	}
	t.Cleanup(func() {
		closeDB(db)
		_ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error
		closeDB(admin)
	})
	return db
}

// openPostgres opens cfg through pgx's database/sql driver.
func openPostgres(cfg pgx.ConnConfig) (*gorm.DB, error) {
	sqlDB := stdlib.OpenDB(cfg)
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	return db, nil
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}
