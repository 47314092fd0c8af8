package order

import (
	"fmt"
	"hash/fnv"
	"strings"

	"gorm.io/gorm"
)

// The tables are named by [Tables], the default names unless
// [WithTables] says otherwise. Everything that depends on the names is
// derived here: the secondary indexes and the CHECK constraint (named
// after their table, since PostgreSQL and SQLite name indexes per schema
// and MySQL 8 names CHECK constraints per schema), and the raw SQL of the
// hot path, with the names quoted for the dialect.

// Default table names: those of schema.sql, schema_postgres.sql and
// [AutoMigrate] without [WithTables].
const (
	DefaultActivityTable = "seckill_activity"
	DefaultOrderTable    = "seckill_order"
	DefaultDedupTable    = "message_dedup"
	DefaultAdjustTable   = "seckill_activity_adjust"
)

// MaxTableLen is the longest table name [WithTables] accepts: the longest
// name derived from it, uk_<table>_user_activity_live, then fits
// PostgreSQL's 63-byte limit on identifiers.
const MaxTableLen = 40

// Tables names the package's tables. An empty field keeps its default
// name ([DefaultActivityTable], [DefaultOrderTable], [DefaultDedupTable]).
type Tables struct {
	Activity string // the activities and their stock guard (seckill_activity)
	Order    string // the orders (seckill_order)
	Dedup    string // one outcome per message and per reservation (message_dedup)
	Adjust   string // the stock adjustments of the activities, a ledger (seckill_activity_adjust; [AdjustStock])
}

// DefaultTables returns the default names.
func DefaultTables() Tables {
	return Tables{Activity: DefaultActivityTable, Order: DefaultOrderTable, Dedup: DefaultDedupTable, Adjust: DefaultAdjustTable}
}

// TableOption names the tables: see [WithTables]. It is an option of
// every constructor that reads or writes them — a [ProcessorOption] (hence
// the [Consumer]'s tables), [CancellerOption], [ReconcilerOption],
// [FenceOption], [ResultsOption] and [OrdersOption] — and the only option
// of the functions that take a database or a dialect ([AutoMigrate],
// [Schema], [PruneDedup], [LiveReservations], [AdjustStock], …). A nil
// TableOption is ignored.
type TableOption func(*Tables)

func (f TableOption) apply(o *options) {
	if f != nil {
		f(&o.tables)
	}
}

func (f TableOption) applyProcessor(o *options)  { f.apply(o) }
func (f TableOption) applyFence(o *options)      { f.apply(o) }
func (f TableOption) applyResults(o *options)    { f.apply(o) }
func (f TableOption) applyCanceller(o *options)  { f.apply(o) }
func (f TableOption) applyReconciler(o *options) { f.apply(o) }
func (f TableOption) applyOrders(o *options)     { f.apply(o) }

// WithTables names the tables instead of the defaults, so that the order
// tables of several services (or a shop's own naming scheme) live side by
// side in one database. Empty fields keep their default names. Each name
// must be a plain lower-case SQL identifier — a letter or underscore, then
// letters, digits or underscores, at most [MaxTableLen] bytes — and the
// names must differ; anything else makes the constructor or function fail
// with [ErrInvalidConfig]. Names are quoted in every statement, so a
// reserved word such as "order" is allowed. A table keeps the index names
// of schema.sql under its default name and gets names derived from its own
// otherwise (uk_<table>_order_no, idx_<table>_status_expire, …), so two
// configurations never collide. Every component that touches the tables,
// and [AutoMigrate], must be given the same names.
func WithTables(t Tables) TableOption {
	return func(dst *Tables) {
		if t.Activity != "" {
			dst.Activity = t.Activity
		}
		if t.Order != "" {
			dst.Order = t.Order
		}
		if t.Dedup != "" {
			dst.Dedup = t.Dedup
		}
		if t.Adjust != "" {
			dst.Adjust = t.Adjust
		}
	}
}

// tablesOf applies opts to the default names and validates the result.
func tablesOf(opts []TableOption) (Tables, error) {
	t := DefaultTables()
	for _, opt := range opts {
		if opt != nil {
			opt(&t)
		}
	}
	return t, t.validate()
}

