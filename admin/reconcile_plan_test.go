package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/admin"
)

// An apply releases what the operator's dry run showed and nothing else: a
// reservation that became due after the dry run stays held until the next
// dry run shows it (before, the apply ran a fresh reconcile and released
// it unseen).
func TestReconcileApplyReleasesOnlyThePlan(t *testing.T) {
	f := newFixture(t, nil)
	f.load("a1", 10)
	for _, id := range []string{"r1", "r2"} {
		if err := f.mem.Reserve("a1", admin.Reservation{ID: id, User: "u-" + id, Qty: 1}); err != nil {
			t.Fatal(err)
		}
	}
	path := "/admin/activities/a1/reconcile"
	var dry admin.ReconcileAnswer
	f.mustOK(f.post(path, `{}`, ""), &dry)
	if strings.Join(dry.Report.Release, ",") != "r1,r2" {
		t.Fatalf("dry run %+v", dry)
	}
	// Between the dry run and the apply: r3 becomes due, r2 gets its order.
	if err := f.mem.Reserve("a1", admin.Reservation{ID: "r3", User: "u-r3", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.mem.Order("a1", "r2"); err != nil {
		t.Fatal(err)
	}
	var done admin.ReconcileAnswer
	f.mustOK(f.post(path, `{"apply":true,"dry_run_id":"`+dry.DryRunID+`"}`, ""), &done)
	if got := strings.Join(done.Report.Release, ","); got != "r1" || done.Released != 1 {
		t.Fatalf("apply released %q (%d), want only r1: %+v", got, done.Released, done)
	}
	var story admin.Story
	f.mustOK(f.get("/admin/activities/a1/reservations/r3"), &story)
	if story.Ledger == nil || story.Ledger.State != "held" {
		t.Fatalf("r3 after the apply: %+v", story.Ledger)
	}
}

// A plan digest that does not match the dry run's is refused (409), and
// the dry run stays usable.
func TestReconcileApplyRefusesAChangedPlan(t *testing.T) {
	f := newFixture(t, nil)
	f.load("a1", 10)
	if err := f.mem.Reserve("a1", admin.Reservation{ID: "r1", User: "u1", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	path := "/admin/activities/a1/reconcile"
	var dry admin.ReconcileAnswer
	f.mustOK(f.post(path, `{}`, ""), &dry)
	var m map[string]any
	f.mustOK(f.post(path, `{}`, ""), &m)
	plan, _ := m["plan"].(string)
	if len(plan) != 64 {
		t.Fatalf("dry run without a plan digest: %v", m)
	}
	bad := strings.Repeat("0", 64)
	f.mustError(f.post(path, `{"apply":true,"dry_run_id":"`+dry.DryRunID+`","plan":"`+bad+`"}`, ""), http.StatusConflict, "plan_changed")
	if n := f.mem.Calls("reconcile_apply"); n != 0 {
		t.Fatalf("applied %d times", n)
	}
	f.mustOK(f.post(path, `{"apply":true,"dry_run_id":"`+dry.DryRunID+`","plan":"`+plan+`"}`, ""), nil)
}
