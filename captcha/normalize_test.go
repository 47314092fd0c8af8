package captcha

import (
	"encoding/base64"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestNormalizeAnswer(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"abc":        "abc",
		"  AbC \t\n": "abc",
		"XKCD7":      "xkcd7",
		"ÄÖÜ":        "äöü",
		"\u212a":     "k", // Kelvin sign folds with K and k
		"K":          "k",
		"12":         "12",
		"":           "",
		" \u00a0 ":   "",
		"a b":        "a b",
		"\xff":       "\ufffd",
		"Σσς":        "σσσ",
	}
	for in, want := range cases {
		assert.Equal(t, want, normalizeAnswer(in), "%q", in)
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for range 100 {
		assert.True(t, ValidID(newID()))
	}
	for _, s := range []string{"", "AAAAAAAAAAAAAAAAAAAAAB", "AAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAA+A", "AAAAAAAAAAAAAAAAAAAAAAA"} {
		assert.False(t, ValidID(s), s)
	}
}

// FuzzNormalizeAnswer: normalisation is idempotent, trims, yields valid
// UTF-8, ignores ASCII case and never panics.
func FuzzNormalizeAnswer(f *testing.F) {
	for _, s := range []string{"abc", " AbC ", "\u212a", "Σσς", "\xff\xfe", "İı", "ǅǄǆ", "\u0085x\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := normalizeAnswer(s)
		if normalizeAnswer(n) != n {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, n, normalizeAnswer(n))
		}
		if !utf8.ValidString(n) {
			t.Fatalf("invalid UTF-8 out: %q", n)
		}
		if strings.TrimSpace(n) != n {
			t.Fatalf("not trimmed: %q", n)
		}
		upper := strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' {
				return unicode.ToUpper(r)
			}
			return r
		}, s)
		if normalizeAnswer(upper) != n {
			t.Fatalf("case-sensitive: %q vs %q", s, upper)
		}
	})
}

// FuzzValidID: an accepted ID is the canonical base64url of 16 bytes.
func FuzzValidID(f *testing.F) {
	f.Add(newID())
	f.Add("AAAAAAAAAAAAAAAAAAAAAB")
	f.Add("")
	f.Add("../../../etc/passwd}{x")
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidID(s) {
			return
		}
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != 16 || base64.RawURLEncoding.EncodeToString(b) != s {
			t.Fatalf("accepted %q", s)
		}
		if strings.ContainsAny(s, "{}") {
			t.Fatalf("ID with hash-tag braces accepted: %q", s)
		}
	})
}
