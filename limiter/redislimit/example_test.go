package redislimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/limiter/redislimit"
)

func ExampleNewSlidingWindow() {
	m, err := miniredis.Run() // stands in for your Redis
	if err != nil {
		panic(err)
	}
	defer m.Close()
	// A fixed date is safe here: the only clock is miniredis TIME (fake, set here).
	m.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	// 2 purchases attempts per user per 10 seconds, shared by all servers.
	perUser, err := redislimit.NewSlidingWindow(rdb, 2, 10*time.Second, redislimit.WithName("buy"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		r, err := perUser.AllowN(ctx, "user:42", 1)
		if err != nil {
			panic(err) // Redis down and FailClosed (the default)
		}
		fmt.Printf("allowed=%v remaining=%d retry=%v\n", r.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// allowed=true remaining=1 retry=0s
	// allowed=true remaining=0 retry=0s
	// allowed=false remaining=0 retry=10s
}

// One failure policy per call: a limiter with FallbackLocal decides Redis
// failures itself (nil error, Result.Degraded), so it is called directly,
// never through a circuit breaker. Only a FailClosed limiter, whose Redis
// failures are errors, belongs inside a breaker.
func Example_failurePolicy() {
	m, err := miniredis.Run() // stands in for your Redis
	if err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	perUser, err := redislimit.NewSlidingWindow(rdb, 2, time.Hour, redislimit.WithName("buy"),
		redislimit.WithFailurePolicy(limiter.FallbackLocal)) // per node: 2 an hour per user while Redis is down
	if err != nil {
		panic(err)
	}
	m.SetError("LOADING Redis is loading the dataset in memory") // Redis fails every call
	for range 3 {
		r, err := perUser.AllowN(context.Background(), "user:42", 1)
		if err != nil {
			panic(err) // never under FallbackLocal: the fallback decided
		}
		fmt.Printf("allowed=%v fallback=%v\n", r.Allowed, r.Degraded)
	}
	// Output:
	// allowed=true fallback=true
	// allowed=true fallback=true
	// allowed=false fallback=true
}
