package checkout

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/internal/fused"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// The fused admission: the Redis checks before Reserve (risk, the per-user
// window, the replay lookup, captcha, the access token) run as one script,
// one round trip, where today each is its own. Each block offers its check
// in package fused's form, built from its own Lua; the script runs them in
// the chain's order and stops at the first that does not pass, so a later
// check's side effect (a window slot, a captcha, a token) happens only
// where the chain would have reached it. The steps then run as always, each
// taking its block's answer from the script's reply instead of calling the
// block: the decisions, the undo, the breaker and the outcomes are the
// steps' own. When the script fails (Redis down, a timeout, the breaker
// open), nothing is taken from it and each step calls its block as before,
// with that block's failure policy; a check that fails inside the script
// (a key of the wrong type) ends the script there, and its step and the
// ones after it call their blocks. Risk's part (Config.RiskCheck) catches
// its rules' failures itself and applies the checker's failure policy in
// the script, as risk.Checker.Check does.

// fuseRole is what a default step is to the fused admission.
type fuseRole uint8

const (
	fuseNone  fuseRole = iota
	fuseCheck          // a Redis check with a fused form
	fuseSkip           // resubmit: does nothing after a replay lookup that passed
	fusePure           // link: no I/O, checked before the script; a refusal ends the script before it
)

// The fused forms checkout recognises on Config.Tokens (*token.Pool),
// Config.PerUser (*redislimit.SlidingWindow) and Config.Stock
// (*stock.Deductor); risk's and captcha's are Config.RiskCheck and
// Config.CaptchaCheck.
type (
	tokenChecker interface {
		ConsumeCheck(token.ConsumeParams) (fused.Check[struct{}], error)
	}
	windowChecker interface {
		AllowCheck(key string) fused.Check[limiter.Result]
	}
	lookupChecker interface {
		LookupCheck(activity, reservationID string) (fused.Check[stock.Reservation], error)
	}
)

// fusing reports whether cfg can run the fused admission: a Redis client
// that is not a Cluster (or Ring) client, and the switch not turned off.
func fusing(cfg *Config) bool {
	switch cfg.Redis.(type) {
	case nil, *redis.ClusterClient, *redis.Ring:
		return false
	}
	return !cfg.Sequential
}

// part is one check of a fused script.
type part struct {
	step   string
	lua    string
	keys   []string
	args   []any
	pass   string
	decode func(ctx context.Context, reply any) (any, error)
}

func partOf[T any](step string, ch fused.Check[T]) part {
	return part{step: step, lua: ch.Lua, keys: ch.Keys, args: ch.Args, pass: ch.Pass,
		decode: func(ctx context.Context, reply any) (any, error) { return ch.Decode(ctx, reply) }}
}

// part is the fused form of step s for a, or false when it has none.
func (c *Checkout) part(s *Step, a *Attempt) (part, bool) {
	cfg := &c.cfg
	var ch part
	var err error
	switch s.Name {
	case StepRisk:
		var f fused.Check[risk.Decision]
		f, err = cfg.RiskCheck(riskSubject(a))
		ch = partOf(s.Name, f)
	case StepUserLimit:
		ch = partOf(s.Name, cfg.PerUser.(windowChecker).AllowCheck(a.User))
	case StepReplay:
		if a.reservation == "" {
			return part{}, false
		}
		var f fused.Check[stock.Reservation]
		f, err = cfg.Stock.(lookupChecker).LookupCheck(c.ledger(a), entry(a))
		ch = partOf(s.Name, f)
	case StepCaptcha:
		var f fused.Check[struct{}]
		f, err = cfg.CaptchaCheck(captchaParams(a))
		ch = partOf(s.Name, f)
	case StepToken:
		var f fused.Check[struct{}]
		f, err = cfg.Tokens.(tokenChecker).ConsumeCheck(c.tokenParams(a))
		ch = partOf(s.Name, f)
	default:
		return part{}, false
	}
	return ch, err == nil
}

// prefetch runs the fused script of the checks from step i on, and leaves
// their replies on a for the steps to decode. It ends the script before a
// step with no fused form, before a pure step that would refuse, and
// before any other step.
func (c *Checkout) prefetch(ctx context.Context, i int, a *Attempt) {
	var parts []part
	guarded, replay := false, false
	j := i
loop:
	for ; j < len(c.steps); j++ {
		s := &c.steps[j]
		switch s.fuse {
		case fuseCheck:
			p, ok := c.part(s, a)
			if !ok {
				if s.Name == StepReplay && a.reservation == "" {
					continue // nothing to look up: the step does nothing
				}
				break loop
			}
			parts = append(parts, p)
			guarded = guarded || s.Guarded
			replay = replay || s.Name == StepReplay
		case fuseSkip:
		case fusePure:
			if out := c.run(ctx, s, a); out.Kind != 0 {
				break loop
			}
		default:
			break loop
		}
	}
	a.fusedTo = j
	if len(parts) < 2 { // one check costs one round trip either way
		return
	}
	keys, args, script := c.script(parts)
	var reply []any
	call := func(ctx context.Context) error {
		v, err := script.Run(ctx, c.cfg.Redis, keys, args...).Slice()
		reply = v
		return err
	}
	var err error
	if guarded && c.cfg.Breaker != nil {
		err = c.cfg.Breaker(ctx, call)
	} else {
		err = call(ctx)
	}
	if err != nil || len(reply) < 1 {
		return // each step calls its block, with its own failure policy
	}
	if a.replies == nil {
		a.replies = make(map[string]func(context.Context) (any, error), len(parts))
	}
	for k, p := range parts {
		if k+1 >= len(reply) {
			break
		}
		v, p := reply[k+1], p
		a.replies[p.step] = func(ctx context.Context) (any, error) { return p.decode(ctx, v) }
	}
}

func (c *Checkout) script(parts []part) ([]string, []any, *redis.Script) {
	var b strings.Builder
	var keys []string
	var args []any
	b.WriteString("local function sl(t, i, n) local o = {} for j = 1, n do o[j] = t[i + j] end return o end\nlocal out = {0}\nlocal ok, r\n")
	for k, p := range parts {
		n := strconv.Itoa(k + 1)
		b.WriteString("local function c" + n + "(KEYS, ARGV)\n" + p.lua + "\nend\n")
		b.WriteString("ok, r = pcall(c" + n + ", sl(KEYS, " + strconv.Itoa(len(keys)) + ", " + strconv.Itoa(len(p.keys)) +
			"), sl(ARGV, " + strconv.Itoa(len(args)) + ", " + strconv.Itoa(len(p.args)) + "))\n")
		b.WriteString("if not ok then out[1] = -" + n + " return out end\nif r == nil then r = false end\nout[" +
			strconv.Itoa(k+2) + "] = r\nif not (" + p.pass + ") then out[1] = " + n + " return out end\n")
		keys = append(keys, p.keys...)
		args = append(args, p.args...)
	}
	b.WriteString("return out\n")
	src := b.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.scripts[src]
	if !ok {
		if c.scripts == nil {
			c.scripts = map[string]*redis.Script{}
		}
		s = redis.NewScript(src)
		c.scripts[src] = s
	}
	return keys, args, s
}

// prefetched is step's answer from the fused script, decoded, or call's
// when the script did not reach it.
func prefetched[T any](ctx context.Context, a *Attempt, step string, call func() (T, error)) (T, error) {
	f := a.replies[step]
	if f == nil {
		return call()
	}
	delete(a.replies, step)
	v, err := f(ctx)
	t, _ := v.(T)
	return t, err
}
