package crash

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckillkit/seckill/examples/fullstack/history"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/outbox"
)

// DropMySQLAtCleanup drops database name on the server of dsn at cleanup.
// Register it before the service that creates the database starts, so it
// runs after the service was killed.
func DropMySQLAtCleanup(t testing.TB, dsn, name string) {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse SECKILL_MYSQL_DSN: %v", err)
	}
	cfg.DBName = ""
	t.Cleanup(func() {
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer db.Close()
		if _, err := db.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
}

// OpenMySQL opens database name on the server of dsn (the service created
// it), closed at cleanup.
func OpenMySQL(t testing.TB, dsn, name string) *gorm.DB {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse SECKILL_MYSQL_DSN: %v", err)
	}
	cfg.DBName, cfg.ParseTime = name, true
	if cfg.Loc == nil {
		cfg.Loc = time.UTC
	}
	db, err := gorm.Open(mysql.Open(cfg.FormatDSN()), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	closeAtCleanup(t, db)
	return db
}

// OpenSQLite opens the service's SQLite file (WAL: readers do not block
// its writer), closed at cleanup.
func OpenSQLite(t testing.TB, path string) *gorm.DB {
	t.Helper()
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(1)
	}
	closeAtCleanup(t, db)
	return db
}

func closeAtCleanup(t testing.TB, db *gorm.DB) {
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
}

// Store reads the service's state straight from its database and its Redis
// (never through the service).
type Store struct {
	DB       *gorm.DB
	MySQL    bool          // DB is a server, MySQL/MariaDB or PostgreSQL (read in a REPEATABLE READ snapshot)
	Redis    *redis.Client // nil when the service's Redis is embedded in it
	Prefix   string        // the service's -prefix
	Activity int64
}

// LedgerEntry is one entry of the stock ledger (stock/keys.go:
// "<prefix>{a:<id>}:resv", requestID → "user:qty:state:atMs[:relMs]").
type LedgerEntry struct {
	User, Qty int64
	State     string // R held, X released, T tombstone
}

// State is what the stores hold for one activity at one moment (the DB
// part from one snapshot; Redis read right after).
type State struct {
	Total, DBStock int64
	Orders         map[string]order.Order // by reservation ID
	Dedup          map[string]order.Dedup // by reservation ID
	OutboxPending  int64
	OutboxFailed   int64

	RedisRead bool              // false without a Redis to read
	Meta      map[string]string // the activity's meta hash; empty = absent
	Ledger    map[string]LedgerEntry
	Buyers    map[string]int64 // user → held qty
}

func (s *Store) key(suffix string) string {
	return s.Prefix + "{a:" + strconv.FormatInt(s.Activity, 10) + "}:" + suffix
}

// Read reads the activity's state.
func (s *Store) Read(ctx context.Context) (State, error) {
	st := State{Orders: map[string]order.Order{}, Dedup: map[string]order.Dedup{}}
	opts := &sql.TxOptions{}
	if s.MySQL {
		opts = &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead}
	}
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var act order.Activity
		if err := tx.Where("id = ?", strconv.FormatInt(s.Activity, 10)).Take(&act).Error; err != nil {
			return fmt.Errorf("activity: %w", err)
		}
		st.Total, st.DBStock = act.Stock, act.Remaining
		var orders []order.Order
		if err := tx.Where("activity_id = ?", strconv.FormatInt(s.Activity, 10)).Find(&orders).Error; err != nil {
			return fmt.Errorf("orders: %w", err)
		}
		for _, o := range orders {
			st.Orders[o.ReservationID] = o
		}
		var dedup []order.Dedup
		if err := tx.Where("activity_id = ?", strconv.FormatInt(s.Activity, 10)).Find(&dedup).Error; err != nil {
			return fmt.Errorf("message_dedup: %w", err)
		}
		for _, d := range dedup {
			st.Dedup[d.ReservationID] = d
		}
		bl, err := outbox.Stats(ctx, tx)
		if err != nil {
			return err
		}
		st.OutboxPending, st.OutboxFailed = bl.Pending, bl.Failed
		return nil
	}, opts)
	if err != nil {
		return st, err
	}
	if s.Redis == nil {
		return st, nil
	}
	st.RedisRead = true
	if st.Meta, err = s.Meta(ctx); err != nil {
		return st, fmt.Errorf("redis meta: %w", err)
	}
	led, err := s.Redis.HGetAll(ctx, s.key("resv")).Result()
	if err != nil {
		return st, fmt.Errorf("redis ledger: %w", err)
	}
	st.Ledger = make(map[string]LedgerEntry, len(led))
	for id, v := range led {
		f := strings.Split(v, ":")
		if len(f) < 4 {
			return st, fmt.Errorf("ledger entry %s = %q: want user:qty:state:atMs", id, v)
		}
		u, _ := strconv.ParseInt(f[0], 10, 64)
		q, _ := strconv.ParseInt(f[1], 10, 64)
		st.Ledger[id] = LedgerEntry{User: u, Qty: q, State: f[2]}
	}
	buyers, err := s.Redis.HGetAll(ctx, s.key("buyers")).Result()
	if err != nil {
		return st, fmt.Errorf("redis buyers: %w", err)
	}
	st.Buyers = make(map[string]int64, len(buyers))
	for u, q := range buyers {
		n, _ := strconv.ParseInt(q, 10, 64)
		st.Buyers[u] = n
	}
	return st, nil
}

