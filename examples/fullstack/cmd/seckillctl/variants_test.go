package main

import (
	"strings"
	"testing"
)

// TestLoadVariantsFlag: load --variants sends the activity's variants and
// their sum as the stock (the audit log records the request); a bad
// --variants is a usage error, before any request.
func TestLoadVariantsFlag(t *testing.T) {
	s := newServer(t)
	s.mustRun("load", "shoe", "--variants", "36=2:1, 37=3", "--limit", "2")
	out := s.mustRun("audit", "-o", "json")
	if !strings.Contains(out, `\"variants\":[{\"id\":\"36\",\"stock\":2,\"per_user_limit\":1},{\"id\":\"37\",\"stock\":3}]`) &&
		!strings.Contains(out, `"variants":[{"id":"36","stock":2,"per_user_limit":1},{"id":"37","stock":3}]`) {
		t.Errorf("the load's variants are not in the audit log:\n%s", out)
	}
	if !strings.Contains(out, `stock\":5`) && !strings.Contains(out, `"stock":5`) {
		t.Errorf("the stock sent is not the variants' sum 5:\n%s", out)
	}
	for _, bad := range []string{"36", "36=x", "=1", "36=1:0", ","} {
		code, _, stderr := s.ctl("load", "shoe", "--variants", bad)
		if code != 2 || !strings.Contains(stderr, "--variants") {
			t.Errorf("--variants %q: exit %d, %s", bad, code, stderr)
		}
	}
	if code, _, stderr := s.ctl("load", "shoe", "--stock", "9", "--variants", "36=1"); code == 0 || !strings.Contains(stderr, "sum 1") {
		t.Errorf("--stock not the variants' sum: exit %d, %s", code, stderr)
	}
}

// TestSizeActions: "ACTIVITY/SIZE" tops up, withdraws, pauses, resumes and
// reads one size of a sale in sizes through its variant routes; the other
// size is untouched.
func TestSizeActions(t *testing.T) {
	s := newServer(t)
	s.mustRun("load", "shoe", "--variants", "36=2,37=3")
	s.mustRun("topup", "shoe/36", "4", "--idempotency-key", "cli-topup-36")
	s.mustRun("withdraw", "shoe/37", "1", "--idempotency-key", "cli-withdraw-37")
	s.mustRun("pause", "shoe/37")
	out := s.mustRun("stats", "shoe/36", "-o", "json")
	if !strings.Contains(out, `"activity": "shoe/36"`) && !strings.Contains(out, `"activity":"shoe/36"`) {
		t.Errorf("stats of shoe/36:\n%s", out)
	}
	if !strings.Contains(out, `"remaining": 6`) && !strings.Contains(out, `"remaining":6`) {
		t.Errorf("shoe/36 after +4, want 6 remaining:\n%s", out)
	}
	out = s.mustRun("stats", "shoe/37", "-o", "json")
	if !strings.Contains(out, `"remaining": 2`) && !strings.Contains(out, `"remaining":2`) {
		t.Errorf("shoe/37 after -1, want 2 remaining:\n%s", out)
	}
	s.mustRun("resume", "shoe/37")
	if n := s.mem.Calls("topup"); n != 1 {
		t.Errorf("topup acted %d times, want once", n)
	}
}
