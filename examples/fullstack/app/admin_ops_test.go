package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// The story of a paid order's reservation says the hold is consumed by
// the order: Redis keeps a sold unit "held" for good, which an operator
// read as unsettled.
func TestAdminStoryOfAPaidOrder(t *testing.T) {
	a, base := startApp(t, embeddedConfig(2, 2))
	u := login(t, base, "user1")
	cid, ans, tok, path := u.creds()
	code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans})
	if code != 202 {
		t.Fatalf("buy: %d %v", code, m)
	}
	resv := u.str(m, "reservation")
	req, _ := http.NewRequest("GET", base+"/api/events/"+resv+"?ticket="+u.ticket(resv), nil)
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req) // a bound: the stream ends at the result
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			_ = json.Unmarshal([]byte(line), &ev)
			if ev["status"] != "queued" {
				break
			}
		}
	}
	resp.Body.Close()
	orderNo, _ := ev["order_no"].(string)
	if ev["status"] != "created" || orderNo == "" {
		t.Fatalf("result %v", ev)
	}
	if code, m := u.do("POST", "/api/pay", map[string]string{"order_no": orderNo}); code != 200 {
		t.Fatalf("pay: %d %v", code, m)
	}
	st, err := app.AdminBackend(t, a).Story(context.Background(), fmt.Sprint(a.Config().ActivityID), resv)
	if err != nil {
		t.Fatal(err)
	}
	if st.Order == nil || st.Order.Status != "PAID" || st.Ledger == nil || st.Ledger.State != "held (order PAID: consumed)" {
		t.Fatalf("story: order %+v, ledger %+v; want ledger state %q", st.Order, st.Ledger, "held (order PAID: consumed)")
	}
}

// The apply of a reconcile releases what its dry run listed and still due,
// nothing else: a reservation that became due after the dry run is left
// held (before, the apply ran a fresh reconcile and released it unseen).
func TestAdminReconcileApplyReleasesOnlyThePlan(t *testing.T) {
	cfg := embeddedConfig(4, 4)
	cfg.ReconcileGrace = time.Nanosecond // due at once
	cfg.ReconcileEvery = time.Hour       // the background run stays out of the way
	a, _ := startApp(t, cfg)
	ctx := admin.WithAction(context.Background(), admin.Action{ID: "audit-plan-test", Operator: "test"})
	act := fmt.Sprint(a.Config().ActivityID)
	b := app.AdminBackend(t, a)
	if _, err := app.ReserveAs(ctx, a, "1", "plan-r1"); err != nil {
		t.Fatal(err)
	}
	dry, err := b.Reconcile(ctx, admin.ReconcileParams{Activity: act, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(dry.Release, ",") != "plan-r1" {
		t.Fatalf("dry run %+v", dry)
	}
	if _, err := app.ReserveAs(ctx, a, "2", "plan-r2"); err != nil {
		t.Fatal(err)
	}
	rep, err := b.Reconcile(ctx, admin.ReconcileParams{Activity: act, Plan: dry.Release})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Release, ",") != "plan-r1" || len(rep.Failed) != 0 || rep.DryRun {
		t.Fatalf("apply %+v, want plan-r1 released alone", rep)
	}
	st, err := b.Story(ctx, act, "plan-r2")
	if err != nil {
		t.Fatal(err)
	}
	if st.Ledger == nil || !strings.HasPrefix(st.Ledger.State, "held") {
		t.Fatalf("plan-r2 after the apply: %+v", st.Ledger)
	}
	// Applying the same plan again: plan-r1 is no longer due, skipped.
	rep, err = b.Reconcile(ctx, admin.ReconcileParams{Activity: act, Plan: dry.Release})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Release) != 0 || strings.Join(rep.Skipped, ",") != "plan-r1" {
		t.Fatalf("second apply %+v", rep)
	}
	// A new dry run shows plan-r2, and its apply releases it (which also
	// settles the sale for the shutdown's drain).
	dry, err = b.Reconcile(ctx, admin.ReconcileParams{Activity: act, DryRun: true})
	if err != nil || strings.Join(dry.Release, ",") != "plan-r2" {
		t.Fatalf("second dry run %+v, %v", dry, err)
	}
	if rep, err = b.Reconcile(ctx, admin.ReconcileParams{Activity: act, Plan: dry.Release}); err != nil || strings.Join(rep.Release, ",") != "plan-r2" {
		t.Fatalf("third apply %+v, %v", rep, err)
	}
}

