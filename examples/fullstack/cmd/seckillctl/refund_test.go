package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/admin"
)

// seckillctl refund ACTIVITY ORDER --restock …: the refund reaches the
// backend once per key, its change is printed as a before/after table or
// JSON; a missing or unknown restock is a usage error that reaches
// nothing; a second refund is the server's conflict.
func TestCLIRefund(t *testing.T) {
	s := newServer(t)
	s.mustRun("load", "a1", "--stock", "10")
	for _, id := range []string{"r1", "r2"} {
		if err := s.mem.Reserve("a1", admin.Reservation{ID: id, User: "u-" + id, Qty: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.mem.Order("a1", id); err != nil {
			t.Fatal(err)
		}
		if err := s.mem.Pay("a1", id); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"refund", "a1", "o-r1"},
		{"refund", "a1", "o-r1", "--restock", "back"},
		{"refund", "a1", "--restock", "sale"},
	} {
		if code, out, errs := s.ctl(args...); code != 2 || out != "" || !strings.Contains(errs, "restock") && !strings.Contains(errs, "usage") {
			t.Fatalf("seckillctl %v: exit %d stdout %q stderr %q; want a usage error", args, code, out, errs)
		}
	}
	if n := s.mem.Calls("refund"); n != 0 {
		t.Fatalf("usage errors reached the backend %d times", n)
	}
	out := s.mustRun("refund", "a1", "o-r1", "--restock", "sale", "--idempotency-key", "cli-refund-1")
	if !strings.Contains(out, "PAID") || !strings.Contains(out, "REFUNDED") || !strings.Contains(out, "sale") {
		t.Fatalf("refund table:\n%s", out)
	}
	s.mustRun("refund", "a1", "o-r1", "--restock", "sale", "--idempotency-key", "cli-refund-1")
	if n := s.mem.Calls("refund"); n != 1 {
		t.Fatalf("a refund with one key acted %d times", n)
	}
	var ch admin.OrderChange
	if err := json.Unmarshal([]byte(s.mustRun("refund", "a1", "o-r2", "--restock", "none", "-o", "json")), &ch); err != nil {
		t.Fatal(err)
	}
	if ch.Before.Status != "PAID" || ch.After.Status != "REFUNDED" || ch.After.Restock != "none" {
		t.Fatalf("refund without restock: %+v", ch)
	}
	code, out, errs := s.ctl("refund", "a1", "o-r2", "--restock", "none")
	if code != 1 || out != "" || errs != "seckillctl: conflict: the action conflicts with the current state (HTTP 409)\n" {
		t.Fatalf("second refund: exit %d stdout %q stderr %q", code, out, errs)
	}
}
