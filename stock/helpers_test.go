package stock

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/require"
)

// forEachRedis runs f on every Redis kind available (miniredis always; the
// real standalone server and Cluster when their env vars are set). Each kind
// gets its own key prefix under the parent test's prefix, which testenv
// deletes at cleanup on real servers. The test and its subtests run in
// parallel with other tests.
func forEachRedis(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, prefix string)) {
	t.Helper()
	forEachRedisKind(t, func(t *testing.T, _ testenv.RedisKind, rdb redis.UniversalClient, prefix string) {
		f(t, rdb, prefix)
	})
}

// forEachRedisKind is forEachRedis for tests that must know the kind.
func forEachRedisKind(t *testing.T, f func(t *testing.T, kind testenv.RedisKind, rdb redis.UniversalClient, prefix string)) {
	t.Helper()
	t.Parallel()
	parent := testenv.Prefix(t)
	for kind, rdb := range testenv.AllRedis(t) {
		prefix := parent + string(kind) + ":"
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			f(t, kind, rdb, prefix)
		})
	}
}

// hgetall reads one hash straight from Redis, not through the Deductor.
func hgetall(t testing.TB, rdb redis.UniversalClient, key string) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), key).Result()
	require.NoError(t, err)
	return m
}

// hint reads one integer field of a hash straight from Redis.
func hint(t testing.TB, rdb redis.UniversalClient, key, field string) int64 {
	t.Helper()
	v, err := rdb.HGet(context.Background(), key, field).Int64()
	require.NoError(t, err, "%s %s", key, field)
	return v
}

// lossLog records the WithOnLoss hook.
type lossLog struct {
	mu      sync.Mutex
	reasons map[string][]string
}

func (l *lossLog) hook(_ context.Context, activity string, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reasons == nil {
		l.reasons = map[string][]string{}
	}
	l.reasons[activity] = append(l.reasons[activity], reason)
}

func (l *lossLog) get(activity string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reasons[activity]...)
}

func (l *lossLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.reasons {
		n += len(r)
	}
	return n
}

func newTestDeductor(t testing.TB, rdb redis.Scripter, prefix string, opts ...DeductorOption) *Deductor {
	t.Helper()
	d, err := New(rdb, append([]DeductorOption{WithKeyPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	return d
}

func mustLoad(t testing.TB, d *Deductor, a Activity) {
	t.Helper()
	loaded, err := d.Load(context.Background(), a)
	require.NoError(t, err)
	require.True(t, loaded, "activity %s already loaded", a.ID)
}

// ledger reads the whole ledger of an activity by HSCAN pages, deduplicated.
func ledger(t testing.TB, d *Deductor, activity string) map[string]Reservation {
	t.Helper()
	out := map[string]Reservation{}
	var cursor uint64
	for i := 0; ; i++ {
		require.Less(t, i, 100000, "scan does not end")
		page, next, err := d.Reservations(context.Background(), activity, cursor, 500)
		require.NoError(t, err)
		for _, r := range page {
			out[r.ID] = r
		}
		if next == 0 {
			return out
		}
		cursor = next
	}
}

// heldSum returns the units held in the ledger and per user.
func heldSum(l map[string]Reservation) (int64, map[string]int64) {
	var sum int64
	per := map[string]int64{}
	for _, r := range l {
		if r.State == Held {
			sum += r.Qty
			per[r.User] += r.Qty
		}
	}
	return sum, per
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// uid returns the test user ID of i: the decimal form of i, as a shop with
// numeric IDs passes them.
func uid[T ~int | ~int64 | ~uint64](i T) string { return strconv.FormatInt(int64(i), 10) }

// uuidOf returns a UUID-shaped user ID for i (version 4 layout; the last
// group is i itself, so distinct i give distinct IDs), for tests that must
// hold with non-numeric IDs.
func uuidOf[T ~int | ~int64 | ~uint64](i T) string {
	x := uint64(i)*0x9e3779b97f4a7c15 + 0x6a09e667f3bcc909
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", uint32(x>>32), uint16(x>>16), uint16(x)&0xfff, uint16(x>>4)&0xfff, uint64(i)&0xffffffffffff)
}
