package order

import (
	"fmt"
	"strings"

	"github.com/seckillkit/seckill/order/internal/dbx"
	"gorm.io/gorm"
)

// The tables are named by [Tables], the default names unless
// [WithTables] says otherwise. Everything that depends on the names is
// derived here: the secondary indexes and the CHECK constraint (named
// after their table, since PostgreSQL and SQLite name indexes per schema
// and MySQL 8 names CHECK constraints per schema), and the raw SQL of the
// hot path, with the names quoted for the dialect.

// maxTableLen is the longest table name [WithTables] accepts: the longest
// name derived from it, uk_<table>_user_activity_live, then fits
// PostgreSQL's 63-byte limit on identifiers.
const maxTableLen = 40

// Tables names the package's tables. An empty field keeps its default
// name, that of schema.sql, schema_postgres.sql and [AutoMigrate] without
// [WithTables].
type Tables struct {
	Activity string // the activities and their stock guard (default seckill_activity)
	Order    string // the orders (default seckill_order)
	Dedup    string // one outcome per message and per reservation (default message_dedup)
	Adjust   string // the stock adjustments of the activities, a ledger (default seckill_activity_adjust)
	Payment  string // the payments providers reported, by (provider, reference) (default seckill_payment)
	Line     string // the lines of the orders with lines, by (order_no, line_no) (default seckill_order_line)
}

func defaultTables() Tables {
	return Tables{Activity: defaultActivityTable, Order: defaultOrderTable, Dedup: defaultDedupTable, Adjust: defaultAdjustTable,
		Payment: defaultPaymentTable, Line: defaultLineTable}
}

func (t Tables) validate() error {
	names := []string{t.Activity, t.Order, t.Dedup, t.Adjust, t.Payment, t.Line}
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
	if len(name) > maxTableLen {
		return fmt.Errorf("%w: table name %q longer than %d bytes", ErrInvalidConfig, name, maxTableLen)
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
	paymentIndexes = []index{
		{legacy: "idx_payment_order", prefix: "idx", suffix: "payment_order", columns: []string{"order_no"}},
	}
	lineIndexes = []index{
		// the line's stock reservation, "<order's reservation>#<line_no>"
		{legacy: "uk_line_reservation", prefix: "uk", suffix: "line_reservation", unique: true, columns: []string{"reservation_id"}},
		// a buyer's lines per activity: the caps of the lines
		{legacy: "idx_line_user_activity", prefix: "idx", suffix: "line_user_activity", columns: []string{"user_id", "activity_id"}},
		// an activity's lines: the reconciler's conservation
		{legacy: "idx_line_activity", prefix: "idx", suffix: "line_activity", columns: []string{"activity_id", "status"}},
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
		{name: t.Activity, def: defaultActivityTable, model: &Activity{}, checks: activityChecks, idColumns: []string{"id"}},
		{name: t.Order, def: defaultOrderTable, model: &Order{}, indexes: orderIndexes, idColumns: []string{"user_id", "activity_id"},
			keyColumns: []string{"reservation_id"}},
		{name: t.Dedup, def: defaultDedupTable, model: &Dedup{}, indexes: dedupIndexes, idColumns: []string{"activity_id", "user_id"},
			keyColumns: []string{"reservation_id"}},
		{name: t.Adjust, def: defaultAdjustTable, model: &adjustment{}, indexes: adjustIndexes, idColumns: []string{"activity_id"},
			keyColumns: []string{"adjust_id"}},
		{name: t.Payment, def: defaultPaymentTable, model: &payment{}, indexes: paymentIndexes, idColumns: []string{"provider"},
			keyColumns: []string{"reference"}},
		{name: t.Line, def: defaultLineTable, model: &Line{}, indexes: lineIndexes, idColumns: []string{"user_id", "activity_id"},
			keyColumns: []string{"reservation_id"}},
	}
}

// createIndexSQL is the CREATE INDEX statement of ix on table.
func createIndexSQL(db *gorm.DB, ix index, table, def string) string {
	var b strings.Builder
	b.WriteString("CREATE ")
	if ix.unique {
		b.WriteString("UNIQUE ")
	}
	b.WriteString("INDEX ")
	b.WriteString(dbx.QuoteIdent(db, ix.name(table, def)))
	b.WriteString(" ON ")
	b.WriteString(dbx.QuoteIdent(db, table))
	b.WriteString(" (")
	for i, c := range ix.columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(dbx.QuoteIdent(db, c))
	}
	b.WriteString(")")
	return b.String()
}
