package waitroom_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/waitroom"
)

// fixedClock is a clock the example moves by hand.
type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

func Example() {
	ctx := context.Background()
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := &fixedClock{start.Add(-time.Minute)} // pages poll; a silent entry is abandoned after 2 minutes
	room, err := waitroom.New(rdb, []waitroom.Key{{ID: "k1", Secret: []byte("32 random bytes in real life....")}}, waitroom.WithClock(clock))
	if err != nil {
		panic(err)
	}

	// Before the sale: commit to a seed, publish the commitment.
	seed := []byte("kept secret until the start.....")
	commitment := waitroom.Commit(seed)
	if err := room.Configure(ctx, "drop-7", waitroom.Config{Start: start, Commitment: commitment, Rate: 2}); err != nil {
		panic(err)
	}

	// Joins before the start form the pre-queue.
	tickets := map[string]string{}
	for _, u := range []string{"alice", "bob", "carol"} {
		tickets[u], _ = room.Join(ctx, "drop-7", u)
	}

	// At the start: reveal the seed; the pre-queue is shuffled once.
	clock.t = start
	if err := room.Start(ctx, "drop-7", seed); err != nil {
		panic(err)
	}
	room.Admit(ctx, "drop-7", 100) // every instance calls Admit on a ticker
	clock.t = start.Add(time.Second)
	admitted, _ := room.Admit(ctx, "drop-7", 100)
	fmt.Println("admitted in the first second:", len(admitted))

	// The page polls with its ticket; an admitted user gets a pass.
	place, _ := room.Poll(ctx, waitroom.Credential{Sale: "drop-7", User: admitted[0], Token: tickets[admitted[0]]})
	_, err = room.Verify(ctx, waitroom.Credential{Sale: "drop-7", User: admitted[0], Token: place.Pass})
	fmt.Println(place.State, "pass verifies:", err == nil)

	// Anyone can check the order from the published seed and entries.
	order := waitroom.Shuffle(seed, []string{"alice", "bob", "carol"})
	fmt.Println("verified:", waitroom.VerifyOrder(seed, commitment, []string{"carol", "alice", "bob"}, order) == nil)
	// Output:
	// admitted in the first second: 2
	// admitted pass verifies: true
	// verified: true
}
