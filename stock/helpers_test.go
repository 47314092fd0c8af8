package stock

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/require"
)

type fakeClock = testenv.Clock

func newFakeClock(t time.Time) *fakeClock { return testenv.NewClock(t) }

// forEachRedis runs f on every Redis kind available (miniredis always; the
// real standalone server and Cluster when their env vars are set). Each kind
// gets its own key prefix under the parent test's prefix, which testenv
// deletes at cleanup on real servers. The test and its subtests run in
// parallel with other tests.
func forEachRedis(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, prefix string)) {
	t.Helper()
	t.Parallel()
	parent := testenv.Prefix(t)
	for kind, rdb := range testenv.AllRedis(t) {
		prefix := parent + string(kind) + ":"
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			f(t, rdb, prefix)
		})
	}
}

func newTestDeductor(t testing.TB, rdb redis.Scripter, prefix string, opts ...Option) *Deductor {
	t.Helper()
	d, err := New(rdb, append([]Option{WithKeyPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	return d
}

func mustLoad(t testing.TB, d *Deductor, a Activity) {
	t.Helper()
	loaded, err := d.Load(context.Background(), a)
	require.NoError(t, err)
	require.True(t, loaded, "activity %d already loaded", a.ID)
}

// ledger reads the whole ledger of an activity by HSCAN pages, deduplicated.
func ledger(t testing.TB, d *Deductor, activity int64) map[string]Reservation {
	t.Helper()
	out := map[string]Reservation{}
	var cursor uint64
	for i := 0; ; i++ {
		require.Less(t, i, 100000, "scan does not end")
		page, next, err := d.Reservations(context.Background(), activity, cursor, 500)
		require.NoError(t, err)
		for _, r := range page {
			out[r.RequestID] = r
		}
		if next == 0 {
			return out
		}
		cursor = next
	}
}

// heldSum returns the units held in the ledger and per user.
func heldSum(l map[string]Reservation) (int64, map[int64]int64) {
	var sum int64
	per := map[int64]int64{}
	for _, r := range l {
		if r.State == Held {
			sum += r.Qty
			per[r.User] += r.Qty
		}
	}
	return sum, per
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
