package app

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/seckillkit/seckill/breaker"
)

// runTokenStep applies checkout's rule for guarded steps (checkout.Step,
// (*Checkout).run): an unguarded step runs outside the breaker; a guarded
// one runs whole inside it, once; its failure is what the breaker counts,
// its refusal or answer is a success to it; a breaker that refuses answers
// busy and the step never runs.
func TestRunTokenStepIsCheckoutsBreakerRule(t *testing.T) {
	failed := errors.New("redis: connection refused")
	for _, tc := range []struct {
		name      string
		guarded   bool
		step      verdict
		open      bool  // the breaker refuses
		wantRuns  int   // times the step ran
		wantGuard int   // admissions asked of the breaker
		wantSeen  error // what the breaker was told
		wantOut   string
	}{
		{name: "unguarded failure", step: failure(failed), wantRuns: 1, wantOut: "busy"},
		{name: "unguarded, breaker open", open: true, step: refusal(http.StatusTooManyRequests, "limited", "slow down"), wantRuns: 1, wantOut: "limited"},
		{name: "guarded go on", guarded: true, step: verdict{}, wantRuns: 1, wantGuard: 1, wantOut: ""},
		{name: "guarded refusal is no failure", guarded: true, step: refusal(http.StatusForbidden, "denied", "refused by risk control"), wantRuns: 1, wantGuard: 1, wantOut: "denied"},
		{name: "guarded answer is no failure", guarded: true, step: answer("granted", http.StatusOK, map[string]string{}), wantRuns: 1, wantGuard: 1, wantOut: "granted"},
		{name: "guarded failure counts", guarded: true, step: failure(failed), wantRuns: 1, wantGuard: 1, wantSeen: failed, wantOut: "busy"},
		{name: "guarded, breaker open: busy, not run", guarded: true, open: true, step: verdict{}, wantRuns: 0, wantGuard: 1, wantOut: "busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, admissions := 0, 0
			var seen error
			guard := func(ctx context.Context, fn func(context.Context) error) error {
				admissions++
				if tc.open {
					return breaker.ErrRefused
				}
				seen = fn(ctx)
				return seen
			}
			s := tokenStep{stage: "s", guarded: tc.guarded, run: func(*App, context.Context, *tokenReq) verdict { runs++; return tc.step }}
			v := runTokenStep(context.Background(), guard, nil, s, &tokenReq{})
			if runs != tc.wantRuns || admissions != tc.wantGuard || !errors.Is(seen, tc.wantSeen) || (tc.wantSeen == nil && seen != nil) {
				t.Fatalf("runs %d admissions %d breaker told %v; want %d, %d, %v", runs, admissions, seen, tc.wantRuns, tc.wantGuard, tc.wantSeen)
			}
			if v.outcome != tc.wantOut {
				t.Fatalf("outcome %q, want %q", v.outcome, tc.wantOut)
			}
			if tc.open && tc.guarded && !errors.Is(v.err, breaker.ErrRefused) {
				t.Fatalf("an open breaker's answer: err %v, want a breaker refusal (503 busy)", v.err)
			}
		})
	}
}
