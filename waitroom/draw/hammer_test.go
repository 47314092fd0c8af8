package draw

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/seckillkit/seckill/waitroom"
)

// TestConcurrentEnterAndReplace: goroutines enter concurrently (each user
// several times), then replace every winner concurrently (each twice);
// counted from Redis, every entry is there once, the winners never exceed
// the stock, each waitlisted user is promoted at most once, every caller
// is told the same replacement, and the promoted are the first of the
// waitlist in draw order.
func TestConcurrentEnterAndReplace(t *testing.T) {
	ctx := context.Background()
	d := newDrawer(t)
	us := users(200)
	if err := d.Open(ctx, "s", waitroom.Commit(seed)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g % 3; i < len(us); i++ {
				if err := d.Enter(ctx, "s", us[i]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n, _ := d.Close(ctx, "s"); n != int64(len(us)) {
		t.Fatalf("%d entries counted, want %d", n, len(us))
	}
	k := newDrawKeys(d.prefix, "s")
	if n, _ := d.rdb.HLen(ctx, k.ent).Result(); n != int64(len(us)) {
		t.Fatalf("%d entries in Redis, want %d", n, len(us))
	}
	order, err := d.Draw(ctx, Params{Sale: "s", Seed: seed, Stock: 20, Waitlist: 30})
	if err != nil {
		t.Fatal(err)
	}
	// Six callers replace every winner, each starting at another winner.
	answers := make([][]string, 6)
	for g := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[g] = make([]string, 20)
			for i := range 20 {
				j := (i + 3*g) % 20
				r, err := d.Replace(ctx, "s", order[j])
				if err != nil {
					t.Error(err)
					return
				}
				answers[g][j] = r
			}
		}()
	}
	wg.Wait()
	promoted := answers[0]
	for g := range answers {
		if !slices.Equal(answers[g], promoted) {
			t.Fatalf("callers were told different replacements: %v vs %v", answers[g], promoted)
		}
	}
	winners := 0
	all, _ := d.rdb.HGetAll(ctx, k.ent).Result()
	for _, v := range all {
		if v[0] == 'w' {
			winners++
		}
	}
	if winners != 20 {
		t.Fatalf("%d winners counted in Redis after 20 replacements, want 20", winners)
	}
	sorted := slices.Clone(promoted)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != 20 {
		t.Fatalf("a user was promoted twice: %v", promoted)
	}
	want := slices.Clone(order[20:40])
	got := slices.Clone(promoted)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("promoted %v, want the first 20 of the waitlist %v", promoted, order[20:40])
	}
}
