package dbfallback

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/stock"
)

// Store is a fallback for [stock.WithFallback] (its Reserve method) over a gorm database: a pool of units per
// activity, carved out of the sale, and a reservation row per reservation ID.
// It is safe for concurrent use by multiple goroutines and processes. It
// borrows the *gorm.DB: it never opens or closes it.
type Store struct {
	db    *gorm.DB
	clock Clock
	mysql bool
	pool  string // table names, validated identifiers
	resv  string
	lock  string // " FOR UPDATE" on MySQL, "" on SQLite
	obs   observe.Observer
}

var _ = stock.WithFallback((*Store)(nil).Reserve)

// maxQty is the largest quota, quantity or limit accepted, 2^53-1: the
// largest integer the stock package's Lua scripts hold exactly.
const maxQty = 1<<53 - 1

// maxIDBytes is the longest reservation ID, the width of request_id: the
// library's rule, [stock.MaxReservationIDLen].
const maxIDBytes = stock.MaxReservationIDLen

// attempts bounds how often one call runs its transaction: it is run again
// after a duplicate key (another transaction inserted the same reservation ID
// meanwhile) or an InnoDB deadlock.
const attempts = 5

// errRollback ends a transaction whose outcome writes nothing (a denial, a
// replay, a duplicate release): the closure's result stands, the
// transaction is rolled back.
var errRollback = errors.New("dbfallback: rollback")

// New returns a Store on db, a MySQL/MariaDB ("mysql" dialector) or SQLite
// ("sqlite") handle that is not inside a transaction. It does no I/O; call
// [Store.AutoMigrate] (or apply [SchemaMySQL]) once to create the tables.
func New(db *gorm.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *gorm.DB", ErrInvalidConfig)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Store{db: db, clock: o.clock, pool: o.prefix + "pool", resv: o.prefix + "reservation", obs: o.obs}
	switch name := db.Dialector.Name(); name {
	case "mysql":
		s.mysql, s.lock = true, " FOR UPDATE"
	case "sqlite":
	default:
		return nil, fmt.Errorf("%w: dialect %q (want mysql or sqlite)", ErrInvalidConfig, name)
	}
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); inTx {
		return nil, fmt.Errorf("%w: the *gorm.DB is inside a transaction", ErrInvalidConfig)
	}
	return s, nil
}

// inTx runs fn in a transaction, again after a duplicate key or a deadlock
// (up to attempts times). errRollback from fn rolls back and returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	for i := 1; ; i++ {
		err := s.db.WithContext(ctx).Transaction(fn)
		switch {
		case err == nil, errors.Is(err, errRollback):
			return nil
		case i < attempts && ctx.Err() == nil && (isDuplicate(err) || isDeadlock(err)):
			continue
		}
		return err
	}
}

// pool is the locked state of one activity's pool. sizes is the number of
// sizes of a sale in sizes' own row (which holds the sale's per-user limit
// and window, and no units: quota and remaining 0), and 0 for a pool that
// sells: a plain activity's, or a size's ("<sale>/<size>").
type pool struct {
	quota, remaining, drained, limit, startMs, endMs, sizes int64
}

// lockPool locks the activity's pool row for the rest of the transaction
// and reads it; ok is false when the activity has no pool. Every writing
// transaction takes this lock first, so the writers of one activity are
// serialised and never deadlock among themselves. On SQLite the first
// statement is a write, which takes the database's write lock at once
// (waiting under busy_timeout) instead of upgrading a read later.
func (s *Store) lockPool(tx *gorm.DB, activity string) (p pool, ok bool, err error) {
	if !s.mysql {
		if err := tx.Exec("UPDATE "+s.pool+" SET updated_ms = updated_ms WHERE activity_id = ?", activity).Error; err != nil {
			return pool{}, false, err
		}
	}
	err = tx.Raw("SELECT quota, remaining, drained, per_user_limit, start_ms, end_ms, sizes FROM "+s.pool+
		" WHERE activity_id = ?"+s.lock, activity).Row().
		Scan(&p.quota, &p.remaining, &p.drained, &p.limit, &p.startMs, &p.endMs, &p.sizes)
	if errors.Is(err, sql.ErrNoRows) {
		return pool{}, false, nil
	}
	return p, err == nil, err
}

