package waitroom

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

// TestRateHeldAcrossInstances: 2 and 4 Room instances on one Redis call
// Admit every 10 ms of simulated time, each a few ms after the other; the
// users admitted in each simulated second stay within ±5 % of the rate.
func TestRateHeldAcrossInstances(t *testing.T) {
	const (
		rate    = 50
		seconds = 8
		step    = 10 * time.Millisecond
	)
	for _, instances := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d instances", instances), func(t *testing.T) {
			ctx := context.Background()
			rdb := testenv.Redis(t)
			c := testenv.NewClock(t0)
			rooms := make([]*Room, instances)
			for i := range rooms {
				rooms[i] = newRoom(t, rdb, c)
			}
			configure(t, rooms[0], "s1", rate, 0)
			join(t, rooms[1], "s1", users("u", rate*seconds*3/2)...)
			if err := rooms[0].Start(ctx, "s1", testSeed); err != nil {
				t.Fatal(err)
			}
			perSecond := make([]int, seconds)
			for tick := time.Duration(0); tick < seconds*time.Second; tick += step {
				for i, r := range rooms {
					now := t0.Add(tick + time.Duration(i)*step/time.Duration(instances))
					c.Set(now)
					got, err := r.Admit(ctx, "s1", 1000)
					if err != nil {
						t.Fatal(err)
					}
					perSecond[now.Sub(t0)/time.Second] += len(got)
				}
			}
			t.Logf("admitted per simulated second: %v (rate %d)", perSecond, rate)
			for s, n := range perSecond {
				if n < rate*95/100 || n > rate*105/100 {
					t.Errorf("second %d: %d admitted, want %d ± 5 %%", s, n, rate)
				}
			}
			st, _ := rooms[0].Stats(ctx, "s1")
			if int(st.Admitted) != sum(perSecond) {
				t.Fatalf("Redis counts %d admitted, the callers %d", st.Admitted, sum(perSecond))
			}
		})
	}
}

func sum(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}

// TestNoUserAdmittedTwice: goroutines of several instances admit, poll and
// finish concurrently; counted from Redis, every user is admitted at most
// once, and the counts agree.
func TestNoUserAdmittedTwice(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	c := testenv.NewClock(t0)
	rooms := []*Room{newRoom(t, rdb, c), newRoom(t, rdb, c), newRoom(t, rdb, c)}
	configure(t, rooms[0], "s1", 1e6, 0)
	all := users("u", 500)
	tickets := join(t, rooms[0], "s1", all...)
	if err := rooms[0].Start(ctx, "s1", testSeed); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var admitted []string
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rooms[g%len(rooms)]
			for i := 0; i < 40; i++ {
				c.Add(time.Millisecond)
				got, err := r.Admit(ctx, "s1", 7)
				if err != nil {
					t.Error(err)
					return
				}
				for _, u := range got {
					if _, err := r.Poll(ctx, Credential{Sale: "s1", User: u, Token: tickets[u]}); err != nil {
						t.Error(err)
					}
				}
				mu.Lock()
				admitted = append(admitted, got...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(admitted)
	if d := len(admitted) - len(slices.Compact(slices.Clone(admitted))); d != 0 {
		t.Fatalf("%d admissions were repeats", d)
	}
	k := newRoomKeys(rooms[0].opts.prefix, "s1")
	zc, _ := rdb.ZCard(ctx, k.adm).Result()
	states := entryStates(t, rdb, rooms[0], "s1")
	st, _ := rooms[0].Stats(ctx, "s1")
	if int(zc) != len(admitted) || states['a'] != len(admitted) || int(st.Admitted) != len(admitted) {
		t.Fatalf("callers saw %d admitted; Redis: %d in adm, %d entries admitted, counter %d", len(admitted), zc, states['a'], st.Admitted)
	}
	if len(admitted)+int(st.Waiting) != len(all) {
		t.Fatalf("%d admitted + %d waiting != %d joined: a place was lost", len(admitted), st.Waiting, len(all))
	}
}

// TestCrashMidShuffleResumes: a Start that dies after two batches is
// resumed by another instance (with another batch size) to the same order
// a clean Start gives; concurrent Starts write each place once.
func TestCrashMidShuffleResumes(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	c := testenv.NewClock(t0.Add(-time.Minute))
	r1 := newRoom(t, rdb, c)
	pre := users("u", 25)
	for _, sale := range []string{"crash", "clean", "race"} {
		configure(t, r1, sale, 1000, 0)
		join(t, r1, sale, pre...)
	}
	c.Set(t0)
	join(t, r1, "crash", "late")
	crash := errors.New("killed")
	r1.batch = 4
	r1.afterBatch = func(w int) error {
		if w >= 8 {
			return crash
		}
		return nil
	}
	if err := r1.Start(ctx, "crash", testSeed); !errors.Is(err, crash) {
		t.Fatalf("start: %v, want the crash", err)
	}
	if got, _ := r1.Admit(ctx, "crash", 100); len(got) != 0 {
		t.Fatalf("admitted %v from a half-written pre-queue", got)
	}
	r2 := newRoom(t, rdb, c)
	r2.batch = 7
	if err := r2.Start(ctx, "crash", testSeed); err != nil {
		t.Fatal(err)
	}
	if err := r2.Start(ctx, "clean", testSeed); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newRoom(t, rdb, c)
			r.batch = 3
			if err := r.Start(ctx, "race", testSeed); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	want := Shuffle(testSeed, pre)
	for _, sale := range []string{"crash", "clean", "race"} {
		got, _ := rdb.LRange(ctx, newRoomKeys(r1.opts.prefix, sale).pq, 0, -1).Result()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: pre-queue in Redis\n %v\nwant %v", sale, got, want)
		}
	}
	r1.afterBatch = nil
	r1.Admit(ctx, "crash", 100)
	c.Add(time.Second)
	got, _ := r1.Admit(ctx, "crash", 100)
	if !slices.Equal(got, append(want, "late")) {
		t.Fatalf("admitted %v", got)
	}
}
