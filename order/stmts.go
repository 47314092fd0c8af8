package order

import (
	"context"
	"database/sql"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/seckillkit/seckill/order/internal/dbx"
	"gorm.io/gorm"
)

// The batch path writes its rows with server-side prepared multi-row
// INSERTs: the server parses each statement shape once per connection and
// then takes the rows as binary parameters. On MariaDB this cut the server's
// CPU per order by about 15 % against one text INSERT per batch (SQL parsing
// was the largest item in its profile; BENCHMARKS.md). A batch is split into
// chunks whose row counts are powers of two — full chunks of [preparedChunk]
// rows and the remainder by its binary digits — so a connection holds at most
// 2 × (log2(preparedChunk)+1) prepared statements whatever the batch sizes.

const (
	// preparedChunk is the rows of one prepared INSERT on servers
	// (MySQL/MariaDB, PostgreSQL): 256 × 15 placeholders stay well under the 65,535
	// limit, and larger chunks measured no faster.
	preparedChunk = 256
	// sqliteChunk bounds one INSERT on SQLite, whose pure-Go driver binds
	// parameters in O(params²).
	sqliteChunk = 64
)

type table uint8

const (
	tableOrder table = iota
	tableDedup
)

type stmtKey struct {
	t    table
	rows int
}

// stmtCache holds the prepared INSERTs of one Processor on its *sql.DB;
// database/sql re-prepares each on the connections that need it (inside a
// transaction, on the transaction's own connection). They are prepared all
// at once before a batch transaction begins, never inside one: a pool with a
// single connection (SQLite here) would wait forever for a second.
type stmtCache struct {
	db   *sql.DB // nil: prepared statements unavailable, text INSERTs
	text *sqlText
	off  atomic.Bool
	used atomic.Int64 // chunks written through a prepared statement

	mu sync.Mutex
	m  map[stmtKey]*sql.Stmt
}

func newStmtCache(db *gorm.DB, text *sqlText) *stmtCache {
	c := &stmtCache{m: map[stmtKey]*sql.Stmt{}, text: text}
	// Only a plain pool: a gorm PrepareStmt session or a resolver plugin
	// puts its own ConnPool here and gets text INSERTs.
	if sdb, ok := db.ConnPool.(*sql.DB); ok {
		c.db = sdb
	}
	return c
}

// prepare makes sure every shape of chunk size size is prepared. A failure
// leaves the cache as it was: the batch then writes text INSERTs.
func (c *stmtCache) prepare(ctx context.Context, size int) {
	if c.db == nil || c.off.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range []table{tableOrder, tableDedup} {
		for rows := size; rows > 0; rows >>= 1 {
			k := stmtKey{t, rows}
			if _, ok := c.m[k]; ok {
				continue
			}
			s, err := c.db.PrepareContext(ctx, c.text.insertSQL(t, rows))
			if err != nil {
				return
			}
			c.m[k] = s
		}
	}
}

func (c *stmtCache) get(k stmtKey) *sql.Stmt {
	if c.db == nil || c.off.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for k, s := range c.m {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
		delete(c.m, k)
	}
	return first
}

// columns is the number of parameters one row of table t binds.
func columns(t table) int {
	if t == tableOrder {
		return len(orderColumns)
	}
	return len(dedupColumns)
}

// insertSQL is the INSERT of rows rows into table t: ? placeholders on
// MySQL and SQLite, $1, $2, … on PostgreSQL (database/sql passes the text
// to the driver unchanged).
func (s *sqlText) insertSQL(t table, rows int) string {
	head, row := s.insertHead[t], s.insertRow[t]
	var sb strings.Builder
	sb.Grow(len(head) + rows*(len(row)+1)*2)
	sb.WriteString(head)
	if s.dialect != "postgres" {
		for i := range rows {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(row)
		}
		return sb.String()
	}
	n, cols := 0, columns(t)
	for i := range rows {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('(')
		for c := range cols {
			if c > 0 {
				sb.WriteByte(',')
			}
			n++
			sb.WriteByte('$')
			sb.WriteString(strconv.Itoa(n))
		}
		sb.WriteByte(')')
	}
	return sb.String()
}