// live reports whether an order holds its units: CREATED, PAID, or
// REFUNDED without restock to the sale (the units stay sold).
func live(o order.Order) bool {
	return o.Status == order.OrderCreated || o.Status == order.OrderPaid || o.Status == order.OrderRefunded && o.Restock != "sale"
}

// LiveUnits is the units in live orders.
func (st State) LiveUnits() int64 {
	var n int64
	for _, o := range st.Orders {
		if live(o) {
			n += o.Qty
		}
	}
	return n
}

// Failed reports whether the reservation has a FAILED outcome in the DB.
func (st State) Failed(resv string) (order.Dedup, bool) {
	d, ok := st.Dedup[resv]
	return d, ok && d.Outcome == string(order.StatusFailed)
}

// Truth is st's facts by reservation for history.Check: each order's user,
// number and status (lower case), each FAILED outcome.
func (st State) Truth() history.Truth {
	t := history.Truth{}
	for id, o := range st.Orders {
		t[id] = history.Fact{User: o.UserID, OrderNo: o.OrderNo, Status: strings.ToLower(o.Status)}
	}
	for id := range st.Dedup {
		if _, failed := st.Failed(id); failed {
			f := t[id]
			f.Failed = true
			t[id] = f
		}
	}
	return t
}

// RedisRemaining is the meta's stock (-1 when absent).
func (st State) RedisRemaining() int64 {
	v, ok := st.Meta["stock"]
	if !ok {
		return -1
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// Held is the reservations the ledger holds (state R) and their units.
func (st State) Held() (map[string]LedgerEntry, int64) {
	out := map[string]LedgerEntry{}
	var units int64
	for id, e := range st.Ledger {
		if e.State == "R" {
			out[id] = e
			units += e.Qty
		}
	}
	return out, units
}

// Violations lists every invariant that does not hold in st, counted:
// no oversell, no negative stock, the per-user cap of 1, DB stock + live
// units = total, an outcome never both an order and FAILED; and with Redis
// (meta present): remaining + held = total, the held reservations are
// exactly the live orders, each buyer's holding is its live units.
func (st State) Violations() []string {
	var v []string
	add := func(f string, a ...any) { v = append(v, fmt.Sprintf(f, a...)) }
	liveUnits := st.LiveUnits()
	if liveUnits > st.Total {
		add("oversell: %d units in live orders > total %d", liveUnits, st.Total)
	}
	if st.DBStock < 0 {
		add("negative DB stock %d", st.DBStock)
	}
	if st.DBStock+liveUnits != st.Total {
		add("DB stock %d + live units %d != total %d", st.DBStock, liveUnits, st.Total)
	}
	perUser := map[string]int64{}
	for _, o := range st.Orders {
		if live(o) {
			perUser[o.UserID] += o.Qty
		}
	}
	for u, n := range perUser {
		if n > 1 {
			add("user %s holds %d units in live orders (cap 1)", u, n)
		}
	}
	for id := range st.Orders {
		if _, failed := st.Failed(id); failed {
			add("reservation %s has an order and a FAILED outcome", id)
		}
	}
	if !st.RedisRead || len(st.Meta) == 0 {
		return v
	}
	held, heldUnits := st.Held()
	rem := st.RedisRemaining()
	if rem < 0 {
		add("negative Redis stock %d", rem)
	}
	if rem+heldUnits != st.Total {
		add("Redis remaining %d + held %d != total %d", rem, heldUnits, st.Total)
	}
	var heldNoOrder, liveNotHeld []string
	for id := range held {
		if o, ok := st.Orders[id]; !ok || !live(o) {
			heldNoOrder = append(heldNoOrder, id)
		}
	}
	redisHeld := map[string]int64{}
	for id, o := range st.Orders {
		if !live(o) {
			continue
		}
		if _, ok := held[id]; !ok {
			liveNotHeld = append(liveNotHeld, id)
		}
		redisHeld[o.UserID] += o.Qty
	}
	if len(heldNoOrder) > 0 {
		sort.Strings(heldNoOrder)
		add("%d reservations held in Redis without a live order: %v", len(heldNoOrder), heldNoOrder)
	}
	if len(liveNotHeld) > 0 {
		sort.Strings(liveNotHeld)
		add("%d live orders not held in the Redis ledger: %v", len(liveNotHeld), liveNotHeld)
	}
	for u, n := range st.Buyers {
		if n != redisHeld[u] {
			add("Redis buyers[%s] = %d, live units %d", u, n, redisHeld[u])
		}
	}
	for u, n := range redisHeld {
		if st.Buyers[u] != n {
			add("user %s: live units %d, Redis buyers %d", u, n, st.Buyers[u])
		}
	}
	return v
}

// Unsettled says why st is not settled for the accepted reservations
// (empty = settled): an accepted reservation with neither an order nor a
// FAILED outcome, an outbox row pending, a reservation held in Redis
// without an order, the activity absent or frozen in Redis.
func (st State) Unsettled(accepted []string) []string {
	var why []string
	open := 0
	for _, id := range accepted {
		_, hasOrder := st.Orders[id]
		_, failed := st.Failed(id)
		if !hasOrder && !failed {
			open++
		}
	}
	if open > 0 {
		why = append(why, fmt.Sprintf("%d accepted reservations without an order or a FAILED outcome", open))
	}
	if st.OutboxPending > 0 {
		why = append(why, fmt.Sprintf("%d outbox rows pending", st.OutboxPending))
	}
	if !st.RedisRead {
		return why
	}
	switch {
	case len(st.Meta) == 0:
		why = append(why, "activity absent from Redis")
	case st.Meta["frozen"] == "1":
		why = append(why, "activity frozen in Redis")
	}
	held, _ := st.Held()
	inFlight := 0
	for id := range held {
		if _, ok := st.Orders[id]; !ok {
			inFlight++
		}
	}
	if inFlight > 0 {
		why = append(why, fmt.Sprintf("%d reservations held in Redis without an order", inFlight))
	}
	return why
}

// ErrNotSettled is returned by [Store.WaitSettled] when the bound passed.
var ErrNotSettled = errors.New("crash: not settled")

// WaitSettled polls the stores until they are settled for accepted on two
// reads in a row (the second is returned), or bound passes. Read errors
// (a store being restarted) are retried until the bound.
func (s *Store) WaitSettled(ctx context.Context, accepted []string, bound time.Duration) (State, error) {
	deadline := time.Now().Add(bound)
	var st State
	var why []string
	var err error
	settledOnce := false
	for {
		st, err = s.Read(ctx)
		switch {
		case err != nil:
			settledOnce = false
		default:
			why = st.Unsettled(accepted)
			if len(why) == 0 && settledOnce {
				return st, nil
			}
			settledOnce = len(why) == 0
		}
		if time.Now().After(deadline) {
			if err != nil {
				return st, fmt.Errorf("%w within %v: %v", ErrNotSettled, bound, err)
			}
			return st, fmt.Errorf("%w within %v: %s", ErrNotSettled, bound, strings.Join(why, "; "))
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(150 * time.Millisecond): // poll interval
		}
	}
}

// Meta reads the activity's meta hash in Redis (stock/keys.go:
// "<prefix>{a:<id>}:meta": stock, total, epoch, seq, origin, frozen, …);
// empty when absent.
func (s *Store) Meta(ctx context.Context) (map[string]string, error) {
	if s.Redis == nil {
		return nil, errors.New("crash: no Redis to read")
	}
	return s.Redis.HGetAll(ctx, s.key("meta")).Result()
}

// SpentTokens returns the users whose access token of the activity is
// spent (token/keys.go: "<prefix>{a:<id>}:tok:state", token → "u:<user>").
func (s *Store) SpentTokens(ctx context.Context) (map[int64]bool, error) {
	if s.Redis == nil {
		return nil, errors.New("crash: no Redis to read")
	}
	m, err := s.Redis.HGetAll(ctx, s.key("tok:state")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis token state: %w", err)
	}
	out := map[int64]bool{}
	for _, v := range m {
		if u, ok := strings.CutPrefix(v, "u:"); ok {
			if id, err := strconv.ParseInt(u, 10, 64); err == nil {
				out[id] = true
			}
		}
	}
	return out, nil
}

// TokensIssued returns how many access tokens were ever issued for the
// activity ("<prefix>{a:<id>}:tok:meta" field issued; 0 when absent).
func (s *Store) TokensIssued(ctx context.Context) (int64, error) {
	if s.Redis == nil {
		return 0, errors.New("crash: no Redis to read")
	}
	v, err := s.Redis.HGet(ctx, s.key("tok:meta"), "issued").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}
