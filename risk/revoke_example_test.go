package risk_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/risk"
)

// A long-lived session cache kept fresh by revocations: every instance runs
// its cache's Run as a background worker, and SessionStore.Revoke on any
// instance makes every running cache forget the token at once.
func ExampleNewAuthCache_revocations() {
	mr := miniredis.NewMiniRedis()
	_ = mr.Start()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	sessions, _ := risk.NewSessionStore(rdb, risk.SessionConfig{})
	cache, err := risk.NewAuthCache(sessions, risk.AuthCacheConfig{TTL: 30 * time.Minute, Max: 100_000, Revocations: sessions})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cache.Run(runCtx) }() // start: a background worker

	tok, _ := sessions.Create(ctx, "alice", 0) // at login
	user, err := cache.Authenticate(ctx, tok)  // what risk.NewAuth(cache) calls per request
	fmt.Println(user, err)

	_ = sessions.Revoke(ctx, tok) // logout, on this or any other instance
	_, err = sessions.Authenticate(ctx, tok)
	fmt.Println(errors.Is(err, risk.ErrInvalidToken))

	stop() // stop: Run returns nil when its ctx ends
	fmt.Println(<-done)
	_ = cache.Close()
	fmt.Println(errors.Is(cache.Run(ctx), risk.ErrClosed))
	// Output:
	// alice <nil>
	// true
	// <nil>
	// true
}