// Open creates the fallback pool of activity a with quota units, carved out
// of a.Stock: load Redis with a.Stock - quota (see the package doc), so that
// Redis and the database never sell the same unit. The pool takes a's
// per-user limit (0 means 1) and window (Start, End).
//
// A sale in sizes (a.Variants not empty) gets one pool per size instead,
// "<a.ID>/<size>" ([stock.VariantOf]), of min(quota, the size's Stock)
// units: quota is per size, capped at the size's stock (load each size in
// Redis with its Stock minus its pool), and the size's per-user limit is
// its own (PerUserLimit, or a's when 0). The sale's row holds a's per-user
// limit over all its sizes and the window; every Reserve and Release of a
// size locks it first (see "Sales in sizes" in the package doc). The rows
// are written in one transaction: all of them or none.
//
// Open is idempotent: opening an activity again with the same quota, limit
// and window (and, in sizes, the same sizes, stocks and limits) changes
// nothing (also after [Store.Drain], which does not change the quota Open
// compares with); other terms fail with [ErrPoolConflict], and so does
// opening in sizes an activity opened plain, or the converse. A bad
// activity or a quota outside 0..a.Stock (in sizes: a negative quota, a
// bad size, or a Stock that is neither 0 nor the sizes' sum) fails with an
// error wrapping [stock.ErrInvalidArgument].
func (s *Store) Open(ctx context.Context, a stock.Activity, quota int64) (err error) {
	if s.obs != nil {
		defer func(start time.Time) { s.observed(ctx, StageOpen, a.ID, start, observe.OK, 0, err) }(time.Now())
	}
	if len(a.Variants) > 0 {
		return s.openSizes(ctx, a, quota)
	}
	want, err := poolOf(a, quota)
	if err != nil {
		return err
	}
	db := s.db.WithContext(ctx)
	for i := 1; ; i++ {
		// A plain INSERT, not a locking read first: concurrent first Opens
		// then queue on the new row instead of deadlocking on its gap.
		err = db.Exec("INSERT INTO "+s.pool+" (activity_id, quota, remaining, drained, per_user_limit, start_ms, end_ms, updated_ms, sizes)"+
			" VALUES (?, ?, ?, 0, ?, ?, ?, ?, 0)", a.ID, want.quota, want.quota, want.limit, want.startMs, want.endMs,
			s.clock.Now().UnixMilli()).Error
		if err == nil || !isDeadlock(err) || i == attempts {
			break
		}
	}
	if err == nil {
		return nil
	}
	if !isDuplicate(err) {
		return fmt.Errorf("dbfallback: open activity %s: %w", a.ID, err)
	}
	p, _, err := s.readTerms(db, a.ID)
	if err != nil {
		return fmt.Errorf("dbfallback: open activity %s: %w", a.ID, err)
	}
	if p.sizes != 0 {
		return fmt.Errorf("%w: activity %s is a sale in %d sizes; asked a plain pool", ErrPoolConflict, a.ID, p.sizes)
	}
	return conflictErr(a.ID, p, want)
}

// readTerms reads the terms of a pool row (quota is the opened quota:
// quota + drained), without a lock.
func (s *Store) readTerms(db *gorm.DB, activity string) (pool, bool, error) {
	var p pool
	err := db.Raw("SELECT quota + drained, per_user_limit, start_ms, end_ms, sizes FROM "+s.pool+" WHERE activity_id = ?", activity).Row().
		Scan(&p.quota, &p.limit, &p.startMs, &p.endMs, &p.sizes)
	if errors.Is(err, sql.ErrNoRows) {
		return pool{}, false, nil
	}
	return p, err == nil, err
}

