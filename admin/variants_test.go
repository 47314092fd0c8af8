package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"
)

// TestLoadVariants: a load takes the activity's variants (recorded in the
// audit row's params), and refuses bad ones by name before the backend
// is called: an ID outside the alphabet, one given twice, a negative
// stock or limit, and a stock that is not the variants' sum.
func TestLoadVariants(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.mustOK(f.post("/admin/activities/shoe/load", `{"stock":5,"per_user_limit":2,"variants":[{"id":"36","stock":2,"per_user_limit":1},{"id":"37","stock":3}]}`, ""), nil)
		rows := f.rows()
		if len(rows) != 1 || !strings.Contains(rows[0].Params, `"variants":[{"id":"36","stock":2,"per_user_limit":1},{"id":"37","stock":3}]`) {
			t.Fatalf("audit rows %+v", rows)
		}
		for body, want := range map[string]string{
			`{"stock":1,"variants":[{"id":"3 6","stock":1}]}`:                      "each id must be",
			`{"stock":2,"variants":[{"id":"36","stock":1},{"id":"36","stock":1}]}`: "given twice",
			`{"stock":0,"variants":[{"id":"36","stock":-1}]}`:                      "36: stock",
			`{"stock":1,"variants":[{"id":"36","stock":1,"per_user_limit":-1}]}`:   "per_user_limit",
			`{"stock":4,"variants":[{"id":"36","stock":1},{"id":"37","stock":2}]}`: "the variants' sum 3",
		} {
			r := f.post("/admin/activities/shoe2/load", body, "")
			f.mustError(r, http.StatusBadRequest, "invalid_argument")
			if !strings.Contains(r.body, want) {
				t.Errorf("%s: %s, want a message with %q", body, r.body, want)
			}
		}
		if n := f.mem.Calls("load"); n != 1 {
			t.Errorf("the backend's Load called %d times, want once (the refused loads never reach it)", n)
		}
	})
}

// TestVariantRoutes: a size of a sale in sizes is paused, resumed, topped
// up, withdrawn and read on its own routes, the Backend taking
// "<activity>/<variant>"; the sale's other size is untouched; a bad
// variant segment is refused before the Backend.
func TestVariantRoutes(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.mustOK(f.post("/admin/activities/shoe/load", `{"stock":5,"per_user_limit":2,"variants":[{"id":"36","stock":2},{"id":"37","stock":3}]}`, ""), nil)
		f.mustOK(f.post("/admin/activities/shoe/variants/36/topup", `{"n":4}`, "topup-36"), nil)
		f.mustOK(f.post("/admin/activities/shoe/variants/37/withdraw", `{"n":1}`, "withdraw-37"), nil)
		f.mustOK(f.post("/admin/activities/shoe/variants/37/pause", `{}`, ""), nil)
		r := f.get("/admin/activities/shoe/variants/36/stats")
		if r.status != http.StatusOK || !strings.Contains(r.body, `"activity":"shoe/36"`) || !strings.Contains(r.body, `"remaining":6`) {
			t.Errorf("stats of size 36: %d %s", r.status, r.body)
		}
		r = f.get("/admin/activities/shoe/variants/37/stats")
		if !strings.Contains(r.body, `"remaining":2`) || !strings.Contains(r.body, `"paused":true`) {
			t.Errorf("stats of size 37: %s", r.body)
		}
		f.mustOK(f.post("/admin/activities/shoe/variants/37/resume", `{}`, ""), nil)
		for _, bad := range []string{"/admin/activities/shoe/variants/3%206/topup", "/admin/activities/shoe/variants//topup"} {
			f.mustError(f.post(bad, `{"n":1}`, "bad-"+bad), http.StatusBadRequest, "invalid_argument")
		}
		if n := f.mem.Calls("topup"); n != 1 {
			t.Errorf("the backend's TopUp called %d times, want once", n)
		}
		if bad := f.mem.BadCalls(); len(bad) != 0 {
			t.Errorf("the backend saw bad calls: %v", bad)
		}
		rows := f.rows()
		found := false
		for _, row := range rows {
			found = found || strings.Contains(row.Activity, "shoe/36") && row.Action == "topup"
		}
		if !found {
			t.Errorf("no audit row of the topup of shoe/36: %+v", rows)
		}
	})
}
