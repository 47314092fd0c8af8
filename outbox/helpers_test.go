package outbox

import (
	"context"
	"os"
	"testing"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

type fakeClock = testenv.Clock

// newFakeClock returns a fake clock standing at the test epoch. Give it to
// the Writer and the Relay alike: rows are due by the writer's clock and
// claimed by the relay's, so a fake writer clock with a real relay clock
// (or the reverse) would depend on today's date.
func newFakeClock() *fakeClock { return testenv.NewEpochClock(0) }

// eachDB runs f as a parallel subtest, named after the kind, on a fresh
// database of every kind available (testenv.AllDB: SQLite always, MariaDB
// and PostgreSQL when SECKILL_MYSQL_DSN and SECKILL_POSTGRES_DSN are set),
// with the outbox table.
func eachDB(t *testing.T, f func(t *testing.T, kind testenv.DBKind, db *gorm.DB)) {
	t.Helper()
	forEachDB(t, true, f)
}

// eachDBSerial is eachDB with the subtests run one after the other, for
// tests that must not run beside others (they count goroutines).
func eachDBSerial(t *testing.T, f func(t *testing.T, kind testenv.DBKind, db *gorm.DB)) {
	t.Helper()
	forEachDB(t, false, f)
}

func forEachDB(t *testing.T, parallel bool, f func(t *testing.T, kind testenv.DBKind, db *gorm.DB)) {
	t.Helper()
	for kind, db := range testenv.AllDB(t) {
		t.Run(string(kind), func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			require.NoError(t, AutoMigrate(context.Background(), db))
			f(t, kind, db)
		})
	}
}

// dbKinds lists the kinds of database available, as testenv.AllDB would
// return them, in a fixed order (for benchmarks).
func dbKinds() []testenv.DBKind {
	kinds := []testenv.DBKind{testenv.KindSQLite}
	if os.Getenv(testenv.EnvMySQLDSN) != "" {
		kinds = append(kinds, testenv.KindMySQL)
	}
	if os.Getenv(testenv.EnvPostgresDSN) != "" {
		kinds = append(kinds, testenv.KindPostgres)
	}
	return kinds
}

// openDB returns a fresh database of the given kind (no outbox table).
func openDB(t testing.TB, kind testenv.DBKind) *gorm.DB {
	t.Helper()
	switch kind {
	case testenv.KindMySQL:
		return testenv.MySQL(t)
	case testenv.KindPostgres:
		return testenv.Postgres(t)
	}
	return testenv.SQLite(t)
}

// migratedDB returns a fresh database of the given kind with the outbox
// table.
func migratedDB(t testing.TB, kind testenv.DBKind) *gorm.DB {
	t.Helper()
	db := openDB(t, kind)
	require.NoError(t, AutoMigrate(context.Background(), db))
	return db
}

func countStatus(t testing.TB, db *gorm.DB, st Status) int64 {
	t.Helper()
	var n int64
	var err error
	// pgx closes a connection whose query's context was cancelled (a relay
	// stopped mid-query) by setting a past deadline on it; database/sql can
	// hand that connection out once more, and the next query on it fails
	// with "i/o timeout" and drops it. Such an error is the pool's, not the
	// count's: ask again, a bounded number of times.
	for attempt := 0; attempt < 3; attempt++ {
		if err = db.Model(&Message{}).Where("status = ?", st).Count(&n).Error; err == nil {
			return n
		}
		t.Logf("count %s: %v (attempt %d)", st, err, attempt+1)
	}
	require.NoError(t, err)
	return n
}

func allRows(t testing.TB, db *gorm.DB) []Message {
	t.Helper()
	var rows []Message
	require.NoError(t, db.Order("id").Find(&rows).Error)
	return rows
}