// conflictErr compares the terms of a pool row as read (readTerms) with
// the terms asked: nil when they are the same, else [ErrPoolConflict].
func conflictErr(activity string, p, want pool) error {
	if p.quota != want.quota || p.limit != want.limit || p.startMs != want.startMs || p.endMs != want.endMs {
		return fmt.Errorf("%w: activity %s has quota %d, limit %d, window [%d, %d) ms; asked quota %d, limit %d, window [%d, %d) ms",
			ErrPoolConflict, activity, p.quota, p.limit, p.startMs, p.endMs, want.quota, want.limit, want.startMs, want.endMs)
	}
	return nil
}

// poolOf validates a and quota and returns the pool Open should hold.
func poolOf(a stock.Activity, quota int64) (pool, error) {
	if err := checkID(stock.ErrInvalidArgument, "activity ID", a.ID); err != nil {
		return pool{}, err
	}
	switch {
	case a.Stock < 0 || a.Stock > maxQty:
		return badOpen("stock %d must be in 0..2^53-1", a.Stock)
	case quota < 0 || quota > a.Stock:
		return badOpen("quota %d must be in 0..stock (%d)", quota, a.Stock)
	}
	p, err := termsOf(a)
	p.quota, p.remaining = quota, quota
	return p, err
}

// termsOf validates a's per-user limit and window and returns them as a
// pool's (the limit 1 when a's is 0).
func termsOf(a stock.Activity) (pool, error) {
	switch {
	case a.PerUserLimit < 0 || a.PerUserLimit > maxQty:
		return badOpen("per-user limit %d must be in 0..2^53-1", a.PerUserLimit)
	case !a.Start.IsZero() && a.Start.UnixMilli() <= 0, !a.End.IsZero() && a.End.UnixMilli() <= 0:
		return badOpen("start and end must be after 1970")
	case !a.Start.IsZero() && !a.End.IsZero() && !a.End.After(a.Start):
		return badOpen("end %v must be after start %v", a.End, a.Start)
	}
	p := pool{limit: a.PerUserLimit, startMs: millis(a.Start), endMs: millis(a.End)}
	if p.limit == 0 {
		p.limit = 1
	}
	return p, nil
}

// badOpen is an error wrapping stock.ErrInvalidArgument for bad input to
// Open.
func badOpen(format string, args ...any) (pool, error) {
	return pool{}, fmt.Errorf("dbfallback: %w: "+format, append([]any{stock.ErrInvalidArgument}, args...)...)
}

// Drain takes the units left in the activity's pool out of it (remaining
// becomes 0 and the quota shrinks by as much) and returns how many, in one
// transaction: call it once Redis is back and give those units back to the
// Redis sale, so that no unit stays stranded in a pool that sells only
// while Redis is down. A second Drain returns 0, unless releases of
// fallback reservations put units back in between (drain again after
// them). An activity without a pool drains 0. A sale in sizes drains per
// size ("<sale>/<size>": give each size's units back to that size in
// Redis); Drain of the sale's own ID fails with an error wrapping
// [stock.ErrInvalidArgument].
func (s *Store) Drain(ctx context.Context, activity string) (units int64, err error) {
	if s.obs != nil {
		defer func(start time.Time) {
			s.observed(ctx, StageDrain, activity, start, observe.OK, float64(units), err)
		}(time.Now())
	}
	if err := checkActivity(activity); err != nil {
		return 0, err
	}
	err = s.inTx(ctx, func(tx *gorm.DB) error {
		units = 0
		p, ok, err := s.lockPool(tx, activity)
		if err == nil && p.sizes > 0 {
			return fmt.Errorf("%w: activity %s is a sale in %d sizes: drain each size (%s)",
				stock.ErrInvalidArgument, activity, p.sizes, stock.VariantOf(activity, "<size>"))
		}
		if err != nil || !ok || p.remaining == 0 {
			if err == nil {
				err = errRollback
			}
			return err
		}
		r := tx.Exec("UPDATE "+s.pool+" SET quota = quota - ?, drained = drained + ?, remaining = remaining - ?, updated_ms = ?"+
			" WHERE activity_id = ? AND remaining = ?", p.remaining, p.remaining, p.remaining, s.clock.Now().UnixMilli(), activity, p.remaining)
		if r.Error != nil {
			return r.Error
		}
		if r.RowsAffected != 1 {
			return fmt.Errorf("pool of activity %s changed under its lock", activity)
		}
		units = p.remaining
		return nil
	})
	if errors.Is(err, stock.ErrInvalidArgument) {
		return 0, fmt.Errorf("dbfallback: %w", err)
	}
	if err != nil {
		return 0, fmt.Errorf("dbfallback: drain activity %s: %w", activity, err)
	}
	return units, nil
}

