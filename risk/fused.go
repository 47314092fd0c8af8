package risk

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckillkit/seckill/internal/fused"
)

// CheckCheck is [Checker.Check] of s as a check a composer runs in one
// script with other blocks' checks (package fused): each rule runs its own
// Lua (the Blacklist's GETs as one Lua read, Behaviour's and
// DeviceBinder's own scripts), in the checker's order, and the script
// stops at the first Deny, as Check does. Decode runs Check's aggregation
// on the rules' replies — the failure policy, dry run, WithOnDecision,
// WithOnFailure, the observer, the Behaviour's automatic ban — so it
// decides exactly what Check decides on the same Redis state.
//
// A rule that fails inside the script (a key of the wrong type) meets the
// failure policy as in Check: FailOpen skips it, FailChallenge challenges,
// FailClosed ends the script there and Decode returns the error.
//
// The reply's first element is the Action Check returns (Allow 0,
// Challenge 1, Deny 2; 3 when Check returns an error). The check passes
// unless the decision is a Deny or an error: a Challenge passes, and what
// it asks of the buyer is the caller's (package checkout leaves it to its
// captcha step); a composer that stops at a Challenge passes only r[1] == 0.
//
// Only a checker whose rules are all [Blacklist], [Behaviour] or
// [DeviceBinder] values has a fused form; with any other rule (the
// attestation rule of [NewAttestationRule] too: its verdict is not in
// Redis) CheckCheck returns an error, and the caller runs Check. The
// network bans, the missing-device policy and the automatic device and
// network bans are part of the fused form.
func (c *Checker) CheckCheck(s Subject) (fused.Check[Decision], error) {
	if c.nofuse != nil {
		return fused.Check[Decision]{}, c.nofuse
	}
	var start time.Time // measured only for the observer
	if c.o.observer != nil {
		start = time.Now()
	}
	parts := make([]rulePart, len(c.rules))
	var shape strings.Builder
	nk, na := 0, 0
	for i, r := range c.rules {
		p := partOf(r, s)
		parts[i] = p
		if p.lua == "" {
			shape.WriteString("s" + strconv.Itoa(int(p.dec.Action)))
		} else {
			shape.WriteString("l" + strconv.Itoa(len(p.keys)) + "." + strconv.Itoa(len(p.args)))
		}
		nk += len(p.keys)
		na += len(p.args)
	}
	keys := make([]string, 0, nk)
	args := make([]any, 0, na)
	for _, p := range parts {
		keys = append(keys, p.keys...)
		args = append(args, p.args...)
	}
	return fused.Check[Decision]{Lua: c.fusedLua(shape.String(), parts), Keys: keys, Args: args, Pass: "r[1] < 2",
		Decode: func(ctx context.Context, v any) (Decision, error) {
			reply, _ := v.([]any)
			return c.decide(ctx, s, start, func(i int, r Rule) (Decision, error) {
				p := parts[i]
				switch {
				case p.lua == "":
					return p.dec, nil
				case i+1 >= len(reply):
					return Decision{}, fmt.Errorf("risk: %s: %w: %v", r.Name(), ErrBadReply, v)
				}
				if m, ok := reply[i+1].(string); ok { // the rule's Lua failed: "E" and its error
					return Decision{}, fmt.Errorf("risk: %s: %s", r.Name(), strings.TrimPrefix(m, "E"))
				}
				return p.decode(ctx, reply[i+1])
			})
		}}, nil
}

// rulePart is one rule of a fused check.
type rulePart struct {
	lua  string // the rule's Lua; "" when it decides without Redis: dec
	keys []string
	args []any
	act  string // a Lua expression over r, the rule's reply: its Action (0, 1, 2)
	dec  Decision
	// decode is the rule's Check after its script, on the script's reply.
	decode func(ctx context.Context, reply any) (Decision, error)
}

// noFusedForm is why a checker of rules has no fused form, or nil. Only
// the built-in rules themselves have one (a type embedding one may have
// its own Check).
func noFusedForm(rules []Rule) error {
	for _, r := range rules {
		switch r.(type) {
		case *Blacklist, *Behaviour, *DeviceBinder:
		default:
			return fmt.Errorf("risk: rule %s has no fused form: run Check", r.Name())
		}
	}
	return nil
}

func partOf(r Rule, s Subject) rulePart {
	switch r := r.(type) {
	case *Blacklist:
		return r.part(s)
	case *Behaviour:
		return r.part(s)
	case *DeviceBinder:
		return r.part(s)
	}
	panic("risk: no fused form") // noFusedForm let only these through
}

