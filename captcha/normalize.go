package captcha

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxAnswerLen is the longest answer, in bytes after normalisation, that
// can match (64). Longer answers are refused as wrong without being
// checked; a [Generator] answer longer than that is an [ErrGenerator].
const maxAnswerLen = 64

// idLen is the length of a challenge ID: 16 random bytes, base64url.
const idLen = 22

// normalizeAnswer returns the canonical form answers are compared in:
// surrounding white space trimmed, letters lower-cased (simple Unicode
// case folding: "AbC" == "abc"), invalid UTF-8 replaced by U+FFFD. It is
// idempotent. Both the stored answer and the user's answer go through it.
func normalizeAnswer(s string) string {
	s = strings.TrimSpace(s)
	if isLowerASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s { // invalid bytes arrive as utf8.RuneError
		b.WriteRune(fold(r))
	}
	return strings.TrimSpace(b.String())
}

// fold maps r to the lower case of the smallest rune of its case-folding
// orbit, so every member of an orbit ("K", "k" and the Kelvin sign; "Σ",
// "σ" and "ς") normalises alike.
func fold(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < m {
			m = f
		}
	}
	return unicode.ToLower(m)
}

func isLowerASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return true
}

// ValidID reports whether s has the shape of a challenge ID (22 base64url
// characters encoding 16 bytes). [Store.Verify] refuses other IDs with
// [ErrNotFound] before calling Redis.
func ValidID(s string) bool {
	if len(s) != idLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	// the last character holds 4 padding bits that must be zero
	return strings.IndexByte("AQgw", s[idLen-1]) >= 0
}
