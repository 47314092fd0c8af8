package token

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"
)

// fuzzSigner signs with k1; its clock sits at the activity start.
func fuzzSigner(t testing.TB) *Signer {
	s, err := NewSigner([]Key{k1, k2}, WithClock(clockFunc(func() time.Time { return start })))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var verifyErrors = []error{ErrMalformed, ErrUnknownKey, ErrInvalidSignature, ErrWrongActivity,
	ErrWrongUser, ErrNotYetValid, ErrExpired}

// FuzzVerify feeds arbitrary strings to the signed-URL parser and verifier:
// they must never panic, must fail with one of the documented sentinels, and
// anything that parses must re-encode to exactly the same string (one
// canonical encoding, no malleability).
func FuzzVerify(f *testing.F) {
	s := fuzzSigner(f)
	good, err := s.Sign(SignParams{Activity: "42", User: "alice", Start: start})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add("")
	f.Add("AQJrMQI0MgVhbGljZQ")
	f.Add("==")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := s.Verify(context.Background(), VerifyParams{Token: tok, Activity: "42", User: "alice"})
		if err == nil {
			if c.Activity != "42" || c.User != "alice" || !c.Expiry.After(c.NotBefore) {
				t.Fatalf("verified odd claims %+v", c)
			}
			return
		}
		known := false
		for _, e := range verifyErrors {
			known = known || errors.Is(err, e)
		}
		if !known {
			t.Fatalf("undocumented error %v", err)
		}
		var raw [maxRawLen]byte
		if _, perr := parse(tok, &raw); perr == nil {
			b, _ := base64.RawURLEncoding.DecodeString(tok)
			if base64.RawURLEncoding.EncodeToString(b) != tok {
				t.Fatalf("non-canonical encoding accepted: %q", tok)
			}
		}
	})
}

// FuzzSignVerify signs arbitrary activity/user pairs: whatever Sign accepts
// must verify for exactly that pair, and flipping any single byte of the
// token must make it fail.
func FuzzSignVerify(f *testing.F) {
	s := fuzzSigner(f)
	f.Add("42", "alice", uint16(0))
	f.Add("a:b", "用户", uint16(17))
	f.Add("x", "y", uint16(500))
	f.Fuzz(func(t *testing.T, activity, user string, pos uint16) {
		tok, err := s.Sign(SignParams{Activity: activity, User: user, Start: start})
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("sign: %v", err)
			}
			return
		}
		if _, err := s.Verify(context.Background(), VerifyParams{Token: tok, Activity: activity, User: user}); err != nil {
			t.Fatalf("round trip: %v", err)
		}
		b := []byte(tok)
		i := int(pos) % len(b)
		b[i] ^= 0x01
		if _, err := s.Verify(context.Background(), VerifyParams{Token: string(b), Activity: activity, User: user}); err == nil {
			t.Fatalf("altered token %q (byte %d) verified", b, i)
		}
	})
}

// FuzzValidPoolToken checks the pool-token format check: anything accepted
// is the canonical base64url encoding of 16 bytes.
func FuzzValidPoolToken(f *testing.F) {
	f.Add(newToken())
	f.Add("AAAAAAAAAAAAAAAAAAAAAB")
	f.Add("")
	f.Add("AAAAAAAAAAAAAAAAAAAAA=")
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidPoolToken(s) {
			return
		}
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != 16 || base64.RawURLEncoding.EncodeToString(b) != s {
			t.Fatalf("accepted %q", s)
		}
	})
}