// fusedLua is the checker's script for parts, of the given shape (which
// rules run Lua with how many keys and args, which decided without Redis
// and how).
func (c *Checker) fusedLua(shape string, parts []rulePart) string {
	if v, ok := c.luas.Load(shape); ok {
		return v.(string)
	}
	fail := map[FailurePolicy]string{FailOpen: "0", FailChallenge: "1"}[c.o.failure]
	if fail == "" { // FailClosed: an error ends the check (in dry run, a would-be Deny)
		fail = "3"
	}
	final := func(a string) string {
		if c.o.dryRun {
			return "0"
		}
		return a
	}
	var b strings.Builder
	b.WriteString("local function sub(t, i, n) local o = {} for j = 1, n do o[j] = t[i + j] end return o end\n" +
		"local function emsg(e) if type(e) == 'table' then e = e.err or e.message end return 'E' .. tostring(e) end\n" +
		"local out, act, ok, r, a = {0}, 0\n")
	nk, na := 0, 0
	for i, p := range parts {
		slot := "out[" + strconv.Itoa(i+2) + "]"
		if p.lua == "" {
			b.WriteString(slot + " = 0 a = " + strconv.Itoa(int(p.dec.Action)) + "\n")
		} else {
			f := "f" + strconv.Itoa(i+1)
			b.WriteString("local function " + f + "(KEYS, ARGV)\n" + p.lua + "\nend\n")
			b.WriteString("ok, r = pcall(" + f + ", sub(KEYS, " + strconv.Itoa(nk) + ", " + strconv.Itoa(len(p.keys)) +
				"), sub(ARGV, " + strconv.Itoa(na) + ", " + strconv.Itoa(len(p.args)) + "))\n")
			b.WriteString("if ok then " + slot + " = r a = " + p.act + " else " + slot + " = emsg(r) a = " + fail + " end\n")
		}
		b.WriteString("if a >= 2 then out[1] = " + final("a") + " return out end\nif a > act then act = a end\n")
		nk += len(p.keys)
		na += len(p.args)
	}
	b.WriteString("out[1] = " + final("act") + "\nreturn out\n")
	v, _ := c.luas.LoadOrStore(shape, b.String())
	return v.(string)
}

// int64s is an array reply of integers.
func int64s(v any, n int) ([]int64, bool) {
	arr, ok := v.([]any)
	if !ok || len(arr) != n {
		return nil, false
	}
	out := make([]int64, n)
	for i, x := range arr {
		if out[i], ok = x.(int64); !ok {
			return nil, false
		}
	}
	return out, true
}

// blacklistAct is the Blacklist's action over its n ban keys read: deny
// if any of r[1..n] exists.
var blacklistAct = func() (acts [maxBanItems + 1]string) {
	for n := 1; n <= maxBanItems; n++ {
		terms := make([]string, n)
		for i := range terms {
			terms[i] = "r[" + strconv.Itoa(i+1) + "]"
		}
		acts[n] = "((" + strings.Join(terms, " or ") + ") and 2 or 0)"
	}
	return acts
}()

// part is Check of s as a fused part: the ban keys read in one Lua call.
func (b *Blacklist) part(s Subject) rulePart {
	if d, bad := invalidSubject(s, true, true); bad {
		return rulePart{dec: d}
	}
	items, n := b.banItems(s)
	if n == 0 {
		return rulePart{}
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = banKey(b.o.prefix, items[i].kind, items[i].id)
	}
	return rulePart{lua: blacklistCheckSrc, keys: keys, act: blacklistAct[n],
		decode: func(_ context.Context, v any) (Decision, error) {
			arr, ok := v.([]any)
			if !ok || len(arr) != n {
				return Decision{}, fmt.Errorf("risk: blacklist check: %w: %v", ErrBadReply, v)
			}
			var vals [maxBanItems]string
			var found [maxBanItems]bool
			for i, x := range arr {
				switch x := x.(type) {
				case nil:
				case string:
					vals[i], found[i] = x, true
				default:
					return Decision{}, fmt.Errorf("risk: blacklist check: %w: %v", ErrBadReply, v)
				}
			}
			return b.decide(items[:n], vals[:n], found[:n]), nil
		}}
}

// part is Check of s as a fused part: behaviour.lua, then Record's
// thresholds and automatic ban on its reply.
func (b *Behaviour) part(s Subject) rulePart {
	if s.UserID == "" {
		return rulePart{}
	}
	if d, bad := invalidSubject(s, true, false); bad {
		return rulePart{dec: d}
	}
	deny := strconv.FormatInt(b.deny, 10)
	act := "(r[1] > " + deny + " and 2 or 0)"
	if b.flag < b.deny && b.o.flagAction == Challenge {
		act = "(r[1] > " + deny + " and 2 or r[1] > " + strconv.FormatInt(b.flag, 10) + " and 1 or 0)"
	}
	return rulePart{lua: behaviourSrc, keys: []string{behaviourKey(b.o.prefix, s.UserID)}, args: b.args(), act: act,
		decode: func(ctx context.Context, v any) (Decision, error) {
			res, ok := int64s(v, 3)
			if !ok {
				return b.decide(ctx, s, BehaviourResult{}, fmt.Errorf("risk: behaviour: %w: %v", ErrBadReply, v))
			}
			r, err := b.result(ctx, s, res)
			return b.decide(ctx, s, r, err)
		}}
}

// part is Check of s as a fused part: device_bind.lua.
func (d *DeviceBinder) part(s Subject) rulePart {
	if dec, done := d.precheck(s); done {
		return rulePart{dec: dec}
	}
	return rulePart{lua: deviceBindSrc, keys: []string{deviceKey(d.o.prefix, s.DeviceID)}, args: d.args(s.UserID),
		act: "(r[1] == 0 and " + strconv.Itoa(int(d.o.deviceConflict)) + " or 0)",
		decode: func(ctx context.Context, v any) (Decision, error) {
			arr, _ := v.([]any)
			bnd, err := bindReply(arr)
			if err != nil {
				return Decision{}, err
			}
			return d.decide(ctx, s, bnd), nil
		}}
}
