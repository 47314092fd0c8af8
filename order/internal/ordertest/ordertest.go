// Package ordertest holds the test fixtures the order packages share (a
// Redis reservation ledger that counts its releases, every database kind
// migrated). It is imported only by tests under order/, and never by
// package order's own internal tests (order imports nothing of it).
package ordertest

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
)

// EachDB runs f on a fresh database of every kind available (SQLite
// always; MariaDB and PostgreSQL with SECKILL_MYSQL_DSN and
// SECKILL_POSTGRES_DSN), migrated, each in a parallel subtest.
func EachDB(t *testing.T, f func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for kind, db := range testenv.AllDB(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			require.NoError(t, order.AutoMigrate(context.Background(), db))
			f(t, db)
		})
	}
}

// RedisStock is a reservation ledger in Redis, the shape of stock's: a
// stock counter and a hash of reservations (ID → qty) under one hash tag,
// and a hash counting the releases that took effect, per reservation.
// Release removes the entry and returns its units in one script, so a
// repeated release changes nothing: tests count stock and releases from
// Redis. It is an order.Releaser.
type RedisStock struct {
	rdb                   redis.UniversalClient
	stock, resv, released string

	mu   sync.Mutex
	fail error
}

var releaseScript = redis.NewScript(`
local q = redis.call('HGET', KEYS[2], ARGV[1])
if not q then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('INCRBY', KEYS[1], q)
redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
return 1`)

// NewRedisStock is activity act's ledger on the test's Redis
// (testenv.Redis, its own prefix), holding initial units.
func NewRedisStock(t testing.TB, act string, initial int64) *RedisStock {
	t.Helper()
	rdb := testenv.Redis(t)
	p := testenv.Prefix(t) + "{" + act + "}:"
	s := &RedisStock{rdb: rdb, stock: p + "stock", resv: p + "resv", released: p + "released"}
	require.NoError(t, rdb.Set(context.Background(), s.stock, initial, 0).Err())
	return s
}

// Reserve takes qty units for reservation id.
func (s *RedisStock) Reserve(t testing.TB, id string, qty int64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.rdb.DecrBy(ctx, s.stock, qty).Err())
	require.NoError(t, s.rdb.HSet(ctx, s.resv, id, qty).Err())
}

// SetFail makes every Release fail with err until it is set to nil.
func (s *RedisStock) SetFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// Release gives reservation id's units back, once.
func (s *RedisStock) Release(ctx context.Context, _ string, id string) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return fail
	}
	return releaseScript.Run(ctx, s.rdb, []string{s.stock, s.resv, s.released}, id).Err()
}

// Counts reads Redis: the stock, the units held by reservations, and the
// releases that took effect per reservation.
func (s *RedisStock) Counts(t testing.TB) (stock, held int64, released map[string]int64) {
	t.Helper()
	ctx := context.Background()
	stock, err := s.rdb.Get(ctx, s.stock).Int64()
	require.NoError(t, err)
	resv, err := s.rdb.HGetAll(ctx, s.resv).Result()
	require.NoError(t, err)
	for _, v := range resv {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		held += n
	}
	rel, err := s.rdb.HGetAll(ctx, s.released).Result()
	require.NoError(t, err)
	released = map[string]int64{}
	for k, v := range rel {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		released[k] = n
	}
	return stock, held, released
}
