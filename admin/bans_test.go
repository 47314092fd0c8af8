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

// A network (CIDR) bans and unbans through the API like an address; it is
// stored masked, an address-sized prefix as the address; a malformed one
// is a 400.
func TestBanNetwork(t *testing.T) {
	f := newFixture(t, nil)
	var bc admin.BanChange
	f.mustOK(f.post("/admin/ban", `{"kind":"ip","id":"2001:db8:1:2:3::/64","reason":"farm"}`, ""), &bc)
	if bc.After == nil || bc.After.ID != "2001:db8:1:2::/64" {
		t.Fatalf("ban %+v", bc)
	}
	f.mustOK(f.post("/admin/ban", `{"kind":"ip","id":"::ffff:203.0.113.9/120","reason":"farm"}`, ""), &bc)
	if bc.After == nil || bc.After.ID != "203.0.113.0/24" {
		t.Fatalf("ban %+v", bc)
	}
	f.mustOK(f.post("/admin/ban", `{"kind":"ip","id":"10.0.0.1/32","reason":"bot"}`, ""), &bc)
	if bc.After == nil || bc.After.ID != "10.0.0.1" {
		t.Fatalf("ban %+v", bc)
	}
	var bans admin.BansAnswer
	f.mustOK(f.get("/admin/bans?kind=ip"), &bans)
	if len(bans.Bans) != 3 {
		t.Fatalf("bans %+v", bans)
	}
	f.mustOK(f.post("/admin/unban", `{"kind":"ip","id":"2001:db8:1:2::/64"}`, ""), &bc)
	if bc.Before == nil || bc.After != nil {
		t.Fatalf("unban %+v", bc)
	}
	for _, bad := range []string{"10.0.0.0/33", "10.0.0.0/", "fe80::1%eth0/64", "/24"} {
		f.mustError(f.post("/admin/ban", `{"kind":"ip","id":"`+bad+`","reason":"x"}`, ""), http.StatusBadRequest, admin.CodeInvalidArgument)
	}
}
