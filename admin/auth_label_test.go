package admin_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/admin"
)

// A bearer secret needs 32 bytes: 16 let a human-chosen word through.
func TestBearerTokenNeeds32Bytes(t *testing.T) {
	if _, err := admin.BearerToken(strings.Repeat("x", 31), testLabelKey); !errors.Is(err, admin.ErrInvalidConfig) {
		t.Fatalf("31-byte secret: %v, want ErrInvalidConfig", err)
	}
	if _, err := admin.BearerToken(strings.Repeat("x", 32), testLabelKey); err != nil {
		t.Fatalf("32-byte secret: %v", err)
	}
	// The label key has the same floor (one constant for both, MinTokenLen).
	if _, err := admin.BearerToken(strings.Repeat("x", 32), testLabelKey[:admin.MinTokenLen-1]); !errors.Is(err, admin.ErrInvalidConfig) {
		t.Fatalf("31-byte label key: %v, want ErrInvalidConfig", err)
	}
	if _, err := admin.BearerToken(strings.Repeat("x", 32), testLabelKey[:admin.MinTokenLen]); err != nil {
		t.Fatalf("32-byte label key: %v", err)
	}
}

// The operator label in the audit log is no unsalted hash of the token
// (before: the first 32 bits of its SHA-256, an offline oracle to test
// guesses of the token against).
func TestBearerTokenLabelIsNoHashOfTheToken(t *testing.T) {
	secret := strings.Repeat("k", 40)
	auth, err := admin.BearerToken(secret, testLabelKey)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+secret)
	op, err := auth(r)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(secret))
	if strings.Contains(op, hex.EncodeToString(sum[:4])) {
		t.Fatalf("operator %q carries the token's unsalted SHA-256", op)
	}
}
