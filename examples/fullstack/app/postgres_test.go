package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestPgWithDB(t *testing.T) {
	for _, dsn := range []string{
		"host=127.0.0.1 port=5432 user=postgres dbname=postgres sslmode=disable",
		"host=127.0.0.1 user=postgres sslmode=disable",
		"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
	} {
		got := pgWithDB(dsn, `sale's_db`)
		cfg, err := pgconn.ParseConfig(got)
		if err != nil {
			t.Fatalf("%q → %q: %v", dsn, got, err)
		}
		if cfg.Database != `sale's_db` {
			t.Errorf("%q → %q names database %q", dsn, got, cfg.Database)
		}
	}
}

func TestConfigPostgres(t *testing.T) {
	c := DefaultConfig()
	c.MySQLDSN, c.PostgresDSN = "root@tcp(127.0.0.1:3306)/", "host=127.0.0.1 sslmode=disable"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("-mysql and -postgres: Validate = %v, want an error", err)
	}
	c = DefaultConfig()
	c.PostgresDSN = "host=127.0.0.1 sslmode=disable"
	if c.Embedded() {
		t.Error("-postgres set: Embedded() = true")
	}
}

// TestOpenPostgres creates a database of its own on the server of
// SECKILL_POSTGRES_DSN, migrates into it, and drops it.
func TestOpenPostgres(t *testing.T) {
	dsn := os.Getenv("SECKILL_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("SECKILL_POSTGRES_DSN not set: no real PostgreSQL")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "fullstack_pg_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	db, drop, err := openPostgres(ctx, dsn, name, true)
	if err != nil {
		t.Fatal(err)
	}
	var cur string
	if err := db.WithContext(ctx).Raw("SELECT current_database()").Scan(&cur).Error; err != nil || cur != name {
		t.Errorf("current_database() = %q, %v; want %q", cur, err, name)
	}
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
	if err := drop(); err != nil {
		t.Fatal(err)
	}
	// Dropped: opening it again without creating fails.
	if _, _, err := openPostgres(ctx, pgWithDB(dsn, name), "", false); err == nil {
		t.Errorf("database %s opened after the drop", name)
	}
}
