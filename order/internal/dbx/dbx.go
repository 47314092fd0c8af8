// Package dbx holds the database and retry helpers that order and the
// packages built on it (order/status, order/operate, order/reconcile)
// share. It imports none of them.
package dbx

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// IsDuplicate reports a unique-key violation on MySQL/MariaDB (1062),
// PostgreSQL (SQLSTATE 23505, from pgx's *pgconn.PgError or any error
// carrying one) or SQLite, whether or not gorm's TranslateError is on.
func IsDuplicate(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) && me.Number == 1062 {
		return true
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) && st.SQLState() == "23505" {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") || strings.Contains(s, "Duplicate entry")
}

// IsRetryable reports a transaction the database rolled back to break a
// deadlock or a serialization conflict — MySQL/MariaDB 1213, PostgreSQL
// SQLSTATE 40P01 and 40001 — which succeeds when run again.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) && me.Number == 1213 {
		return true
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) && (st.SQLState() == "40P01" || st.SQLState() == "40001") {
		return true
	}
	return false
}

// QuoteIdent quotes a (validated) name for db's dialect: `t` on MySQL and
// SQLite, "t" on PostgreSQL.
func QuoteIdent(db *gorm.DB, name string) string {
	var b strings.Builder
	db.Dialector.QuoteTo(&b, name)
	return b.String()
}

// SleepBackoff waits min·2^attempt (capped at max) with ±25 % jitter.
func SleepBackoff(ctx context.Context, min, max time.Duration, attempt int) error {
	d := min
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	d = d*3/4 + time.Duration(rand.Int64N(int64(d)/2+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// DescribeID describes an invalid ID (at most maxLen bytes of
// [A-Za-z0-9._@+-]) without echoing an over-long one.
func DescribeID(id string, maxLen int) string {
	want := fmt.Sprintf("want 1..%d bytes of [A-Za-z0-9._@+-]", maxLen)
	switch {
	case id == "":
		return "is empty (" + want + ")"
	case len(id) > maxLen:
		return fmt.Sprintf("is %d bytes long (%s)", len(id), want)
	default:
		return fmt.Sprintf("%q is not valid (%s)", id, want)
	}
}
