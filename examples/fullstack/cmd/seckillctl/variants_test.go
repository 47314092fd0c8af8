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