func (t Tables) validate() error {
	names := []string{t.Activity, t.Order, t.Dedup, t.Adjust}
	for i, n := range names {
		if err := validTableName(n); err != nil {
			return err
		}
		for _, m := range names[:i] {
			if m == n {
				return fmt.Errorf("%w: table names must differ: %+v", ErrInvalidConfig, t)
			}
		}
	}
	return nil
}

// validTableName checks that name is a plain lower-case identifier, the
// same on MySQL, PostgreSQL (no case folding) and SQLite.
func validTableName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty table name", ErrInvalidConfig)
	}
	if len(name) > MaxTableLen {
		return fmt.Errorf("%w: table name %q longer than %d bytes", ErrInvalidConfig, name, MaxTableLen)
	}
	for i, c := range []byte(name) {
		ok := c == '_' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9'
		if !ok {
			return fmt.Errorf("%w: table name %q is not a plain lower-case SQL identifier ([a-z_][a-z0-9_]*)", ErrInvalidConfig, name)
		}
	}
	return nil
}

// index is a secondary index (or, with check set, a CHECK constraint) of
// one of the tables. On the table's default name it is called legacy, as
// in schema.sql; on any other name prefix_<table>_suffix. No derived name
// can equal a legacy one: no legacy name ends in _<suffix> of a derived
// one with something before it.
type index struct {
	legacy         string
	prefix, suffix string
	unique         bool
	columns        []string
	check          string // CHECK expression; columns unused
}

func (ix index) name(table, def string) string {
	if table == def {
		return ix.legacy
	}
	return ix.prefix + "_" + table + "_" + ix.suffix
}

var (
	orderIndexes = []index{
		{legacy: "uk_order_no", prefix: "uk", suffix: "order_no", unique: true, columns: []string{"order_no"}},
		{legacy: "uk_reservation", prefix: "uk", suffix: "reservation_id", unique: true, columns: []string{"reservation_id"}},
		// UNIQUE(user, activity) while live and the cap is 1 (live_slot).
		{legacy: "uk_user_activity_live", prefix: "uk", suffix: "user_activity_live", unique: true,
			columns: []string{"user_id", "activity_id", "live_slot"}},
		{legacy: "idx_status_expire", prefix: "idx", suffix: "status_expire", columns: []string{"status", "expire_time"}},
	}
	dedupIndexes = []index{
		{legacy: "uk_dedup_reservation", prefix: "uk", suffix: "dedup_reservation", unique: true, columns: []string{"reservation_id"}},
		{legacy: "idx_dedup_user", prefix: "idx", suffix: "dedup_user", columns: []string{"user_id", "activity_id"}},
	}
	adjustIndexes = []index{
		{legacy: "idx_adjust_activity", prefix: "idx", suffix: "adjust_activity", columns: []string{"activity_id", "created_at"}},
	}
	activityChecks = []index{
		{legacy: "chk_stock_nonneg", prefix: "chk", suffix: "stock_nonneg", check: "stock >= 0"},
	}
)

// tableSpec is one table with its default name and derived objects.
type tableSpec struct {
	name, def  string
	model      any
	indexes    []index
	checks     []index
	idColumns  []string // the user and activity ID columns ([ValidID], VARCHAR(64))
	keyColumns []string // ASCII key columns compared byte for byte, VARCHAR(128) (adjust_id, reservation_id)
}

func (t Tables) specs() []tableSpec {
	return []tableSpec{
		{name: t.Activity, def: DefaultActivityTable, model: &Activity{}, checks: activityChecks, idColumns: []string{"id"}},
		{name: t.Order, def: DefaultOrderTable, model: &Order{}, indexes: orderIndexes, idColumns: []string{"user_id", "activity_id"},
			keyColumns: []string{"reservation_id"}},
		{name: t.Dedup, def: DefaultDedupTable, model: &Dedup{}, indexes: dedupIndexes, idColumns: []string{"activity_id", "user_id"},
			keyColumns: []string{"reservation_id"}},
		{name: t.Adjust, def: DefaultAdjustTable, model: &Adjustment{}, indexes: adjustIndexes, idColumns: []string{"activity_id"},
			keyColumns: []string{"adjust_id"}},
	}
}

