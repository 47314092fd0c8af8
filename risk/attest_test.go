package risk

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeAttestor is the test double of an Attestor: tokens it issued
// (issue) map to verdicts bound to one user, each verifies once (a
// replay is invalid, as a nonce-bound Play Integrity or App Attest token
// is), unknown tokens are forged. down makes it fail.
type fakeAttestor struct {
	mu     sync.Mutex
	tokens map[string]fakeToken
	calls  int
	down   error
}

type fakeToken struct {
	user string
	v    Attestation
	used bool
}

func newFakeAttestor() *fakeAttestor { return &fakeAttestor{tokens: map[string]fakeToken{}} }

func (f *fakeAttestor) issue(token, user string, v Attestation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens[token] = fakeToken{user: user, v: v}
}

func (f *fakeAttestor) Attest(_ context.Context, s Subject) (Attestation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down != nil {
		return Attestation{}, f.down
	}
	t, ok := f.tokens[s.AttestToken]
	if !ok || t.used || t.user != s.UserID {
		return Attestation{}, nil // forged, replayed or another user's
	}
	t.used = true
	f.tokens[s.AttestToken] = t
	return t.v, nil
}

var genuine = Attestation{Valid: true, App: true, Device: true}

// TestAttestationMapping: each verdict field maps as the package doc's
// table says.
func TestAttestationMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		v      Attestation
		action Action
		reason string
		flags  []string
	}{
		{"genuine", genuine, Allow, "", nil},
		{"genuine with signals", Attestation{Valid: true, App: true, Device: true, Signals: []string{"attest_unlicensed"}}, Allow, "", []string{"attest_unlicensed"}},
		{"invalid token", Attestation{App: true, Device: true}, Deny, ReasonAttestationFailed, nil},
		{"not the genuine app", Attestation{Valid: true, Device: true}, Deny, ReasonAttestationFailed, nil},
		{"weak device", Attestation{Valid: true, App: true, Signals: []string{"attest_basic_only"}}, Challenge, ReasonAttestationWeak, []string{"attest_basic_only"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fa := newFakeAttestor()
			fa.issue("tok", "u1", c.v)
			r, err := NewAttestationRule(fa, AttestationConfig{})
			require.NoError(t, err)
			d, err := r.Check(bg, Subject{UserID: "u1", AttestToken: "tok"})
			require.NoError(t, err)
			assert.Equal(t, c.action, d.Action)
			assert.Equal(t, c.reason, d.Reason)
			assert.Equal(t, c.flags, d.Flags)
		})
	}
}

