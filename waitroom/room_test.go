package waitroom

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

func TestJoinIsIdempotent(t *testing.T) {
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			c := testenv.NewClock(t0.Add(-time.Minute))
			r := newRoom(t, rdb, c)
			configure(t, r, "s1", 100, 0)
			for range 3 {
				join(t, r, "s1", "a", "b")
			}
			c.Set(t0.Add(time.Second))
			join(t, r, "s1", "c")
			join(t, r, "s1", "c", "a")
			st, err := r.Stats(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			if st.PreQueue != 2 || st.Waiting != 3 {
				t.Fatalf("stats %+v, want pre-queue 2, waiting 3", st)
			}
			if n, _ := rdb.HLen(ctx, newRoomKeys(r.opts.prefix, "s1").ent).Result(); n != 3 {
				t.Fatalf("%d entries in Redis, want 3", n)
			}
			if n, _ := rdb.LLen(ctx, newRoomKeys(r.opts.prefix, "s1").q).Result(); n != 1 {
				t.Fatalf("%d FIFO entries in Redis, want 1 (a rejoin after the start keeps the pre-queue place)", n)
			}
		})
	}
}

func TestPreQueueShuffledThenFIFO(t *testing.T) {
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			c := testenv.NewClock(t0.Add(-time.Minute))
			r := newRoom(t, rdb, c)
			configure(t, r, "s1", 1000, 0)
			pre := users("u", 20)
			join(t, r, "s1", pre...)
			c.Set(t0)
			post := []string{"z9", "a1", "m5"}
			join(t, r, "s1", post...)
			if got, _ := r.Admit(ctx, "s1", 1000); len(got) != 0 {
				t.Fatalf("admitted %v before the pre-queue was placed", got)
			}
			if err := r.Start(ctx, "s1", []byte("not the seed, not the seed......")); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("start with another seed: %v, want ErrInvalidArgument", err)
			}
			if err := r.Start(ctx, "s1", testSeed); err != nil {
				t.Fatal(err)
			}
			got := admitAll(t, r, c, "s1", 100*time.Millisecond)
			want := append(Shuffle(testSeed, pre), post...)
			if !slices.Equal(got, want) {
				t.Fatalf("admission order\n got %v\nwant %v", got, want)
			}
			if err := VerifyOrder(testSeed, Commit(testSeed), pre, got[:len(pre)]); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestStartBeforeTheStartRefused(t *testing.T) {
	rdb, _ := testenv.Miniredis(t)
	c := testenv.NewClock(t0.Add(-time.Second))
	r := newRoom(t, rdb, c)
	configure(t, r, "s1", 10, 0)
	if err := r.Start(context.Background(), "s1", testSeed); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("start before the start: %v, want ErrInvalidArgument", err)
	}
	// A lagging instance cannot add to the pre-queue once one saw the start.
	c.Set(t0)
	join(t, r, "s1", "late")
	c.Set(t0.Add(-time.Second))
	join(t, r, "s1", "lagging")
	if st, _ := r.Stats(context.Background(), "s1"); st.PreQueue != 0 {
		t.Fatalf("pre-queue %d after the start was seen, want 0", st.PreQueue)
	}
}

func TestPollPositionETAAndPass(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	c := testenv.NewClock(t0)
	r := newRoom(t, rdb, c, WithPassTTL(time.Minute))
	configure(t, r, "s1", 2, 0)
	tickets := join(t, r, "s1", users("u", 5)...)
	if err := r.Start(ctx, "s1", testSeed); err != nil {
		t.Fatal(err)
	}
	p, err := r.Poll(ctx, Credential{Sale: "s1", User: "u4", Token: tickets["u4"]})
	if err != nil {
		t.Fatal(err)
	}
	if p.State != Waiting || p.Position != 5 || p.ETA != 2500*time.Millisecond {
		t.Fatalf("place %+v, want waiting at 5, ETA 2.5s", p)
	}
	r.Admit(ctx, "s1", 10) // starts the allowance
	c.Add(time.Second)
	got, err := r.Admit(ctx, "s1", 10)
	if err != nil || !slices.Equal(got, []string{"u0", "u1"}) {
		t.Fatalf("admitted %v, %v; want u0 u1", got, err)
	}
	p, _ = r.Poll(ctx, Credential{Sale: "s1", User: "u4", Token: tickets["u4"]})
	if p.Position != 3 {
		t.Fatalf("position %d after two admissions, want 3", p.Position)
	}
	p, err = r.Poll(ctx, Credential{Sale: "s1", User: "u1", Token: tickets["u1"]})
	if err != nil || p.State != Admitted || p.Pass == "" || !p.Expiry.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("admitted place %+v, %v", p, err)
	}
	if _, err := r.Verify(ctx, Credential{Sale: "s1", User: "u1", Token: p.Pass}); err != nil {
		t.Fatalf("verify the pass: %v", err)
	}
}

