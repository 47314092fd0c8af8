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

// A cluster-wide budget of 10 tokens shared by three classes: suspect
// traffic may take only while more than 6 are left, normal while more than
// 3. Under a flood from every class, suspect is shed first.
func ExampleNewPriority() {
	m, err := miniredis.Run() // stands in for your Redis
	if err != nil {
		panic(err)
	}
	defer m.Close()
	// A fixed date is safe here: the only clock is miniredis TIME (fake, set here).
	m.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	global, _ := redislimit.NewBucket(rdb, 100, 10, redislimit.WithName("global"))
	prio, err := redislimit.NewPriority(global, "all",
		limiter.PriorityClass{Name: "verified"},
		limiter.PriorityClass{Name: "normal", Floor: 3},
		limiter.PriorityClass{Name: "suspect", Floor: 6})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	admitted := map[string]int{}
	for range 10 {
		for _, class := range []string{"suspect", "normal", "verified"} {
			r, err := prio.AllowN(ctx, class, 1)
			if err != nil {
				panic(err)
			}
			if r.Allowed {
				admitted[class]++
			}
		}
	}
	fmt.Println("suspect", admitted["suspect"], "normal", admitted["normal"], "verified", admitted["verified"])
	// Output:
	// suspect 2 normal 3 verified 5
}