// quoteIdent quotes a (validated) name for db's dialect: `t` on MySQL and
// SQLite, "t" on PostgreSQL.
func quoteIdent(db *gorm.DB, name string) string {
	var b strings.Builder
	db.Dialector.QuoteTo(&b, name)
	return b.String()
}

// createIndexSQL is the CREATE INDEX statement of ix on table.
func createIndexSQL(db *gorm.DB, ix index, table, def string) string {
	var b strings.Builder
	b.WriteString("CREATE ")
	if ix.unique {
		b.WriteString("UNIQUE ")
	}
	b.WriteString("INDEX ")
	b.WriteString(quoteIdent(db, ix.name(table, def)))
	b.WriteString(" ON ")
	b.WriteString(quoteIdent(db, table))
	b.WriteString(" (")
	for i, c := range ix.columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(db, c))
	}
	b.WriteString(")")
	return b.String()
}

// sqlText is the raw SQL of one table configuration on one dialect: the
// statements that bypass gorm's builder (hot path) or must be spelled per
// dialect.
type sqlText struct {
	dialect string
	tables  Tables

	takeStock    string // UPDATE activity SET stock = stock - ? WHERE id = ? AND stock >= ?
	restoreStock string // UPDATE activity SET stock = stock + ? WHERE id = ?
	liveUnits    string // the buyers' live units, locking where it matters
	lockSpace    int32  // PostgreSQL: first key of the buyers' advisory locks
	insertHead   [2]string
	insertRow    [2]string
}

func newSQLText(db *gorm.DB, t Tables) sqlText {
	dialect := db.Dialector.Name()
	act, ord, ded := quoteIdent(db, t.Activity), quoteIdent(db, t.Order), quoteIdent(db, t.Dedup)
	s := sqlText{
		dialect:      dialect,
		tables:       t,
		takeStock:    "UPDATE " + act + " SET stock = stock - ? WHERE id = ? AND stock >= ?",
		restoreStock: "UPDATE " + act + " SET stock = stock + ? WHERE id = ?",
		liveUnits:    "SELECT user_id, qty FROM " + ord + " WHERE user_id IN ? AND activity_id = ? AND status IN ?",
		lockSpace:    lockSpace(t.Order),
	}
	// MySQL/MariaDB: FOR UPDATE takes next-key locks on the (user_id,
	// activity_id, live_slot) index range, so a concurrent transaction for
	// the same buyer waits, even when the buyer has no row yet.
	// PostgreSQL locks rows, not ranges: a buyer without a live order has
	// nothing to lock, so there the buyers are serialised by an advisory
	// transaction lock taken first (lockBuyers), and FOR UPDATE also locks
	// the rows that exist. SQLite serialises writers anyway.
	if dialect == "mysql" || dialect == "postgres" {
		s.liveUnits += " FOR UPDATE"
	}
	s.insertHead[tableOrder] = "INSERT INTO " + ord + " (" + strings.Join(orderColumns, ",") + ") VALUES "
	s.insertHead[tableDedup] = "INSERT INTO " + ded + " (" + strings.Join(dedupColumns, ",") + ") VALUES "
	s.insertRow[tableOrder] = "(" + strings.TrimSuffix(strings.Repeat("?,", len(orderColumns)), ",") + ")"
	s.insertRow[tableDedup] = "(" + strings.TrimSuffix(strings.Repeat("?,", len(dedupColumns)), ",") + ")"
	return s
}

// Columns of the raw INSERTs, in the order of orderArgs and dedupArgs.
var (
	orderColumns = []string{"id", "order_no", "reservation_id", "user_id", "activity_id", "live_slot", "qty", "price",
		"product_id", "product_name", "ext", "status", "expire_time", "created_at", "updated_at"}
	dedupColumns = []string{"msg_id", "reservation_id", "activity_id", "user_id", "outcome", "order_no", "reason", "created_at"}
)

// lockSpace is the first key of the buyers' advisory locks on PostgreSQL
// (see Processor.lockBuyers): 32 bits of FNV-1a over the order table's name.
func lockSpace(orderTable string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte("seckill/order:" + orderTable))
	return int32(h.Sum32())
}
