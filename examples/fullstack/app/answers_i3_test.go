package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAccessTokenRefusalIsGeneric (I3): a refused access token is answered
// with one fixed message, never the token library's error text (which
// tells a prober why: not found, wrong user, expired …).
func TestAccessTokenRefusalIsGeneric(t *testing.T) {
	_, base := startApp(t, embeddedConfig(10, 5))
	u1, u2 := login(t, base, "user1"), login(t, base, "user2")
	_, _, tok2, _ := u2.creds()
	for name, tok := range map[string]string{
		"another user's token": tok2,
		"an unknown token":     "AAAAAAAAAAAAAAAAAAAAAA",
	} {
		cid, ans, _, path := u1.creds2()
		code, m := u1.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans})
		if code != http.StatusForbidden || m["status"] != "token" {
			t.Errorf("%s: %d %v, want 403 token", name, code, m)
			continue
		}
		if msg := u1.str(m, "message"); msg != "invalid access token" {
			t.Errorf("%s: message %q, want the fixed %q", name, msg, "invalid access token")
		}
	}
}

// TestBadBodySaysWhatIsWrong (item 5): a malformed buy (or login) body is
// refused 400 bad_request with a message that says what is wrong — the
// unknown field by name, the field of the wrong type, a body too large, not
// JSON — and never echoes more than a short, escaped piece of the input.
// Before, every one of them answered "bad body".
func TestBadBodySaysWhatIsWrong(t *testing.T) {
	_, base := startApp(t, embeddedConfig(10, 5))
	u := login(t, base, "user1")
	_, m := u.do("GET", "/api/activity/path", nil)
	path := u.str(m, "path")
	if path == "" {
		t.Fatalf("no buy path: %v", m)
	}
	hdr := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + u.bearer}
	long := strings.Repeat("x", 3000)
	for _, c := range []struct {
		name, body string
		want       []string // substrings of the message
		notWant    []string
	}{
		{"unknown field", `{"token":"t","captcha_id":"c","captcha":"a","admin":true}`, []string{`unknown field "admin"`}, nil},
		{"unknown field, long name", `{"` + long + `":1}`, []string{"unknown field"}, []string{strings.Repeat("x", 100)}},
		{"unknown field, odd bytes", `{"a\"<b>\u0001\u00e9":1}`, []string{`unknown field "a\"<b>\x01\u00e9"`}, nil},
		{"wrong type", `{"token":5}`, []string{`"token"`, "string"}, nil},
		{"not an object", `[1,2]`, []string{"object"}, nil},
		{"not JSON", `token=abc`, []string{"not JSON"}, nil},
		{"cut short", `{"token":"abc"`, []string{"not JSON"}, nil},
		{"empty", ``, []string{"empty"}, nil},
		{"too large", `{"token":"` + strings.Repeat("a", 5000) + `"}`, []string{"too large", "4096"}, nil},
	} {
		code, _, m := rawDo(t, "POST", base+path, hdr, c.body)
		wantErrShape(t, c.name, m)
		msg, _ := m["message"].(string)
		if code != http.StatusBadRequest || m["status"] != "bad_request" {
			t.Errorf("%s: %d %v, want 400 bad_request", c.name, code, m)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q does not say %q", c.name, msg, w)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(msg, w) {
				t.Errorf("%s: message echoes the input (%d bytes)", c.name, len(msg))
			}
		}
		if len(msg) > 200 || !utf8.ValidString(msg) {
			t.Errorf("%s: message of %d bytes: %q", c.name, len(msg), msg)
		}
		for _, r := range msg {
			if r < 0x20 || r == 0x7f || r > 0x7e {
				t.Errorf("%s: message carries the raw character %q: %q", c.name, r, msg)
				break
			}
		}
	}
	// Login and pay say the same.
	b, _ := json.Marshal(map[string]any{"username": "user1", "admin": true})
	code, _, m := rawDo(t, "POST", base+"/api/login", map[string]string{"Content-Type": "application/json"}, string(b))
	if msg, _ := m["message"].(string); code != http.StatusBadRequest || !strings.Contains(msg, `unknown field "admin"`) {
		t.Errorf("login with an unknown field: %d %v", code, m)
	}
	code, _, m = rawDo(t, "POST", base+"/api/pay", hdr, `{"order_no":7}`)
	if msg, _ := m["message"].(string); code != http.StatusBadRequest || !strings.Contains(msg, `"order_no"`) {
		t.Errorf("pay with a number: %d %v", code, m)
	}
}
