package dbfallback

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/stock"
)

// On SQLite with several connections (WAL, busy_timeout) concurrent
// transactions queue for the write lock, which each one takes with its
// first statement: no SQLITE_BUSY, no oversell, caps hold.
func TestSQLiteManyConnections(t *testing.T) {
	t.Parallel()
	db, err := testenv.OpenSQLite(filepath.Join(t.TempDir(), "many.db"))
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(8)
	t.Cleanup(func() { _ = sqlDB.Close() })
	clock := testenv.NewEpochClock(0)
	s, err := New(db, WithClock(clock))
	require.NoError(t, err)
	require.NoError(t, s.AutoMigrate(bg))
	e := env{s: s, db: db, clock: clock}
	const act, quota, buyers = "51", 20, 120
	e.open(t, act, quota, 2)

	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[string]int64{}
	for i := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := uuidOf(i%40 + 1) // three requests per user, cap 2
			r, err := s.Reserve(bg, req(act, user, 1, rid("m-%d", i)))
			if !assert.NoError(t, err) {
				return
			}
			if r.Status == stock.Reserved {
				mu.Lock()
				won[user]++
				mu.Unlock()
			}
			if i%10 == 0 {
				_, err := s.Release(bg, act, rid("m-%d", i))
				assert.NoError(t, err)
				if r.Status == stock.Reserved {
					mu.Lock()
					won[user]--
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for u, n := range won {
		if n == 0 {
			delete(won, u)
		}
	}
	rows := e.rawHeldByUser(t, act)
	assert.Equal(t, won, rows)
	for u, h := range rows {
		assert.LessOrEqual(t, h, int64(2), "user %d", u)
	}
	held, _ := e.rawHeld(t, act)
	assert.LessOrEqual(t, held, int64(quota))
	e.conserved(t, act)
}