// One variable says where the admin API is, for the service (where it
// listens) and for seckillctl (where it dials): SECKILL_ADMIN_ADDR, as
// host:port or as the URL the service logs. SECKILL_ADMIN_LISTEN, the old
// name, still works.
func TestAdminAddrVariable(t *testing.T) {
	parse := func() (app.Config, error) {
		c := app.DefaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c.RegisterFlags(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		return c, c.Validate()
	}
	cleanEnv(t) // CI sets both Redis variables, which the service refuses together
	t.Setenv("SECKILL_ADMIN_TOKEN", strings.Repeat("t", 32))
	for _, v := range []string{"127.0.0.1:9091", "http://127.0.0.1:9091/admin/", "http://127.0.0.1:9091"} {
		t.Setenv("SECKILL_ADMIN_ADDR", v)
		c, err := parse()
		if err != nil || c.AdminAddr != v {
			t.Errorf("SECKILL_ADMIN_ADDR=%s: admin addr %q, %v", v, c.AdminAddr, err)
		}
	}
	t.Setenv("SECKILL_ADMIN_ADDR", "https://admin.example.com/admin/")
	if _, err := parse(); err == nil || !strings.Contains(err.Error(), "SECKILL_ADMIN_ADDR") {
		t.Errorf("an https URL to listen on: %v, want an error naming SECKILL_ADMIN_ADDR", err)
	}
	t.Setenv("SECKILL_ADMIN_ADDR", "")
	t.Setenv("SECKILL_ADMIN_LISTEN", "127.0.0.1:9092")
	if c, err := parse(); err != nil || c.AdminAddr != "127.0.0.1:9092" {
		t.Errorf("SECKILL_ADMIN_LISTEN: admin addr %q, %v", c.AdminAddr, err)
	}
}

// N6: the admin token needs 32 bytes, and the error names the variable.
func TestAdminTokenNeeds32Bytes(t *testing.T) {
	c := app.DefaultConfig()
	c.AdminAddr, c.AdminToken = "127.0.0.1:0", strings.Repeat("t", 31)
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "SECKILL_ADMIN_TOKEN") || !strings.Contains(err.Error(), "32") {
		t.Fatalf("a 31-byte admin token: %v", err)
	}
	c.AdminToken += "t"
	if err := c.Validate(); err != nil {
		t.Fatalf("a 32-byte admin token: %v", err)
	}
}

// The admin API lists the blacklist, a page at a time (before, every
// listing answered 503: the blacklist kept no index of its bans).
func TestAdminBansListsTheBlacklist(t *testing.T) {
	a, _ := startApp(t, embeddedConfig(2, 2))
	ctx := admin.WithAction(context.Background(), admin.Action{ID: "audit-bans-test", Operator: "test"})
	b := app.AdminBackend(t, a)
	for _, p := range []admin.BanParams{
		{Kind: admin.BanUser, ID: "u7", Reason: "bot", Duration: time.Hour},
		{Kind: admin.BanUser, ID: "u8", Reason: "bot"},
		{Kind: admin.BanIP, ID: "10.0.0.9", Reason: "abuse", Duration: 2 * time.Hour},
	} {
		if _, err := b.Ban(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	var users []string
	after := ""
	for range 10 {
		page, next, err := b.Bans(ctx, admin.BanUser, after, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page {
			if x.Kind != admin.BanUser || x.Reason != "bot" || x.Until.IsZero() {
				t.Fatalf("ban %+v", x)
			}
			users = append(users, x.ID)
		}
		if after = next; after == "" {
			break
		}
	}
	if strings.Join(users, ",") != "u7,u8" {
		t.Fatalf("user bans %v, want u7,u8", users)
	}
	ips, next, err := b.Bans(ctx, admin.BanIP, "", 100)
	if err != nil || next != "" || len(ips) != 1 || ips[0].ID != "10.0.0.9" {
		t.Fatalf("ip bans %+v next %q: %v", ips, next, err)
	}
}
