package admin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/admin"
)

// GET bans pages through every kind (user, ip, device) with one cursor, or
// through one kind.
func TestBansPaged(t *testing.T) {
	f := newFixture(t, nil)
	for _, b := range []string{`{"kind":"user","id":"u2","reason":"bot"}`, `{"kind":"user","id":"u1","reason":"bot"}`,
		`{"kind":"ip","id":"10.0.0.1","reason":"abuse"}`, `{"kind":"device","id":"d1","reason":"farm","duration":"2h"}`} {
		f.mustOK(f.post("/admin/ban", b, ""), nil)
	}
	list := func(query string) []string {
		var got []string
		after := ""
		for range 20 {
			q := query
			if after != "" {
				q += "&after=" + url.QueryEscape(after)
			}
			var page admin.BansAnswer
			f.mustOK(f.get("/admin/bans?"+q), &page)
			for _, b := range page.Bans {
				got = append(got, string(b.Kind)+":"+b.ID)
			}
			if after = page.Next; after == "" {
				return got
			}
		}
		t.Fatalf("%s: the cursor does not end", query)
		return nil
	}
	if got := strings.Join(list("limit=1"), ","); got != "user:u1,user:u2,ip:10.0.0.1,device:d1" {
		t.Fatalf("all kinds: %s", got)
	}
	if got := strings.Join(list("kind=user&limit=1"), ","); got != "user:u1,user:u2" {
		t.Fatalf("users: %s", got)
	}
	f.mustError(f.get("/admin/bans?kind=ip&after=user:u1"), http.StatusBadRequest, admin.CodeInvalidArgument)
	f.mustError(f.get("/admin/bans?after=nokind"), http.StatusBadRequest, admin.CodeInvalidArgument)
	f.mustError(f.get("/admin/bans?limit=0"), http.StatusBadRequest, admin.CodeInvalidArgument)
	f.mustError(f.get("/admin/bans?limit=1001"), http.StatusBadRequest, admin.CodeInvalidArgument)
}
