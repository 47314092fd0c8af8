package order

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

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

// insertRows writes rows of table t inside tx. args holds columns(t)
// parameters per row. A chunk uses its prepared statement when the gorm
// transaction runs on a plain *sql.Tx of the cached *sql.DB and the
// statement is prepared, and a text INSERT otherwise (a gorm PrepareStmt
// session, a resolver plugin, a failed prepare).
func (p *Processor) insertRows(ctx context.Context, tx *gorm.DB, t table, args []any) error {
	cols := columns(t)
	rows := len(args) / cols
	stx, isTx := tx.Statement.ConnPool.(*sql.Tx)
	lo := 0
	for _, n := range chunks(rows, chunkSize(tx)) {
		part := args[lo*cols : (lo+n)*cols]
		lo += n
		if s := p.stmts.get(stmtKey{t, n}); isTx && s != nil {
			_, err := stx.StmtContext(ctx, s).ExecContext(ctx, part...)
			if err == nil {
				p.stmts.used.Add(1)
				continue
			}
			if !strings.Contains(err.Error(), "statement from different database") {
				return err
			}
			// The transaction is not on the DB the statements were
			// prepared on: text from now on.
			p.stmts.off.Store(true)
		}
		if err := rawExec(ctx, tx, p.sql.insertSQL(t, n), part); err != nil {
			return err
		}
	}
	return nil
}
