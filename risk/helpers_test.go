package risk

import (
	"context"
	"net/netip"
	"sort"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
)

type fakeClock = testenv.Clock

// newFakeClock returns a clock at testenv.Epoch(). It may be used next to a
// real Redis: in this package the injected clock only stamps a ban's
// reported "until" (stored as data and read back by the same clock, never
// a Redis expiry time; TTLs are relative PX durations) and AuthCache's
// in-process expiry.
func newFakeClock() *fakeClock {
	return testenv.NewEpochClock(0)
}

// eachRedis runs fn once per Redis kind available (miniredis always, real
// standalone / Cluster when their variables are set), each in a parallel
// subtest with its own key prefix.
func eachRedis(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient, prefix string)) {
	t.Helper()
	all := testenv.AllRedis(t)
	kinds := make([]string, 0, len(all))
	for k := range all {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		rdb := all[testenv.RedisKind(k)]
		t.Run(k, func(t *testing.T) {
			fn(t, rdb, testenv.Prefix(t))
		})
	}
}

var bg = context.Background()

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }
