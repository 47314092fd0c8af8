package admin

import (
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

func TestDryRunsBoundedAndSingleUse(t *testing.T) {
	now := testenv.Epoch()
	d := newDryRuns(time.Minute)
	first, _ := d.issue("a1", ReconcileReport{}, now)
	for i := range maxDryRuns {
		d.issue("a1", ReconcileReport{}, now.Add(time.Duration(i+1)*time.Millisecond))
	}
	if n := len(d.m); n != maxDryRuns {
		t.Fatalf("%d dry runs kept, want %d", n, maxDryRuns)
	}
	if _, _, ok := d.take("a1", first, now); ok {
		t.Fatal("the oldest dry run survived past the bound")
	}
	id, _ := d.issue("a2", ReconcileReport{Drift: 3}, now)
	if _, _, ok := d.take("a1", id, now); ok {
		t.Fatal("a dry run of a2 applied to a1")
	}
	v, undo, ok := d.take("a2", id, now.Add(time.Minute-time.Nanosecond))
	if !ok || v.report.Drift != 3 {
		t.Fatal("a fresh dry run refused")
	}
	if _, _, ok := d.take("a2", id, now); ok {
		t.Fatal("a dry run applied twice")
	}
	undo()
	if _, _, ok := d.take("a2", id, now.Add(time.Minute)); ok {
		t.Fatal("an expired dry run applied")
	}
	// Expired entries are dropped at the next issue.
	d.issue("a3", ReconcileReport{}, now.Add(time.Hour))
	if n := len(d.m); n != 1 {
		t.Fatalf("%d dry runs after expiry, want 1", n)
	}
}
