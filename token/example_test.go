package token_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/token"
)

func ExamplePool() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	pool, err := token.NewPool(rdb, token.WithMultiplier(2), token.WithBindTTL(time.Minute))
	if err != nil {
		panic(err)
	}
	issued, _ := pool.Issue(ctx, "42", 1) // 1 unit of stock × 2 tokens
	again, _ := pool.Issue(ctx, "42", 1)  // idempotent
	fmt.Println("issued:", issued, again)

	alice, _ := pool.Take(ctx, "42", "alice")
	same, _ := pool.Take(ctx, "42", "alice")
	bob, _ := pool.Take(ctx, "42", "bob")
	carol, _ := pool.Take(ctx, "42", "carol")
	fmt.Println("alice:", alice.Status, "again:", same.Status, same.Token == alice.Token)
	fmt.Println("bob:", bob.Status, "carol:", carol.Status)

	fmt.Println("bob uses alice's token:", errors.Is(pool.Consume(ctx, token.ConsumeParams{Activity: "42", User: "bob", Token: alice.Token}), token.ErrWrongUser))
	fmt.Println("alice consumes:", pool.Consume(ctx, token.ConsumeParams{Activity: "42", User: "alice", Token: alice.Token}))
	err = pool.Consume(ctx, token.ConsumeParams{Activity: "42", User: "alice", Token: alice.Token})
	fmt.Println("alice again:", errors.Is(err, token.ErrUsed), "refused:", errors.Is(err, token.ErrRefused))
	// Output:
	// issued: 2 2
	// alice: granted again: held true
	// bob: granted carol: empty
	// bob uses alice's token: true
	// alice consumes: <nil>
	// alice again: true refused: true
}

// A purchase fails after the token was consumed (here the stock step
// reports an infrastructure error): Restore gives the user their token back
// so the retry is not refused as "already used".
func ExamplePool_Restore() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	pool, err := token.NewPool(rdb)
	if err != nil {
		panic(err)
	}
	if _, err := pool.Issue(ctx, "42", 1); err != nil {
		panic(err)
	}
	g, _ := pool.Take(ctx, "42", "alice")

	reserve := func(attempt int) error { // stands in for stock.Reserve
		if attempt == 1 {
			return errors.New("stock: redis: connection refused")
		}
		return nil
	}
	for attempt := 1; attempt <= 2; attempt++ {
		if err := pool.Consume(ctx, token.ConsumeParams{Activity: "42", User: "alice", Token: g.Token}); err != nil {
			fmt.Println("attempt", attempt, "refused:", err)
			continue
		}
		if err := reserve(attempt); err != nil {
			fmt.Println("attempt", attempt, "failed:", err)
			fmt.Println("restore:", pool.Restore(ctx, token.ConsumeParams{Activity: "42", User: "alice", Token: g.Token}))
			continue
		}
		fmt.Println("attempt", attempt, "reserved")
	}
	s, _ := pool.Stats(ctx, "42")
	fmt.Println("used:", s.Used)
	// Output:
	// attempt 1 failed: stock: redis: connection refused
	// restore: <nil>
	// attempt 2 reserved
	// used: 1
}

func ExampleSigner() {
	// A fixed date is safe here: the only clock is the fake one below (no Redis, no deadline).
	start := time.Date(2026, 11, 11, 20, 0, 0, 0, time.UTC)
	now := start.Add(-30 * time.Second)
	clock := exampleClock{&now}

	signer, err := token.NewSigner([]token.Key{{ID: "2026-11", Secret: []byte("a 32-byte secret from your vault")}},
		token.WithClock(clock), token.WithLeadTime(time.Minute), token.WithValidity(10*time.Minute))
	if err != nil {
		panic(err)
	}
	tok, err := signer.Sign(token.SignParams{Activity: "42", User: "alice", Start: start})
	if err != nil {
		panic(err)
	}
	url := "/seckill/42/" + tok + "/buy" // URL-safe: fits a path segment

	ctx := context.Background()
	_, err = signer.Verify(ctx, token.VerifyParams{Token: tok, Activity: "42", User: "alice"})
	fmt.Println("before start:", err)
	now = start
	c, err := signer.Verify(ctx, token.VerifyParams{Token: tok, Activity: "42", User: "alice"})
	fmt.Println("at start:", err, c.User, c.KeyID, len(tok), url[:12])
	_, err = signer.Verify(ctx, token.VerifyParams{Token: tok, Activity: "42", User: "bob"})
	fmt.Println("other user:", err)
	now = start.Add(time.Hour)
	_, err = signer.Verify(ctx, token.VerifyParams{Token: tok, Activity: "42", User: "alice"})
	fmt.Println("later:", err)
	// Output:
	// before start: token: not yet valid
	// at start: <nil> alice 2026-11 104 /seckill/42/
	// other user: token: wrong user
	// later: token: expired
}

func ExampleWithReplayGuard() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	start := time.Now().Add(30 * time.Second)
	signer, err := token.NewSigner([]token.Key{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}},
		token.WithReplayGuard(rdb), token.WithSkew(time.Minute),
		token.WithMaxNodeSkew(10*time.Second)) // our servers' clocks are at most 10 s apart
	if err != nil {
		panic(err)
	}
	tok, _ := signer.Sign(token.SignParams{Activity: "42", User: "alice", Start: start})
	_, err = signer.Verify(context.Background(), token.VerifyParams{Token: tok, Activity: "42", User: "alice"})
	fmt.Println("first:", err)
	_, err = signer.Verify(context.Background(), token.VerifyParams{Token: tok, Activity: "42", User: "alice"})
	fmt.Println("second:", err)
	// Output:
	// first: <nil>
	// second: token: replayed
}

// exampleClock reads the time from a variable the example moves.
type exampleClock struct{ now *time.Time }

func (c exampleClock) Now() time.Time { return *c.now }
