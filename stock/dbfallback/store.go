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

// pool is the locked state of one activity's pool.
type pool struct {
	quota, remaining, drained, limit, startMs, endMs int64
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
	err = tx.Raw("SELECT quota, remaining, drained, per_user_limit, start_ms, end_ms FROM "+s.pool+
		" WHERE activity_id = ?"+s.lock, activity).Row().
		Scan(&p.quota, &p.remaining, &p.drained, &p.limit, &p.startMs, &p.endMs)
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
// Open is idempotent: opening an activity again with the same quota, limit
// and window changes nothing (also after [Store.Drain], which does not
// change the quota Open compares with); other terms fail with
// [ErrPoolConflict]. A bad activity or a quota outside 0..a.Stock fails
// with an error wrapping [stock.ErrInvalidArgument].
func (s *Store) Open(ctx context.Context, a stock.Activity, quota int64) (err error) {
	if s.obs != nil {
		defer func(start time.Time) { s.observed(ctx, StageOpen, a.ID, start, observe.OK, 0, err) }(time.Now())
	}
	want, err := poolOf(a, quota)
	if err != nil {
		return err
	}
	db := s.db.WithContext(ctx)
	for i := 1; ; i++ {
		// A plain INSERT, not a locking read first: concurrent first Opens
		// then queue on the new row instead of deadlocking on its gap.
		err = db.Exec("INSERT INTO "+s.pool+" (activity_id, quota, remaining, drained, per_user_limit, start_ms, end_ms, updated_ms)"+
			" VALUES (?, ?, ?, 0, ?, ?, ?, ?)", a.ID, want.quota, want.quota, want.limit, want.startMs, want.endMs,
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
	var p pool
	err = db.Raw("SELECT quota, drained, per_user_limit, start_ms, end_ms FROM "+s.pool+" WHERE activity_id = ?", a.ID).Row().
		Scan(&p.quota, &p.drained, &p.limit, &p.startMs, &p.endMs)
	if err != nil {
		return fmt.Errorf("dbfallback: open activity %s: %w", a.ID, err)
	}
	if p.quota+p.drained != want.quota || p.limit != want.limit || p.startMs != want.startMs || p.endMs != want.endMs {
		return fmt.Errorf("%w: activity %s has quota %d, limit %d, window [%d, %d) ms; asked quota %d, limit %d, window [%d, %d) ms",
			ErrPoolConflict, a.ID, p.quota+p.drained, p.limit, p.startMs, p.endMs, want.quota, want.limit, want.startMs, want.endMs)
	}
	return nil
}

// poolOf validates a and quota and returns the pool Open should hold.
func poolOf(a stock.Activity, quota int64) (pool, error) {
	bad := func(format string, args ...any) (pool, error) {
		return pool{}, fmt.Errorf("dbfallback: %w: "+format, append([]any{stock.ErrInvalidArgument}, args...)...)
	}
	if err := checkID(stock.ErrInvalidArgument, "activity ID", a.ID); err != nil {
		return pool{}, err
	}
	switch {
	case a.Stock < 0 || a.Stock > maxQty:
		return bad("stock %d must be in 0..2^53-1", a.Stock)
	case quota < 0 || quota > a.Stock:
		return bad("quota %d must be in 0..stock (%d)", quota, a.Stock)
	case a.PerUserLimit < 0 || a.PerUserLimit > maxQty:
		return bad("per-user limit %d must be in 0..2^53-1", a.PerUserLimit)
	case !a.Start.IsZero() && a.Start.UnixMilli() <= 0, !a.End.IsZero() && a.End.UnixMilli() <= 0:
		return bad("start and end must be after 1970")
	case !a.Start.IsZero() && !a.End.IsZero() && !a.End.After(a.Start):
		return bad("end %v must be after start %v", a.End, a.Start)
	}
	p := pool{quota: quota, remaining: quota, limit: a.PerUserLimit, startMs: millis(a.Start), endMs: millis(a.End)}
	if p.limit == 0 {
		p.limit = 1
	}
	return p, nil
}

// Drain takes the units left in the activity's pool out of it (remaining
// becomes 0 and the quota shrinks by as much) and returns how many, in one
// transaction: call it once Redis is back and give those units back to the
// Redis sale, so that no unit stays stranded in a pool that sells only
// while Redis is down. A second Drain returns 0, unless releases of
// fallback reservations put units back in between (drain again after
// them). An activity without a pool drains 0.
func (s *Store) Drain(ctx context.Context, activity string) (units int64, err error) {
	if s.obs != nil {
		defer func(start time.Time) {
			s.observed(ctx, StageDrain, activity, start, observe.OK, float64(units), err)
		}(time.Now())
	}
	if err := checkID(stock.ErrInvalidArgument, "activity ID", activity); err != nil {
		return 0, err
	}
	err = s.inTx(ctx, func(tx *gorm.DB) error {
		units = 0
		p, ok, err := s.lockPool(tx, activity)
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
	if err != nil {
		return 0, fmt.Errorf("dbfallback: drain activity %s: %w", activity, err)
	}
	return units, nil
}

// Stats is a snapshot of one activity's pool, read in one statement.
// Invariant: Remaining + HeldUnits = Quota.
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
	if err := checkID(stock.ErrInvalidArgument, "activity ID", activity); err != nil {
		return Stats{}, err
	}
	var st Stats
	var startMs, endMs int64
	err := s.db.WithContext(ctx).Raw("SELECT quota, remaining, drained, per_user_limit, start_ms, end_ms,"+
		" (SELECT COALESCE(SUM(qty), 0) FROM "+s.resv+" WHERE activity_id = ? AND state = ?),"+
		" (SELECT COUNT(*) FROM "+s.resv+" WHERE activity_id = ? AND state = ?)"+
		" FROM "+s.pool+" WHERE activity_id = ?", activity, stateHeld, activity, stateHeld, activity).Row().
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
