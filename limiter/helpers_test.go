package limiter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
)

// fakeClock is a manual clock whose After channels fire when it is
// advanced past their deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

// newFakeClock returns a fakeClock standing at the test epoch: for logic
// that never meets real time.
func newFakeClock() *fakeClock { return &fakeClock{now: testenv.Epoch()} }

// newWallFakeClock returns a fakeClock standing at the wall clock's now: for
// tests whose fake time meets real time, such as a real context deadline.
func newWallFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	var keep []fakeWaiter
	var fire []fakeWaiter
	for _, w := range c.waiters {
		if !w.at.After(now) {
			fire = append(fire, w)
		} else {
			keep = append(keep, w)
		}
	}
	c.waiters = keep
	c.mu.Unlock()
	for _, w := range fire {
		w.ch <- now
	}
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

func (c *fakeClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// t0 is the instant miniredis TIME is frozen at (SetTime). Every clock it
// meets is fake: miniredis TTLs only move with FastForward.
var t0 = testenv.Epoch()

// fastFailClient is a miniredis client that gives up dialing at once, so
// tests against a closed server stay fast.
func fastFailClient(t *testing.T) (*redis.Client, *miniredis.Miniredis) {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c, m
}

// limiterFunc adapts a function to limiter.Limiter (a stub for tests).
type limiterFunc func(ctx context.Context, key string, n int) (limiter.Result, error)

func (f limiterFunc) AllowN(ctx context.Context, key string, n int) (limiter.Result, error) {
	return f(ctx, key, n)
}