// TestAttestationCredentials: forged, replayed and another user's tokens
// are denied; a missing token is a flag, or a deny with RequireToken; an
// over-long token is denied without asking the attestor.
func TestAttestationCredentials(t *testing.T) {
	t.Parallel()
	fa := newFakeAttestor()
	fa.issue("t1", "u1", genuine)
	fa.issue("t2", "u2", genuine)
	r, err := NewAttestationRule(fa, AttestationConfig{})
	require.NoError(t, err)
	check := func(s Subject) Decision {
		t.Helper()
		d, err := r.Check(bg, s)
		require.NoError(t, err)
		return d
	}
	assert.Equal(t, Deny, check(Subject{UserID: "u1", AttestToken: "forged"}).Action, "forged")
	assert.Equal(t, Deny, check(Subject{UserID: "u1", AttestToken: "t2"}).Action, "another user's")
	assert.Equal(t, Allow, check(Subject{UserID: "u1", AttestToken: "t1"}).Action, "genuine")
	assert.Equal(t, Deny, check(Subject{UserID: "u1", AttestToken: "t1"}).Action, "replayed")
	d := check(Subject{UserID: "u1"})
	assert.Equal(t, Allow, d.Action)
	assert.Equal(t, []string{ReasonAttestationMissing}, d.Flags, "missing: a signal")
	calls := fa.calls
	d = check(Subject{UserID: "u1", AttestToken: strings.Repeat("x", maxAttestTokenLen+1)})
	assert.Equal(t, Deny, d.Action)
	assert.Equal(t, calls, fa.calls, "not asked")

	strict, err := NewAttestationRule(fa, AttestationConfig{RequireToken: true})
	require.NoError(t, err)
	d, err = strict.Check(bg, Subject{UserID: "u1"})
	require.NoError(t, err)
	assert.Equal(t, Deny, d.Action)
	assert.Equal(t, ReasonAttestationMissing, d.Reason)

	_, err = NewAttestationRule(nil, AttestationConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

// TestAttestationFailurePolicy: an attestor that is down meets the
// Checker's failure policy like a rule whose Redis is down.
func TestAttestationFailurePolicy(t *testing.T) {
	t.Parallel()
	down := errors.New("attestation service unreachable")
	for _, c := range []struct {
		policy FailurePolicy
		action Action
		err    bool
	}{
		{FailClosed, Allow, true},
		{FailOpen, Allow, false},
		{FailChallenge, Challenge, false},
	} {
		t.Run(c.policy.String(), func(t *testing.T) {
			fa := newFakeAttestor()
			fa.down = down
			r, err := NewAttestationRule(fa, AttestationConfig{})
			require.NoError(t, err)
			var failed []string
			ch, err := NewChecker([]Rule{r}, WithFailurePolicy(c.policy),
				WithOnFailure(func(_ context.Context, rule string, _ error) { failed = append(failed, rule) }))
			require.NoError(t, err)
			d, err := ch.Check(bg, Subject{UserID: "u1", AttestToken: "t"})
			if c.err {
				assert.ErrorIs(t, err, ErrUnavailable)
				assert.ErrorIs(t, err, down)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.action, d.Action)
			assert.Equal(t, []string{"attestation"}, d.Degraded)
			assert.Equal(t, []string{"attestation"}, failed)
		})
	}
}

// TestAttestationThroughMiddleware: the default subject carries the
// X-Attestation header to the rule, and a checker with the rule has no
// fused form.
func TestAttestationThroughMiddleware(t *testing.T) {
	t.Parallel()
	fa := newFakeAttestor()
	fa.issue("good", "u1", genuine)
	fa.issue("emu", "u1", Attestation{Valid: true, App: true})
	r, err := NewAttestationRule(fa, AttestationConfig{RequireToken: true})
	require.NoError(t, err)
	ch, err := NewChecker([]Rule{r})
	require.NoError(t, err)
	_, err = ch.CheckCheck(Subject{UserID: "u1"})
	assert.Error(t, err, "no fused form")
	mw, err := NewMiddleware(ch)
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for _, c := range []struct {
		token string
		code  int
	}{{"good", http.StatusNoContent}, {"", http.StatusForbidden}, {"good", http.StatusForbidden}, {"emu", http.StatusForbidden}} {
		req := httptest.NewRequest(http.MethodPost, "/buy", nil).WithContext(WithUser(bg, "u1"))
		if c.token != "" {
			req.Header.Set("X-Attestation", c.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, c.code, rec.Code, "token %q", c.token)
	}
}

// FuzzAttestationRule: whatever the token and verdict, the rule never
// lets through a verdict that is not Valid and App, and never allows
// without a token under RequireToken.
func FuzzAttestationRule(f *testing.F) {
	f.Add("tok", true, true, true, true)
	f.Add("", false, false, false, false)
	f.Add(strings.Repeat("a", 70000), true, true, true, true)
	f.Fuzz(func(t *testing.T, token string, valid, app, device, require bool) {
		fa := newFakeAttestor()
		fa.issue(token, "u1", Attestation{Valid: valid, App: app, Device: device})
		r, err := NewAttestationRule(fa, AttestationConfig{RequireToken: require})
		if err != nil {
			t.Fatal(err)
		}
		d, err := r.Check(bg, Subject{UserID: "u1", AttestToken: token})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case token == "" && require && d.Action != Deny:
			t.Fatalf("no token, required: %+v", d)
		case token != "" && (!valid || !app) && d.Action != Deny:
			t.Fatalf("invalid verdict passed: %+v", d)
		case token != "" && valid && app && !device && d.Action == Allow && len(token) <= maxAttestTokenLen:
			t.Fatalf("weak device allowed: %+v", d)
		}
	})
}
