package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// openPostgres opens PostgreSQL (-postgres DSN, keyword/value or URL
// form). When dbName is set (-mysql-db) that database is created on the
// server if missing and used instead of the DSN's; with drop it is dropped
// on close (tests).
func openPostgres(ctx context.Context, dsn, dbName string, drop bool) (*gorm.DB, func() error, error) {
	if _, err := pgconn.ParseConfig(dsn); err != nil {
		return nil, nil, fmt.Errorf("parse postgres dsn: %w", err)
	}
	var dropFn func() error
	if dbName != "" {
		admin, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			return nil, nil, fmt.Errorf("connect postgres: %w", err)
		}
		closeAdmin := func() error {
			if sqlDB, e := admin.DB(); e == nil {
				return sqlDB.Close()
			}
			return nil
		}
		var n int64
		if err := admin.WithContext(ctx).Raw("SELECT COUNT(*) FROM pg_database WHERE datname = ?", dbName).Scan(&n).Error; err != nil {
			_ = closeAdmin()
			return nil, nil, fmt.Errorf("look up database %s: %w", dbName, err)
		}
		if n == 0 {
			// Two processes may race to create it: a duplicate is fine.
			if err := admin.WithContext(ctx).Exec(`CREATE DATABASE "` + pgIdent(dbName) + `"`).Error; err != nil && !strings.Contains(err.Error(), "already exists") {
				_ = closeAdmin()
				return nil, nil, fmt.Errorf("create database %s: %w", dbName, err)
			}
		}
		dropFn = func() error {
			var err error
			if drop {
				err = admin.Exec(`DROP DATABASE IF EXISTS "` + pgIdent(dbName) + `" WITH (FORCE)`).Error
			}
			return errors.Join(err, closeAdmin())
		}
		dsn = pgWithDB(dsn, dbName)
	}
	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true})
	if err != nil {
		if dropFn != nil {
			_ = dropFn()
		}
		return nil, nil, fmt.Errorf("open postgres: %w", err)
	}
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(32)
		sqlDB.SetMaxIdleConns(32)
		sqlDB.SetConnMaxLifetime(time.Hour)
	}
	return db, dropFn, nil
}

// pgIdent doubles the double quotes of a quoted identifier.
func pgIdent(s string) string { return strings.ReplaceAll(s, `"`, `""`) }

// pgWithDB returns dsn naming database name: the URL's path, or a
// dbname keyword appended (the last of a keyword wins).
func pgWithDB(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path = "/" + name
			return u.String()
		}
	}
	return dsn + " dbname='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(name) + "'"
}