// chunks splits n rows into INSERT sizes: full chunks of size, then the
// binary digits of the remainder, largest first.
func chunks(n, size int) []int {
	var out []int
	for ; n >= size; n -= size {
		out = append(out, size)
	}
	for b := size >> 1; b > 0; b >>= 1 {
		if n&b != 0 {
			out = append(out, b)
		}
	}
	return out
}

func chunkSize(db *gorm.DB) int {
	if db.Dialector.Name() == "sqlite" {
		return sqliteChunk
	}
	return preparedChunk
}

// Columns of the raw INSERTs, in the order of orderArgs and dedupArgs.
var (
	orderColumns = []string{"id", "order_no", "reservation_id", "user_id", "activity_id", "live_slot", "qty", "price",
		"product_id", "product_name", "ext", "status", "expire_time", "created_at", "updated_at"}
	dedupColumns = []string{"msg_id", "reservation_id", "activity_id", "user_id", "outcome", "order_no", "reason", "created_at"}
)

// sqlText is the raw SQL of one table configuration on one dialect: the
// statements that bypass gorm's builder (hot path) or must be spelled per
// dialect.
type sqlText struct {
	dialect string
	tables  Tables

	takeStock    string // UPDATE activity SET stock = stock - ? WHERE id = ? AND stock >= ?
	restoreStock string // UPDATE activity SET stock = stock + ? WHERE id = ?
	liveUnits    string // the buyers' live units, locking where it matters
	// liveLineUnits: the same over the order lines (live: status '', or
	// REFUNDED without a restock to the sale)
	liveLineUnits string
	// saleLineUnits: the same over the lines of every variant of a sale
	// (activity_id LIKE '<sale>/%', escaped with '!')
	saleLineUnits string
	lockSpace     int32 // PostgreSQL: first key of the buyers' advisory locks
	insertHead    [2]string
	insertRow     [2]string
}

func newSQLText(db *gorm.DB, t Tables) sqlText {
	dialect := db.Dialector.Name()
	act, ord, ded := dbx.QuoteIdent(db, t.Activity), dbx.QuoteIdent(db, t.Order), dbx.QuoteIdent(db, t.Dedup)
	s := sqlText{
		dialect:      dialect,
		tables:       t,
		takeStock:    "UPDATE " + act + " SET stock = stock - ? WHERE id = ? AND stock >= ?",
		restoreStock: "UPDATE " + act + " SET stock = stock + ? WHERE id = ?",
		liveUnits:    "SELECT user_id, qty FROM " + ord + " WHERE user_id IN ? AND activity_id = ? AND (status IN ? OR status = ? AND restock <> ?)",
		lockSpace:    lockSpace(t.Order),
		liveLineUnits: "SELECT user_id, qty FROM " + dbx.QuoteIdent(db, t.Line) +
			" WHERE user_id IN ? AND activity_id = ? AND (status = '' OR status = ? AND restock <> ?)",
		saleLineUnits: "SELECT user_id, qty FROM " + dbx.QuoteIdent(db, t.Line) +
			" WHERE user_id IN ? AND activity_id LIKE ? ESCAPE '!' AND (status = '' OR status = ? AND restock <> ?)",
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
		s.liveLineUnits += " FOR UPDATE"
		s.saleLineUnits += " FOR UPDATE"
	}
	s.insertHead[tableOrder] = "INSERT INTO " + ord + " (" + strings.Join(orderColumns, ",") + ") VALUES "
	s.insertHead[tableDedup] = "INSERT INTO " + ded + " (" + strings.Join(dedupColumns, ",") + ") VALUES "
	s.insertRow[tableOrder] = "(" + strings.TrimSuffix(strings.Repeat("?,", len(orderColumns)), ",") + ")"
	s.insertRow[tableDedup] = "(" + strings.TrimSuffix(strings.Repeat("?,", len(dedupColumns)), ",") + ")"
	return s
}

// lockSpace is the first key of the buyers' advisory locks on PostgreSQL
// (see Processor.lockBuyers): 32 bits of FNV-1a over the order table's name.
func lockSpace(orderTable string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte("seckill/order:" + orderTable))
	return int32(h.Sum32())
}
