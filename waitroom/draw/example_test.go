package draw_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/waitroom"
	"github.com/seckillkit/seckill/waitroom/draw"
)

func Example() {
	ctx := context.Background()
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	d, _ := draw.New(rdb)
	seed := []byte("kept secret until the draw......")
	_ = d.Open(ctx, "drop-7", waitroom.Commit(seed)) // publish the commitment
	entries := []string{"alice", "bob", "carol", "dave", "erin"}
	for _, u := range entries {
		_ = d.Enter(ctx, "drop-7", u)
	}
	_, _ = d.Close(ctx, "drop-7")
	order, _ := d.Draw(ctx, draw.Params{Sale: "drop-7", Seed: seed, Stock: 2, Waitlist: 2})

	winners := 0
	for _, u := range entries {
		if o, _ := d.Outcome(ctx, "drop-7", u); o.Status == draw.Winner {
			winners++
		}
	}
	fmt.Println("winners:", winners)
	next, _ := d.Replace(ctx, "drop-7", order[0]) // order[0] did not pay
	fmt.Println("replaced by the first of the waitlist:", next == order[2])
	err := draw.Verify(draw.VerifyParams{Seed: seed, Commitment: waitroom.Commit(seed), Entries: entries, Stock: 2, Winners: order[:2]})
	fmt.Println("verified:", err == nil)
	// Output:
	// winners: 2
	// replaced by the first of the waitlist: true
	// verified: true
}
