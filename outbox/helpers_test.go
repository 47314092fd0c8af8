package outbox

import (
	"context"
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

// migratedDB returns testenv.DB with the outbox table.
func migratedDB(t testing.TB) *gorm.DB {
	t.Helper()
	db := testenv.DB(t)
	require.NoError(t, AutoMigrate(context.Background(), db))
	return db
}

func countStatus(t testing.TB, db *gorm.DB, st Status) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Model(&Message{}).Where("status = ?", st).Count(&n).Error)
	return n
}

func allRows(t testing.TB, db *gorm.DB) []Message {
	t.Helper()
	var rows []Message
	require.NoError(t, db.Order("id").Find(&rows).Error)
	return rows
}
