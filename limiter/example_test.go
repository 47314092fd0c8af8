package limiter_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/limiter/redislimit"
)

func ExampleNewTokenBucket() {
	b, err := limiter.NewTokenBucket(10, 3) // 10 events/s, bursts of 3
	if err != nil {
		panic(err)
	}
	for i := range 4 {
		fmt.Println(i, b.Allow())
	}
	// Output:
	// 0 true
	// 1 true
	// 2 true
	// 3 false
}

func ExampleChain() {
	m, err := miniredis.Run() // stands in for your Redis
	if err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	// A fixed date is safe here: the only clock is miniredis TIME (fake, set here).
	m.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))

	perUser, _ := redislimit.NewSlidingWindow(rdb, 1, time.Minute, redislimit.WithName("user"))
	global, _ := redislimit.NewBucket(rdb, 1000, 1000, redislimit.WithName("global"))

	ctx := context.Background()
	for range 2 {
		r, step, err := limiter.Chain(ctx, 1,
			limiter.Step{Limiter: perUser, Key: "user:7"},
			limiter.Step{Limiter: global, Key: "all"})
		if err != nil {
			panic(err)
		}
		fmt.Println("allowed:", r.Allowed, "refused by step:", step)
	}
	// The user's second request was refused by step 0 and never reached the
	// global bucket, which spent exactly one token.
	r, _ := global.AllowN(ctx, "all", 1)
	fmt.Println("global remaining:", r.Remaining)
	// Output:
	// allowed: true refused by step: -1
	// allowed: false refused by step: 0
	// global remaining: 998
}

func ExampleNewMiddleware() {
	perIP, _ := limiter.NewKeyed(1, 1) // 1 request/s per client IP, on this node
	mw, err := limiter.NewMiddleware([]limiter.Rule{
		{Name: "ip", Limiter: perIP, Key: limiter.RemoteAddrKey},
	})
	if err != nil {
		panic(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "queued")
	}))
	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/buy", nil)
		req.RemoteAddr = "203.0.113.9:51000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Printf("%d remaining=%s retry-after=%q\n", w.Code, w.Header().Get("RateLimit-Remaining"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 remaining=0 retry-after=""
	// 429 remaining=0 retry-after="1"
}

func ExampleNewDryRun() {
	strict, _ := limiter.NewKeyed(limiter.Every(time.Minute), 1)
	shadow, _ := limiter.NewDryRun(strict, func(_ context.Context, key string, _ limiter.Result, _ error) {
		fmt.Println("would refuse", key)
	})
	ctx := context.Background()
	for range 2 {
		r, _ := shadow.AllowN(ctx, "user:1", 1)
		fmt.Println("allowed:", r.Allowed)
	}
	fmt.Printf("%+v\n", shadow.Stats())
	// Output:
	// allowed: true
	// would refuse user:1
	// allowed: true
	// {Checked:2 WouldRefuse:1 Failures:0}
}
