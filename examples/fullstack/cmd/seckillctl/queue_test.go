package main

import (
	"encoding/hex"
	"slices"
	"testing"

	"github.com/seckillkit/seckill/waitroom"
)

// TestQueueVerify: verify recomputes the pre-queue order from the seed and
// the entries; a tampered order, a user admitted twice, or an admission out
// of the verified order fails; a draw's winners are checked likewise.
func TestQueueVerify(t *testing.T) {
	seed := []byte("0123456789abcdef0123456789abcdef")
	entries := []string{"1", "2", "3", "4", "5", "6"}
	order := waitroom.Shuffle(seed, entries)
	ok := published{Mode: "queue", Commitment: waitroom.Commit(seed), Seed: hex.EncodeToString(seed), Entries: entries, Order: order,
		Batches: [][]string{order[:2], append(slices.Clone(order[2:]), "9")}}
	if _, err := ok.verify(); err != nil {
		t.Fatalf("a true record: %v", err)
	}
	bad := func(name string, edit func(p *published)) {
		p := ok
		p.Order, p.Batches = slices.Clone(ok.Order), [][]string{slices.Clone(ok.Batches[0]), slices.Clone(ok.Batches[1])}
		edit(&p)
		if _, err := p.verify(); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
	bad("swapped order", func(p *published) { p.Order[0], p.Order[1] = p.Order[1], p.Order[0] })
	bad("admitted twice", func(p *published) { p.Batches[1] = append(p.Batches[1], p.Order[0]) })
	bad("out of order", func(p *published) { p.Batches[0][0], p.Batches[0][1] = p.Batches[0][1], p.Batches[0][0] })
	bad("later before pre-queue", func(p *published) {
		p.Batches[0] = append([]string{"9"}, p.Batches[0]...)
		p.Batches[1] = p.Batches[1][:4]
	})
	bad("other seed", func(p *published) { p.Seed = hex.EncodeToString([]byte("fedcba9876543210fedcba9876543210")) })
	bad("not revealed", func(p *published) { p.Seed = "" })

	d := published{Mode: "draw", Commitment: waitroom.Commit(seed), Seed: hex.EncodeToString(seed), Entries: entries, Order: order, Stock: 2}
	if _, err := d.verify(); err != nil {
		t.Fatalf("a true draw: %v", err)
	}
	d.Order = slices.Clone(order)
	d.Order[0], d.Order[2] = d.Order[2], d.Order[0]
	if _, err := d.verify(); err == nil {
		t.Error("a draw with another winner verified")
	}
}
