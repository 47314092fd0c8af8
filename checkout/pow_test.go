package checkout

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/risk"
)

// powWorld is a checkout with a real proof of work (captcha.PoW on
// miniredis), a stub image captcha that counts its calls, and a risk stub
// whose decision the test sets.
type powWorld struct {
	c        *Checkout
	pow      *captcha.PoW
	st       *memStock
	decision risk.Action
	images   int // image captcha verifications
}

func newPoWWorld(t *testing.T) *powWorld {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	clk := testenv.NewEpochClock(0)
	pow, err := captcha.NewPoW(rdb, []captcha.PoWKey{{ID: "k1", Secret: []byte("0123456789abcdef0123")}},
		captcha.PoWConfig{MaxNumber: 50, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	w := &powWorld{pow: pow, st: newMemStock(10)}
	cfg := baseConfig(w.st, &memSubmitter{stock: w.st})
	cfg.Now = clk.Now
	cfg.PoW = pow.Verify
	cfg.Risk = func(context.Context, risk.Subject) (risk.Decision, error) {
		return risk.Decision{Action: w.decision}, nil
	}
	cfg.Captcha = func(_ context.Context, p captcha.VerifyParams) error {
		w.images++
		if p.Answer != "right" {
			return captcha.ErrWrongAnswer
		}
		return nil
	}
	if w.c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *powWorld) solve(t *testing.T, user string) string {
	t.Helper()
	ch, err := w.pow.Generate(captcha.GenerateParams{User: user})
	if err != nil {
		t.Fatal(err)
	}
	sol, err := captcha.Solve(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	return sol
}

// TestPoWStep: with Config.PoW every attempt needs a proof of work, once;
// the image captcha is not asked of an attempt risk allowed.
func TestPoWStep(t *testing.T) {
	ctx := context.Background()
	w := newPoWWorld(t)
	if out := w.c.Buy(ctx, &Attempt{User: "u1", RequestID: "r1"}); out.Kind != Refused || out.Reason != BadCaptcha {
		t.Fatalf("no proof of work: %+v, want refused captcha", out)
	}
	sol := w.solve(t, "u1")
	if out := w.c.Buy(ctx, &Attempt{User: "u2", RequestID: "r1", PoW: sol}); out.Kind != Refused || out.Reason != BadCaptcha {
		t.Fatalf("another user's proof of work: %+v, want refused captcha", out)
	}
	if out := w.c.Buy(ctx, &Attempt{User: "u1", RequestID: "r1", PoW: "Zm9v"}); out.Kind != Refused || out.Reason != BadCaptcha {
		t.Fatalf("forged proof of work: %+v, want refused captcha", out)
	}
	if out := w.c.Buy(ctx, &Attempt{User: "u1", RequestID: "r1", PoW: sol}); out.Kind != Accepted {
		t.Fatalf("solved: %+v, want accepted", out)
	}
	if out := w.c.Buy(ctx, &Attempt{User: "u1", RequestID: "r2", PoW: sol}); out.Kind != Refused || out.Reason != BadCaptcha {
		t.Fatalf("replayed proof of work: %+v, want refused captcha", out)
	}
	if w.images != 0 {
		t.Fatalf("image captcha verified %d times for allowed attempts, want 0", w.images)
	}
	if w.st.remaining != 9 {
		t.Fatalf("remaining %d, want 9", w.st.remaining)
	}
}

// TestPoWChallengeAsksCaptcha: an attempt risk challenges needs the image
// captcha too, and is told so (CaptchaRequired); Attempt.Risk reports the
// decision to a later step.
func TestPoWChallengeAsksCaptcha(t *testing.T) {
	ctx := context.Background()
	w := newPoWWorld(t)
	w.decision = risk.Challenge
	a := &Attempt{User: "u1", RequestID: "r1", PoW: w.solve(t, "u1")}
	out := w.c.Buy(ctx, a)
	if out.Kind != Refused || out.Reason != BadCaptcha || out.Message != CaptchaRequired {
		t.Fatalf("challenged without captcha: %+v, want %q", out, CaptchaRequired)
	}
	if a.Risk().Action != risk.Challenge {
		t.Fatalf("Attempt.Risk = %v, want challenge", a.Risk().Action)
	}
	wrong := &Attempt{User: "u1", RequestID: "r1", PoW: w.solve(t, "u1"), CaptchaID: poolToken, Captcha: "wrong"}
	if out := w.c.Buy(ctx, wrong); out.Kind != Refused || out.Reason != BadCaptcha || out.Message == CaptchaRequired {
		t.Fatalf("challenged, wrong captcha: %+v, want refused as wrong", out)
	}
	right := &Attempt{User: "u1", RequestID: "r1", PoW: w.solve(t, "u1"), CaptchaID: poolToken, Captcha: "right"}
	if out := w.c.Buy(ctx, right); out.Kind != Accepted {
		t.Fatalf("challenged, captcha solved: %+v, want accepted", out)
	}
	if w.images != 2 || w.st.remaining != 9 {
		t.Fatalf("images %d remaining %d, want 2 and 9", w.images, w.st.remaining)
	}
}
