package outbox

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// fakeClock is a settable clock for tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
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
