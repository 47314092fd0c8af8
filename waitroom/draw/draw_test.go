package draw

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/waitroom"
)

var seed = []byte("the draw's seed, 32 bytes long!!")

func newDrawer(t *testing.T) *Drawer {
	t.Helper()
	d, err := New(testenv.Redis(t), WithKeyPrefix(testenv.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func users(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("u%03d", i)
	}
	return out
}

// enterAll opens sale and enters every user twice (the second is a no-op).
func enterAll(t *testing.T, d *Drawer, sale string, us []string) {
	t.Helper()
	ctx := context.Background()
	if err := d.Open(ctx, sale, waitroom.Commit(seed)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, u := range us {
			if err := d.Enter(ctx, sale, u); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestDrawWinnersAreStockExactlyAndReproducible(t *testing.T) {
	ctx := context.Background()
	d := newDrawer(t)
	us := users(40)
	for _, sale := range []string{"a", "b"} {
		enterAll(t, d, sale, us)
		if _, err := d.Draw(ctx, Params{Sale: sale, Seed: seed, Stock: 10, Waitlist: 5}); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("draw before close: %v", err)
		}
		if n, err := d.Close(ctx, sale); err != nil || n != 40 {
			t.Fatalf("close: %d entries, %v; want 40", n, err)
		}
	}
	if err := d.Enter(ctx, "a", "newcomer"); !errors.Is(err, ErrWindowClosed) || !errors.Is(err, ErrRefused) {
		t.Fatalf("enter after close: %v", err)
	}
	if err := d.Enter(ctx, "a", "u001"); err != nil {
		t.Fatalf("re-enter after close: %v", err)
	}
	if _, err := d.Draw(ctx, Params{Sale: "a", Seed: []byte("not the seed at all, not at all"), Stock: 10, Waitlist: 5}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("draw with another seed: %v", err)
	}
	oa, err := d.Draw(ctx, Params{Sale: "a", Seed: seed, Stock: 10, Waitlist: 5})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := d.Draw(ctx, Params{Sale: "b", Seed: seed, Stock: 10, Waitlist: 5})
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.Draw(ctx, Params{Sale: "a", Seed: seed, Stock: 10, Waitlist: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(oa, ob) || !slices.Equal(oa, again) || !slices.Equal(oa, waitroom.Shuffle(seed, us)) {
		t.Fatal("the same seed and entries gave different orders")
	}
	if _, err := d.Draw(ctx, Params{Sale: "a", Seed: seed, Stock: 11, Waitlist: 5}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("draw again with another stock: %v", err)
	}
	// Counted from Redis: exactly Stock winners.
	winners := 0
	for _, u := range us {
		o, err := d.Outcome(ctx, "a", u)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status == Winner {
			winners++
		}
	}
	if winners != 10 {
		t.Fatalf("%d winners, want the stock, 10", winners)
	}
	if err := Verify(VerifyParams{Seed: seed, Commitment: waitroom.Commit(seed), Entries: us, Stock: 10, Winners: oa[:10]}); err != nil {
		t.Fatal(err)
	}
	forged := slices.Clone(oa[:10])
	forged[3] = oa[20]
	if err := Verify(VerifyParams{Seed: seed, Commitment: waitroom.Commit(seed), Entries: us, Stock: 10, Winners: forged}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a forged winner list verified: %v", err)
	}
}

func TestReplaceInDrawOrder(t *testing.T) {
	ctx := context.Background()
	d := newDrawer(t)
	us := users(12)
	enterAll(t, d, "s", us)
	d.Close(ctx, "s")
	order, err := d.Draw(ctx, Params{Sale: "s", Seed: seed, Stock: 4, Waitlist: 3})
	if err != nil {
		t.Fatal(err)
	}
	check := func(u string, want Status, pos int64) {
		t.Helper()
		o, err := d.Outcome(ctx, "s", u)
		if err != nil || o.Status != want || o.Position != pos {
			t.Fatalf("%s: %+v %v, want %s at %d", u, o, err, want, pos)
		}
	}
	check(order[0], Winner, 0)
	check(order[4], Waitlisted, 1)
	check(order[6], Waitlisted, 3)
	check(order[7], Lost, 0)
	check("nobody", NotEntered, 0)
	if _, err := d.Replace(ctx, "s", order[5]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("replace a waitlisted user: %v", err)
	}
	var got []string
	for _, w := range []string{order[2], order[0], order[4], order[1]} { // order[4] is promoted first
		r, err := d.Replace(ctx, "s", w)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := d.Replace(ctx, "s", w)
		if again != r {
			t.Fatalf("replace %s twice: %q then %q", w, r, again)
		}
		got = append(got, r)
	}
	if want := []string{order[4], order[5], order[6], ""}; !slices.Equal(got, want) {
		t.Fatalf("replacements %q, want %q (draw order, then exhausted)", got, want)
	}
	check(order[2], Lost, 0)
	check(order[5], Winner, 0)
	winners := 0
	for _, u := range us {
		if o, _ := d.Outcome(ctx, "s", u); o.Status == Winner {
			winners++
		}
	}
	if winners != 3 { // 4 winners, 4 replaced, 3 promoted, waitlist exhausted
		t.Fatalf("%d winners, want 3", winners)
	}
}

func TestDrawCrashResumes(t *testing.T) {
	ctx := context.Background()
	d := newDrawer(t)
	us := users(30)
	enterAll(t, d, "s", us)
	d.Close(ctx, "s")
	crash := errors.New("killed")
	d.batch = 4
	d.afterBatch = func(w int) error {
		if w >= 12 {
			return crash
		}
		return nil
	}
	if _, err := d.Draw(ctx, Params{Sale: "s", Seed: seed, Stock: 5}); !errors.Is(err, crash) {
		t.Fatalf("draw: %v, want the crash", err)
	}
	if _, err := d.Replace(ctx, "s", us[0]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("replace during a half-written draw: %v", err)
	}
	d.afterBatch = nil
	d.batch = 7
	order, err := d.Draw(ctx, Params{Sale: "s", Seed: seed, Stock: 5})
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := d.rdb.LRange(ctx, newDrawKeys(d.prefix, "s").ord, 0, -1).Result()
	if want := waitroom.Shuffle(seed, us); !slices.Equal(order, want) || !slices.Equal(stored, want) {
		t.Fatalf("resumed draw\n %v\nstored %v\nwant %v", order, stored, want)
	}
}
