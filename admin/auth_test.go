package admin_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/seckillkit/seckill/admin"
)

func TestBearerToken(t *testing.T) {
	auth, err := admin.BearerToken(testToken, testLabelKey)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := admin.BearerToken(testToken+"2", testLabelKey)
	for _, tc := range []struct {
		header string
		ok     bool
	}{
		{"Bearer " + testToken, true},
		{"bearer " + testToken, true},
		{"BEARER  " + testToken + " ", true},
		{"", false},
		{"Bearer", false},
		{"Bearer ", false},
		{"Basic " + testToken, false},
		{"Bearer " + testToken[:len(testToken)-1], false},
		{"Bearer " + testToken + "x", false},
		{testToken, false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		op, err := auth(r)
		if tc.ok != (err == nil) {
			t.Errorf("%q: operator %q, err %v", tc.header, op, err)
		}
		if err != nil && !errors.Is(err, admin.ErrUnauthorized) {
			t.Errorf("%q: %v, want ErrUnauthorized", tc.header, err)
		}
		if tc.ok {
			r2 := httptest.NewRequest("GET", "/", nil)
			r2.Header.Set("Authorization", "Bearer "+testToken+"2")
			op2, err := other(r2)
			if err != nil || op2 == op || len(op) != len("token:")+16 {
				t.Errorf("operators %q and %q (%v): want distinct token:<16 hex>", op, op2, err)
			}
		}
	}
	if _, err := admin.BearerToken("", testLabelKey); !errors.Is(err, admin.ErrInvalidConfig) {
		t.Fatalf("empty secret: %v", err)
	}
}

func TestValidID(t *testing.T) {
	for s, want := range map[string]bool{
		"42": true, "a.b_c@d+e-f": true, "A9": true, string(make([]byte, 0)): false,
		"a b": false, "a/b": false, "a:b": false, "é": false,
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa":  true,  // 64
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": false, // 65
	} {
		if got := admin.ValidID(s); got != want {
			t.Errorf("ValidID(%q) = %v", s, got)
		}
	}
}