// Stats is a snapshot of one activity's pool, read in one statement.
// Invariant: Remaining + HeldUnits = Quota. For a sale in sizes ([Store.Open]
// with variants) the sale's own ID gives the sum over its sizes and the
// sale's per-user limit; a size's ID ("<sale>/<size>") gives that size's
// pool.
type Stats struct {
	Opened       bool      // the activity has a pool ([Store.Open])
	Quota        int64     // units the pool answers for now: opened quota - Drained
	Remaining    int64     // units the fallback can still sell
	HeldUnits    int64     // units held by reservations in state held
	Reservations int64     // reservations in state held
	Drained      int64     // units taken out by [Store.Drain], in total
	Limit        int64     // per-user limit
	Start, End   time.Time // the window (zero: open / no end)
}

// Stats returns a read-only snapshot of the activity's pool (Opened is
// false when it has none).
func (s *Store) Stats(ctx context.Context, activity string) (Stats, error) {
	if err := checkActivity(activity); err != nil {
		return Stats{}, err
	}
	var st Stats
	var startMs, endMs int64
	// The sums over the range of activity's sizes are 0 for an activity
	// that is not a sale in sizes, and the sale's own row has no units.
	lo, hi := sizeRange(activity)
	sizes := "SELECT activity_id FROM " + s.pool + " WHERE activity_id > ? AND activity_id < ?"
	sum := func(col string) string {
		return "(SELECT COALESCE(SUM(" + col + "), 0) FROM " + s.pool + " WHERE activity_id > ? AND activity_id < ?)"
	}
	held := func(agg string) string {
		return "(SELECT " + agg + " FROM " + s.resv + " WHERE activity_id = ? AND state = ?) + (SELECT " + agg + " FROM " +
			s.resv + " WHERE state = ? AND activity_id IN (" + sizes + "))"
	}
	err := s.db.WithContext(ctx).Raw("SELECT quota + "+sum("quota")+", remaining + "+sum("remaining")+", drained + "+sum("drained")+
		", per_user_limit, start_ms, end_ms, "+held("COALESCE(SUM(qty), 0)")+", "+held("COUNT(*)")+
		" FROM "+s.pool+" WHERE activity_id = ?",
		lo, hi, lo, hi, lo, hi,
		activity, stateHeld, stateHeld, lo, hi,
		activity, stateHeld, stateHeld, lo, hi,
		activity).Row().
		Scan(&st.Quota, &st.Remaining, &st.Drained, &st.Limit, &startMs, &endMs, &st.HeldUnits, &st.Reservations)
	if errors.Is(err, sql.ErrNoRows) {
		return Stats{}, nil
	}
	if err != nil {
		return Stats{}, fmt.Errorf("dbfallback: stats of activity %s: %w", activity, err)
	}
	st.Opened, st.Start, st.End = true, fromMillis(startMs), fromMillis(endMs)
	return st, nil
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
