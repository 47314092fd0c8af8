package admin_test

import (
	"net/http"
	"testing"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/admin"
)

// A refund is audited like every mutation (the order before and after, its
// restock choice), replayed by its Idempotency-Key without acting again;
// a second refund, or a refund of an unpaid order, is a conflict; the
// restock choice is required.
func TestRefundAuditedOnce(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.load("a1", 10)
		for _, id := range []string{"r1", "r2"} {
			if err := f.mem.Reserve("a1", admin.Reservation{ID: id, User: "u-" + id, Qty: 1}); err != nil {
				t.Fatal(err)
			}
			if err := f.mem.Order("a1", id); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.mem.Pay("a1", "r1"); err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{`{}`, `{"restock":""}`, `{"restock":"back"}`, `{"restock":"sale","qty":1}`} {
			r := f.post("/admin/activities/a1/orders/o-r1/refund", body, "")
			if r.status != http.StatusBadRequest {
				t.Fatalf("refund with %s: %d %s, want 400", body, r.status, r.body)
			}
		}
		f.mustError(f.post("/admin/activities/a1/orders/o%20r1/refund", `{"restock":"sale"}`, ""), http.StatusBadRequest, admin.CodeInvalidArgument)
		if n := f.mem.Calls("refund"); n != 0 {
			t.Fatalf("refused refunds reached the backend %d times", n)
		}

		first := f.post("/admin/activities/a1/orders/o-r1/refund", `{"restock":"sale"}`, "k-refund-1")
		var ch admin.OrderChange
		f.mustOK(first, &ch)
		if ch.Before.Status != "PAID" || ch.After.Status != "REFUNDED" || ch.After.Restock != "sale" {
			t.Fatalf("change %+v", ch)
		}
		again := f.post("/admin/activities/a1/orders/o-r1/refund", `{"restock":"sale"}`, "k-refund-1")
		if again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay answered %s, first %s", again.body, first.body)
		}
		if n := f.mem.Calls("refund"); n != 1 {
			t.Fatalf("the refund reached the backend %d times, want 1", n)
		}
		f.mustError(f.post("/admin/activities/a1/orders/o-r1/refund", `{"restock":"none"}`, ""), http.StatusConflict, admin.CodeConflict)
		f.mustError(f.post("/admin/activities/a1/orders/o-r2/refund", `{"restock":"none"}`, ""), http.StatusConflict, admin.CodeConflict)
		f.mustError(f.post("/admin/activities/a1/orders/o-r9/refund", `{"restock":"none"}`, ""), http.StatusNotFound, admin.CodeNotFound)
		if bad := f.mem.BadCalls(); len(bad) != 0 {
			t.Fatalf("the backend saw bad calls: %v", bad)
		}

		var refund []auditRow
		for _, row := range f.rows() {
			if row.Action == "refund" {
				refund = append(refund, row)
			}
		}
		if len(refund) != 4 {
			t.Fatalf("%d refund audit rows, want 4 (one per request reaching the backend): %+v", len(refund), refund)
		}
		p := refund[0]
		if p.Activity != "a1" || p.Target != "order:o-r1" || p.Status != admin.AuditOK || p.HTTPStatus != 200 ||
			jsonField(t, p.StateBefore, "status") != "PAID" || jsonField(t, p.StateAfter, "status") != "REFUNDED" ||
			jsonField(t, p.Params, "restock") != "sale" {
			t.Fatalf("refund row %+v", p)
		}
		if refund[1].Status != admin.AuditFailed || refund[1].HTTPStatus != http.StatusConflict {
			t.Fatalf("second refund's row %+v", refund[1])
		}
	})
}
