package dbfallback_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/alicebob/miniredis/v2"
	"github.com/glebarez/sqlite"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/stock/dbfallback"
)

// openDB opens a SQLite file in a temporary directory (MySQL/MariaDB in
// production); the returned func removes it.
func openDB() (*gorm.DB, func(), error) {
	dir, err := os.MkdirTemp("", "dbfallback-example")
	if err != nil {
		return nil, nil, err
	}
	dsn := "file:" + filepath.Join(dir, "fallback.db") + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return db, func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
		_ = os.RemoveAll(dir)
	}, nil
}

// The Store on its own: open a pool of 2 units, sell them, release one and
// drain what is left.
func Example() {
	ctx := context.Background()
	db, done, err := openDB()
	if err != nil {
		panic(err)
	}
	defer done()

	store, err := dbfallback.New(db)
	if err != nil {
		panic(err)
	}
	if err := store.AutoMigrate(ctx); err != nil {
		panic(err)
	}
	sale := stock.Activity{ID: "42", Stock: 100, PerUserLimit: 1}
	if err := store.Open(ctx, sale, 2); err != nil { // Redis gets 100 - 2
		panic(err)
	}
	for user := int64(1); user <= 3; user++ {
		res, err := store.Reserve(ctx, stock.Request{Activity: "42", User: strconv.FormatInt(user, 10), Qty: 1, ReservationID: fmt.Sprint("r-", user)})
		if err != nil {
			panic(err)
		}
		fmt.Printf("user %d: %v, %d left\n", user, res.Status, res.Remaining)
	}
	rel, _ := store.Release(ctx, "42", "r-1") // order r-1 cancelled
	fmt.Println("release r-1:", rel.Status)
	units, _ := store.Drain(ctx, "42") // Redis is fine: take the pool's units back
	st, _ := store.Stats(ctx, "42")
	fmt.Printf("drained %d; quota %d = remaining %d + held %d\n", units, st.Quota, st.Remaining, st.HeldUnits)
	// Output:
	// user 1: reserved, 1 left
	// user 2: reserved, 0 left
	// user 3: sold out, 0 left
	// release r-1: released
	// drained 1; quota 1 = remaining 0 + held 1
}

// Wired into a stock.Deductor: while Redis is down, Reserve is served by
// the database pool, from units Redis was never given.
func Example_deductor() {
	ctx := context.Background()
	db, done, err := openDB()
	if err != nil {
		panic(err)
	}
	defer done()
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	defer rdb.Close()

	store, err := dbfallback.New(db)
	if err != nil {
		panic(err)
	}
	if err := store.AutoMigrate(ctx); err != nil {
		panic(err)
	}
	d, err := stock.New(rdb, stock.WithFallback(store.Reserve))
	if err != nil {
		panic(err)
	}

	sale := stock.Activity{ID: "7", Stock: 10, PerUserLimit: 1}
	const quota = 3
	if err := store.Open(ctx, sale, quota); err != nil {
		panic(err)
	}
	inRedis := sale
	inRedis.Stock -= quota // the carve-out: no unit is in both stores
	if _, err := d.Load(ctx, inRedis); err != nil {
		panic(err)
	}

	reserve := func(user int64) {
		res, err := d.Reserve(ctx, stock.Request{Activity: "7", User: strconv.FormatInt(user, 10), Qty: 1, ReservationID: fmt.Sprint("o-", user)})
		fmt.Printf("user %d: %v (fallback %v, %d left there), err %v\n", user, res.Status, res.Fallback, res.Remaining, err)
	}
	reserve(1)
	m.SetError("LOADING Redis is loading the dataset in memory") // Redis "down"
	reserve(2)
	m.SetError("")
	reserve(3)

	units, _ := store.Drain(ctx, "7") // after the outage: give these back to the Redis sale
	fmt.Println("drained:", units)
	// Output:
	// user 1: reserved (fallback false, 6 left there), err <nil>
	// user 2: reserved (fallback true, 2 left there), err <nil>
	// user 3: reserved (fallback false, 5 left there), err <nil>
	// drained: 2
}
