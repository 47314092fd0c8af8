package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

type fakeClock = testenv.Clock

func newFakeClock() *fakeClock {
	return testenv.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}

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
