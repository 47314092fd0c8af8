package keyring

import (
	"crypto/hmac"
	"crypto/sha256"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	secret := []byte("0123456789abcdef")
	for _, tc := range []struct {
		name string
		keys []Key
		want string // "" means valid
	}{
		{"none", nil, "no key"},
		{"empty ID", []Key{{"", secret}}, "key ID"},
		{"long ID", []Key{{strings.Repeat("k", MaxIDLen+1), secret}}, "key ID"},
		{"bad byte", []Key{{"k/1", secret}}, "key ID"},
		{"short secret", []Key{{"k1", secret[:15]}}, "secret shorter"},
		{"duplicate", []Key{{"k1", secret}, {"k1", secret}}, "duplicate"},
		{"ok", []Key{{"k1", secret}, {"k.2_-", secret}}, ""},
	} {
		r, err := New(tc.keys)
		if tc.want == "" {
			if err != nil || r.Signer().ID() != "k1" || r.Key("k.2_-") == nil || r.Key("k3") != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// MAC is HMAC-SHA256 under the key's secret, the secret copied at New.
func TestMAC(t *testing.T) {
	secret := []byte("0123456789abcdef")
	r, err := New([]Key{{"k1", secret}})
	if err != nil {
		t.Fatal(err)
	}
	secret[0] = 'X' // the caller's slice changes; the ring's copy does not
	h := hmac.New(sha256.New, []byte("0123456789abcdef"))
	h.Write([]byte("msg"))
	for range 3 { // the pooled hash is reset between uses
		if got := r.Signer().MAC([]byte("p:"), []byte("msg")); string(got) != "p:"+string(h.Sum(nil)) {
			t.Fatalf("MAC = %x", got)
		}
	}
	if raceEnabled {
		return // the race detector makes sync.Pool drop items
	}
	buf, msg := make([]byte, 0, 64), []byte("msg")
	if n := testing.AllocsPerRun(100, func() { _ = r.Signer().MAC(buf[:0], msg) }); n > 0 {
		t.Errorf("MAC allocates %.0f times", n)
	}
}