func TestCapAndDone(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	c := testenv.NewClock(t0)
	r := newRoom(t, rdb, c, WithPassTTL(time.Minute))
	configure(t, r, "s1", 0, 2)
	join(t, r, "s1", users("u", 5)...)
	if err := r.Start(ctx, "s1", testSeed); err != nil {
		t.Fatal(err)
	}
	got, _ := r.Admit(ctx, "s1", 10)
	if len(got) != 2 {
		t.Fatalf("admitted %v under a cap of 2", got)
	}
	if more, _ := r.Admit(ctx, "s1", 10); len(more) != 0 {
		t.Fatalf("admitted %v more with the cap full", more)
	}
	if err := r.Done(ctx, "s1", got[0]); err != nil {
		t.Fatal(err)
	}
	if err := r.Done(ctx, "s1", got[0]); err != nil {
		t.Fatalf("second Done: %v", err)
	}
	if err := r.Done(ctx, "s1", "nobody"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("done for a user never admitted: %v", err)
	}
	if more, _ := r.Admit(ctx, "s1", 10); len(more) != 1 {
		t.Fatalf("admitted %v after one Done, want 1", more)
	}
	// A lapsed admission frees its slot too.
	c.Add(time.Minute)
	if more, _ := r.Admit(ctx, "s1", 10); len(more) != 2 {
		t.Fatalf("admitted %v after the admissions lapsed, want 2", more)
	}
	st, _ := r.Stats(ctx, "s1")
	if st.Admitted != 5 || st.Active != 2 || st.Waiting != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAbandonedSkippedWithoutUsingTheRate(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	c := testenv.NewClock(t0)
	r := newRoom(t, rdb, c, WithAbandonAfter(30*time.Second))
	configure(t, r, "s1", 1, 0)
	tickets := join(t, r, "s1", "a", "b", "c", "d")
	if err := r.Start(ctx, "s1", testSeed); err != nil {
		t.Fatal(err)
	}
	r.Admit(ctx, "s1", 10) // starts the allowance
	c.Add(40 * time.Second)
	// Only "d" polled in time; the allowance banks one second (1 user).
	if _, err := r.Poll(ctx, Credential{Sale: "s1", User: "d", Token: tickets["d"]}); err != nil {
		t.Fatal(err)
	}
	got, _ := r.Admit(ctx, "s1", 10)
	if !slices.Equal(got, []string{"d"}) {
		t.Fatalf("admitted %v, want [d] (a, b, c abandoned, skipped free)", got)
	}
	st, _ := r.Stats(ctx, "s1")
	if st.Abandoned != 3 || st.Admitted != 1 {
		t.Fatalf("stats %+v, want 3 abandoned, 1 admitted", st)
	}
	p, _ := r.Poll(ctx, Credential{Sale: "s1", User: "a", Token: tickets["a"]})
	if p.State != Left {
		t.Fatalf("abandoned entry polls %+v, want left", p)
	}
}

func TestPauseResume(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	c := testenv.NewClock(t0)
	r := newRoom(t, rdb, c)
	configure(t, r, "s1", 10, 0)
	join(t, r, "s1", users("u", 50)...)
	if err := r.Start(ctx, "s1", testSeed); err != nil {
		t.Fatal(err)
	}
	r.Admit(ctx, "s1", 100)
	if err := r.SetPaused(ctx, "s1", true); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	if got, _ := r.Admit(ctx, "s1", 100); len(got) != 0 {
		t.Fatalf("admitted %v while paused", got)
	}
	c.Add(10 * time.Second)
	if err := r.SetPaused(ctx, "s1", false); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Admit(ctx, "s1", 100); len(got) != 0 {
		t.Fatalf("admitted %v right after resume: the pause banked allowance", got)
	}
	c.Add(500 * time.Millisecond)
	if got, _ := r.Admit(ctx, "s1", 100); len(got) != 5 {
		t.Fatalf("admitted %d half a second after resume at 10/s, want 5", len(got))
	}
	if st, _ := r.Stats(ctx, "s1"); st.Paused || st.Admitted != 5 {
		t.Fatalf("stats %+v", st)
	}
}

func TestInvalidInput(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	if _, err := New(nil, testKeys); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil client: %v", err)
	}
	if _, err := New(rdb, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("no key: %v", err)
	}
	if _, err := New(rdb, testKeys, WithClock(nil)); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil clock: %v", err)
	}
	r := newRoom(t, rdb, testenv.NewClock(t0))
	if _, err := r.Join(ctx, "s{1}", "u"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad sale: %v", err)
	}
	if _, err := r.Join(ctx, "s1", "u"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unconfigured sale: %v", err)
	}
	if err := r.Configure(ctx, "s1", Config{Start: t0, Commitment: Commit(testSeed)}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no rate and no cap: %v", err)
	}
	configure(t, r, "s1", 5, 0)
	if err := r.Configure(ctx, "s1", Config{Start: t0.Add(time.Hour), Commitment: Commit(testSeed), Rate: 5}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("start moved after the start: %v", err)
	}
	if err := r.Configure(ctx, "s1", Config{Start: t0, Commitment: Commit(testSeed), Rate: 50}); err != nil {
		t.Fatalf("rate changed after the start: %v", err)
	}
	if _, err := r.Admit(ctx, "s1", 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("admit 0: %v", err)
	}
}

// TestDefaultClockIsRedisTime: without WithClock the scripts read Redis
// TIME (here miniredis' settable time), not the process clock.
func TestDefaultClockIsRedisTime(t *testing.T) {
	ctx := context.Background()
	rdb, mr := testenv.Miniredis(t)
	r, err := New(rdb, testKeys, WithKeyPrefix(testenv.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	configure(t, r, "s1", 10, 0)
	mr.SetTime(t0.Add(-time.Minute))
	if _, err := r.Join(ctx, "s1", "early"); err != nil {
		t.Fatal(err)
	}
	mr.SetTime(t0.Add(time.Second))
	if _, err := r.Join(ctx, "s1", "late"); err != nil {
		t.Fatal(err)
	}
	st, _ := r.Stats(ctx, "s1")
	if st.PreQueue != 1 || st.Waiting != 2 {
		t.Fatalf("stats %+v: want one pre-queue entry by Redis TIME", st)
	}
}
