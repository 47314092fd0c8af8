package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/observe"
)

// captchaGate adapts captcha.Store to the buy (check) and adds the demo hook.
type captchaGate struct {
	store  *captcha.Store
	rdb    redis.UniversalClient
	prefix string
	demo   bool
	ttl    time.Duration
}

type noImageKey struct{}

// newCaptchaGate builds the Store over a letters generator. In demo mode
// (and only then) the generator is wrapped so every answer is also written
// to Redis under a demo key, readable by /api/demo/captcha/{id} on any
// instance; and a request marked "no image" gets a text-less, image-less
// puzzle, so the load generator doesn't spend the CPU on rendering.
func newCaptchaGate(rdb redis.UniversalClient, cfg Config, obs observe.Observer) (*captchaGate, error) {
	letters, err := captcha.Letters(5, captcha.Style{Width: 240, Height: 80, Noise: 2, Lines: true})
	if err != nil {
		return nil, err
	}
	g := &captchaGate{rdb: rdb, prefix: cfg.KeyPrefix, demo: cfg.Demo, ttl: 5 * time.Minute}
	gen := letters
	if cfg.Demo {
		gen = captcha.GeneratorFunc(func(ctx context.Context, r captcha.Request) (captcha.Puzzle, error) {
			var p captcha.Puzzle
			var err error
			if ctx.Value(noImageKey{}) != nil {
				p = captcha.Puzzle{Answer: randomAnswer(5)}
			} else if p, err = letters.Generate(ctx, r); err != nil {
				return p, err
			}
			if err := rdb.Set(ctx, g.demoKey(r.ID), r.User+"\x00"+p.Answer, g.ttl).Err(); err != nil {
				return captcha.Puzzle{}, err
			}
			return p, nil
		})
	}
	if g.store, err = captcha.New(rdb, gen, captcha.WithKeyPrefix(cfg.KeyPrefix), captcha.WithTTL(g.ttl), captcha.WithMaxAttempts(3), captcha.WithObserver(obs)); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *captchaGate) demoKey(id string) string { return g.prefix + "demo:{c:" + id + "}:answer" }

// New makes a challenge bound to user. image=false is honoured in demo mode only.
func (g *captchaGate) New(ctx context.Context, user string, image bool) (captcha.Challenge, error) {
	if !image && g.demo {
		ctx = context.WithValue(ctx, noImageKey{}, true)
	}
	return g.store.Generate(ctx, captcha.GenerateParams{User: user})
}

// Verify reports whether p.Answer solves p.ID for p.User (once). Refusals
// (captcha.ErrRefused) are false with a nil error; the error is a Redis
// failure.
func (g *captchaGate) Verify(ctx context.Context, p captcha.VerifyParams) (bool, error) {
	err := g.store.Verify(ctx, p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, captcha.ErrRefused):
		return false, nil
	default:
		return false, err
	}
}

// check is Verify in checkout's shape (checkout.Config.Captcha): nil when
// the answer solves the challenge, errWrongCaptcha (a captcha.ErrRefused)
// when it does not, the Redis failure otherwise.
func (g *captchaGate) check(ctx context.Context, p captcha.VerifyParams) error {
	ok, err := g.Verify(ctx, p)
	if err == nil && !ok {
		return errWrongCaptcha
	}
	return err
}

var errWrongCaptcha = fmt.Errorf("%w: wrong or expired answer", captcha.ErrRefused)

// Answer is the DEMO-ONLY hook: the answer of a challenge bound to user.
func (g *captchaGate) Answer(ctx context.Context, id, user string) (string, bool) {
	if !g.demo {
		return "", false
	}
	v, err := g.rdb.Get(ctx, g.demoKey(id)).Result()
	if err != nil {
		return "", false
	}
	for i := 0; i < len(v); i++ {
		if v[i] == 0 {
			return v[i+1:], v[:i] == user
		}
	}
	return "", false
}

// demoAlphabet is the alphabet of captcha.Letters (no look-alikes), so a
// text-less demo answer looks like a drawn one.
const demoAlphabet = "34679ADEFGHJKMNPRTWXYabdefhjkmnprtwxy"

func randomAnswer(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = demoAlphabet[int(b[i])%len(demoAlphabet)]
	}
	return string(b)
}
