package waitroom

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
)

// t0 is the start of every test sale: the test epoch (SECKILL_TEST_EPOCH
// moves it). Every room of these tests runs on an injected clock, whose
// time the scripts get in ARGV (no Redis TTL, no Redis TIME), so fake time
// never meets real time, on miniredis or a real server.
var t0 = testenv.Epoch().Truncate(time.Second)

var testKeys = []Key{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}}

// testSeed is a revealed seed; its commitment is Commit(testSeed).
var testSeed = []byte("the seed revealed at the start!!")

// newRoom returns a Room on rdb with its own key prefix for t and the
// clock c, plus opts.
func newRoom(t testing.TB, rdb redis.UniversalClient, c Clock, opts ...Option) *Room {
	t.Helper()
	r, err := New(rdb, testKeys, append([]Option{WithKeyPrefix(testenv.Prefix(t)), WithClock(c)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// configure sets sale up to start at t0 with the rate and cap given.
func configure(t testing.TB, r *Room, sale string, rate float64, maxActive int64) {
	t.Helper()
	if err := r.Configure(context.Background(), sale, Config{Start: t0, Commitment: Commit(testSeed), Rate: rate, MaxActive: maxActive}); err != nil {
		t.Fatal(err)
	}
}

func join(t testing.TB, r *Room, sale string, users ...string) map[string]string {
	t.Helper()
	tickets := map[string]string{}
	for _, u := range users {
		tk, err := r.Join(context.Background(), sale, u)
		if err != nil {
			t.Fatalf("join %s: %v", u, err)
		}
		tickets[u] = tk
	}
	return tickets
}

func users(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// admitAll admits until nothing more comes, moving the clock by step
// between calls (so the allowance refills).
func admitAll(t testing.TB, r *Room, c *testenv.Clock, sale string, step time.Duration) []string {
	t.Helper()
	var out []string
	for idle := 0; idle < 3; {
		got, err := r.Admit(context.Background(), sale, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			idle++
		} else {
			idle = 0
		}
		out = append(out, got...)
		c.Add(step)
	}
	return out
}

// entries counts the room's entries in each state, read from Redis.
func entryStates(t testing.TB, rdb redis.UniversalClient, r *Room, sale string) map[byte]int {
	t.Helper()
	all, err := rdb.HGetAll(context.Background(), newRoomKeys(r.opts.prefix, sale).ent).Result()
	if err != nil {
		t.Fatal(err)
	}
	m := map[byte]int{}
	for _, v := range all {
		c := v[0]
		if c >= '0' && c <= '9' {
			c = 'f'
		}
		m[c]++
	}
	return m
}
