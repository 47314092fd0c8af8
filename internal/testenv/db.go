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
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// DBKind says which database [DB] returns.
type DBKind string

// Kinds of database returned by [DB].
const (
	KindSQLite DBKind = "sqlite"
	KindMySQL  DBKind = "mysql"
)

// DBKindInUse reports which database [DB] returns in this process.
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
