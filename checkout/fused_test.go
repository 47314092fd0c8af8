package checkout

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/captcha/captchatest"
	"github.com/seckillkit/seckill/internal/fused"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter/redislimit"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

const fuseAct = "sale-f"

// fuseWorld is the real composition over one miniredis: risk (blacklist,
// behaviour with auto-ban, device binding), the stock ledger, the token
// pool, the captcha store, a per-user sliding window.
type fuseWorld struct {
	rdb      *redis.Client
	mr       *miniredis.Miniredis
	d        *stock.Deductor
	pool     *token.Pool
	captchas *captcha.Store
	window   *redislimit.SlidingWindow
	bl       *risk.Blacklist
	beh      *risk.Behaviour
	dev      *risk.DeviceBinder
	co       *Checkout
}

// fuseSetup is how a fuseWorld is built.
type fuseSetup struct {
	sequential bool
	risk       []risk.CheckerOption // the risk checker's options
	edit       func(*Config)        // a last change to the config
	hooks      []redis.Hook
	variants   bool // the sale has variants M and L (1 unit each) instead of 2 units of its own
}

func newFuseWorld(t *testing.T, clk *testenv.Clock, fs fuseSetup) *fuseWorld {
	t.Helper()
	ctx := context.Background()
	w := &fuseWorld{}
	w.rdb, w.mr = testenv.Miniredis(t)
	w.mr.SetTime(clk.Now())
	var err error
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	w.d, err = stock.New(w.rdb, stock.WithClock(clk))
	must(err)
	if fs.variants {
		_, err = w.d.Load(ctx, stock.Activity{ID: fuseAct, PerUserLimit: 1, Variants: []stock.Variant{{ID: "M", Stock: 1}, {ID: "L", Stock: 1}}})
	} else {
		_, err = w.d.Load(ctx, stock.Activity{ID: fuseAct, Stock: 2, PerUserLimit: 1})
	}
	must(err)
	w.pool, err = token.NewPool(w.rdb, token.WithClock(clk), token.WithBindTTL(time.Hour))
	must(err)
	_, err = w.pool.Issue(ctx, fuseAct, 8)
	must(err)
	w.captchas, err = captcha.New(w.rdb, captchatest.Fixed("6*7?", "42"), captcha.WithClock(clk), captcha.WithTTL(time.Hour))
	must(err)
	w.window, err = redislimit.NewSlidingWindow(w.rdb, 3, time.Minute)
	must(err)
	w.bl, err = risk.NewBlacklist(w.rdb, risk.BlacklistConfig{Clock: clk})
	must(err)
	w.beh, err = risk.NewBehaviour(w.rdb, risk.BehaviourConfig{Window: time.Minute, FlagAt: 2, DenyAt: 3, AutoBlacklist: w.bl})
	must(err)
	w.dev, err = risk.NewDeviceBinder(w.rdb, risk.DeviceBinderConfig{})
	must(err)
	checker, err := risk.NewChecker([]risk.Rule{w.bl, w.beh, w.dev}, fs.risk...)
	must(err)
	for _, h := range fs.hooks {
		w.rdb.AddHook(h)
	}
	cfg := Config{Activity: fuseAct, Stock: w.d, Submitter: &memSubmitter{}, Results: noResult, Node: "f1", Now: clk.Now,
		Risk: checker.Check, RiskCheck: checker.CheckCheck,
		Tokens: w.pool, Captcha: w.captchas.Verify, CaptchaCheck: w.captchas.VerifyCheck, PerUser: w.window,
		Redis: w.rdb, Sequential: fs.sequential}
	if fs.edit != nil {
		fs.edit(&cfg)
	}
	w.co, err = New(cfg)
	must(err)
	return w
}

// nonce is the random part of a behaviour log's member: it differs
// between two worlds by design.
var nonce = regexp.MustCompile(`-[0-9a-f]{12}\.[0-9a-z]+`)

// dump is every key of r with its type, value and TTL, sorted.
func dump(t *testing.T, r *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	keys, err := r.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		typ := r.Type(ctx, k).Val()
		var v any
		switch typ {
		case "string":
			v = r.Get(ctx, k).Val()
		case "hash":
			h := r.HGetAll(ctx, k).Val()
			f := make([]string, 0, len(h))
			for x, y := range h {
				f = append(f, x+"="+y)
			}
			slices.Sort(f)
			v = f
		case "zset":
			v = nonce.ReplaceAllString(fmt.Sprint(r.ZRangeWithScores(ctx, k, 0, -1).Val()), "-N")
		case "list":
			v = r.LRange(ctx, k, 0, -1).Val()
		case "set":
			s := r.SMembers(ctx, k).Val()
			slices.Sort(s)
			v = s
		}
		fmt.Fprintf(&b, "%s %s %v ttl=%v\n", k, typ, v, r.PTTL(ctx, k).Val())
	}
	return b.String()
}

// copyState makes to's keys from's.
func copyState(t *testing.T, from, to *redis.Client) {
	t.Helper()
	ctx := context.Background()
	to.FlushAll(ctx)
	for _, k := range from.Keys(ctx, "*").Val() {
		switch from.Type(ctx, k).Val() {
		case "string":
			to.Set(ctx, k, from.Get(ctx, k).Val(), 0)
		case "hash":
			for f, v := range from.HGetAll(ctx, k).Val() {
				to.HSet(ctx, k, f, v)
			}
		case "zset":
			for _, z := range from.ZRangeWithScores(ctx, k, 0, -1).Val() {
				to.ZAdd(ctx, k, z)
			}
		case "list":
			for _, v := range from.LRange(ctx, k, 0, -1).Val() {
				to.RPush(ctx, k, v)
			}
		case "set":
			for _, v := range from.SMembers(ctx, k).Val() {
				to.SAdd(ctx, k, v)
			}
		default:
			t.Fatalf("copy %s: type %s", k, from.Type(ctx, k).Val())
		}
		if ttl := from.PTTL(ctx, k).Val(); ttl > 0 {
			to.PExpire(ctx, k, ttl)
		}
	}
}

// failFirst fails the first command whose name is in names, once.
type failFirst struct {
	names []string
	done  bool
}

func (f *failFirst) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *failFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !f.done && slices.Contains(f.names, cmd.Name()) {
			f.done = true
			cmd.SetErr(errors.New("injected: redis down"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (f *failFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// counter counts what reaches Redis: commands and pipelines.
type counter struct{ cmds, pipes int }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.cmds++; return next(ctx, cmd) }
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.pipes++; return next(ctx, cmds) }
}
func (c *counter) trips() int { return c.cmds + c.pipes }

// fuseFixture is what a case of TestFusedEquivalence prepares on.
type fuseFixture struct {
	w   *fuseWorld // the state is made here (world A), then copied to B
	tok string     // u1's access token
	cap string     // u1's captcha
}

// fuseCase is one attempt TestFusedEquivalence runs on both chains.
type fuseCase struct {
	name    string
	prepare func(t *testing.T, f *fuseFixture, a *Attempt) // on world A, before the copy
	fault   []string                                       // commands that fail once on the fused side
	risk    []risk.CheckerOption                           // the risk checker's options on both sides
	variant bool                                           // the sale has variants (fuseSetup.variants)
}

// riskDenials are the cases risk refuses.
var riskDenials = []string{"risk: user banned", "risk: ip banned", "risk: ip network banned", "risk: device banned", "risk: too frequent, auto-ban",
	"risk: device shared", "risk: ban key of the wrong type"}

func fuseCases() []fuseCase {
	ctx := context.Background()
	ban := func(kind risk.Kind, id string) func(t *testing.T, f *fuseFixture, a *Attempt) {
		return func(t *testing.T, f *fuseFixture, _ *Attempt) {
			if _, err := f.w.bl.Add(ctx, kind, id, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	record := func(n int) func(t *testing.T, f *fuseFixture, a *Attempt) {
		return func(t *testing.T, f *fuseFixture, a *Attempt) {
			for range n {
				if _, err := f.w.beh.Record(ctx, a.User); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	wrongType := func(pattern string) func(t *testing.T, f *fuseFixture, a *Attempt) {
		return func(t *testing.T, f *fuseFixture, _ *Attempt) {
			f.w.rdb.HSet(ctx, pattern, "x", "1")
		}
	}
	return []fuseCase{
		{name: "accepted"},
		{name: "accepted with request id", prepare: func(_ *testing.T, _ *fuseFixture, a *Attempt) { a.RequestID = "req-1" }},
		{name: "window exceeded", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			for range 3 {
				if _, err := f.w.window.AllowN(ctx, a.User, 1); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "replay of a known request", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			a.RequestID = "req-2"
			id, _ := ReservationID(a.User, a.RequestID)
			if _, err := f.w.d.Reserve(ctx, stock.Request{Activity: fuseAct, User: a.User, Qty: 1, ReservationID: id}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "replay of a released request", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			a.RequestID = "req-3"
			id, _ := ReservationID(a.User, a.RequestID)
			if _, err := f.w.d.Reserve(ctx, stock.Request{Activity: fuseAct, User: a.User, Qty: 1, ReservationID: id}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.w.d.Release(ctx, fuseAct, id); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "captcha wrong", prepare: func(_ *testing.T, _ *fuseFixture, a *Attempt) { a.Captcha = "41" }},
		{name: "captcha unknown or expired", prepare: func(_ *testing.T, _ *fuseFixture, a *Attempt) { a.CaptchaID = "AAAAAAAAAAAAAAAAAAAAAA" }},
		{name: "captcha used", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			if err := f.w.captchas.Verify(ctx, captcha.VerifyParams{ID: a.CaptchaID, Answer: "42", User: a.User}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "captcha of another user", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			ch, err := f.w.captchas.Generate(ctx, captcha.GenerateParams{User: "u2"})
			if err != nil {
				t.Fatal(err)
			}
			a.CaptchaID = ch.ID
		}},
		{name: "token missing", prepare: func(_ *testing.T, _ *fuseFixture, a *Attempt) { a.Token = poolToken }},
		{name: "token used, nothing held", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			if err := f.w.pool.Consume(ctx, token.ConsumeParams{Activity: fuseAct, User: a.User, Token: a.Token}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "token used while holding", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			if err := f.w.pool.Consume(ctx, token.ConsumeParams{Activity: fuseAct, User: a.User, Token: a.Token}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.w.d.Reserve(ctx, stock.Request{Activity: fuseAct, User: a.User, Qty: 1, ReservationID: "rprev"}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "token of another user", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			g, err := f.w.pool.Take(ctx, fuseAct, "u2")
			if err != nil {
				t.Fatal(err)
			}
			a.Token = g.Token
		}},
		{name: "sold out", prepare: func(t *testing.T, f *fuseFixture, _ *Attempt) {
			for _, u := range []string{"u7", "u8"} {
				if _, err := f.w.d.Reserve(ctx, stock.Request{Activity: fuseAct, User: u, Qty: 1, ReservationID: "r" + u}); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "per-user limit", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			if _, err := f.w.d.Reserve(ctx, stock.Request{Activity: fuseAct, User: a.User, Qty: 1, ReservationID: "rmine"}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "redis down at the fused call", fault: []string{"evalsha", "eval"}},
		{name: "captcha key of the wrong type", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			// the captcha's key, found as the only key holding its ID
			for _, k := range f.w.rdb.Keys(ctx, "*"+a.CaptchaID+"*").Val() {
				f.w.rdb.Del(ctx, k)
				f.w.rdb.Set(ctx, k, "x", 0)
			}
		}},
		{name: "window key of the wrong type", prepare: func(t *testing.T, f *fuseFixture, a *Attempt) {
			if _, err := f.w.window.AllowN(ctx, a.User, 1); err != nil {
				t.Fatal(err)
			}
			for _, k := range f.w.rdb.Keys(ctx, "*sw:*"+a.User+"*").Val() {
				f.w.rdb.Del(ctx, k)
				f.w.rdb.Set(ctx, k, "x", 0)
			}
		}},
		{name: "risk: user banned", prepare: ban(risk.KindUser, "u1")},
		{name: "risk: ip banned", prepare: ban(risk.KindIP, "10.0.0.1")},
		{name: "risk: ip network banned", prepare: ban(risk.KindIP, "10.0.0.0/24")},
		{name: "risk: device banned", prepare: ban(risk.KindDevice, "dev1")},
		{name: "risk: challenge (suspicious rate), left to the captcha", prepare: record(2)},
		{name: "risk: too frequent, auto-ban", prepare: record(3)},
		{name: "risk: device shared", prepare: func(t *testing.T, f *fuseFixture, _ *Attempt) {
			if _, err := f.w.dev.Bind(ctx, "dev1", "u2"); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "risk: dry run, banned", prepare: ban(risk.KindUser, "u1"), risk: []risk.CheckerOption{risk.WithDryRun(true)}},
		{name: "risk: ban key of the wrong type", prepare: wrongType("seckill:risk:{bl:u:u1}:ban")},
		{name: "risk: ban key of the wrong type, fail challenge", prepare: wrongType("seckill:risk:{bl:u:u1}:ban"),
			risk: []risk.CheckerOption{risk.WithFailurePolicy(risk.FailChallenge)}},
		{name: "risk: device key of the wrong type, fail open", prepare: wrongType("seckill:risk:{d:dev1}:owner"),
			risk: []risk.CheckerOption{risk.WithFailurePolicy(risk.FailOpen)}},
		{name: "risk: redis down at the fused call, fail open", fault: []string{"evalsha", "eval"},
			risk: []risk.CheckerOption{risk.WithFailurePolicy(risk.FailOpen)}},
	}
}

// TestFusedEquivalence runs the sequential chain and the fused one on the
// same attempt against two identical Redis states, over every refusal of
// the fused checks and the faults, and compares the outcomes and the
// states after.
func TestFusedEquivalence(t *testing.T) {
	for _, tc := range fuseCases() {
		t.Run(tc.name, func(t *testing.T) {
			if diff := compareFused(t, tc, nil); diff != "" {
				t.Fatal(diff)
			}
		})
	}
}

// TestFusedEquivalenceSeesRiskDropped: with risk's part dropped from the
// fused script (it answers allow without running a rule), the comparison
// of TestFusedEquivalence fails for every refusal of risk's.
func TestFusedEquivalenceSeesRiskDropped(t *testing.T) {
	drop := func(cfg *Config) {
		cfg.RiskCheck = func(risk.Subject) (fused.Check[risk.Decision], error) {
			return fused.Check[risk.Decision]{Lua: "return {0}", Pass: "true",
				Decode: func(context.Context, any) (risk.Decision, error) { return risk.Decision{}, nil }}, nil
		}
	}
	for _, tc := range fuseCases() {
		if !slices.Contains(riskDenials, tc.name) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			if diff := compareFused(t, tc, drop); diff == "" {
				t.Fatal("the comparison did not see risk dropped")
			}
		})
	}
}

// compareFused runs tc on the sequential chain and on the fused one (its
// config changed by edit) and returns how they differ, or "".
func compareFused(t *testing.T, tc fuseCase, edit func(*Config)) string {
	t.Helper()
	ctx := context.Background()
	clk := testenv.NewEpochClock(0)
	seq := newFuseWorld(t, clk, fuseSetup{sequential: true, risk: tc.risk, variants: tc.variant})
	fault := &failFirst{names: tc.fault}
	fus := newFuseWorld(t, clk, fuseSetup{risk: tc.risk, edit: edit, hooks: []redis.Hook{fault}, variants: tc.variant})
	if seq.co.fuse || !fus.co.fuse {
		t.Fatalf("fuse: sequential %v, fused %v", seq.co.fuse, fus.co.fuse)
	}
	f := &fuseFixture{w: seq}
	g, err := seq.pool.Take(ctx, fuseAct, "u1")
	if err != nil || g.Token == "" {
		t.Fatalf("take: %v %v", g, err)
	}
	ch, err := seq.captchas.Generate(ctx, captcha.GenerateParams{User: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	f.tok, f.cap = g.Token, ch.ID
	a := Attempt{User: "u1", Token: f.tok, CaptchaID: f.cap, Captcha: "42", IP: netip.MustParseAddr("10.0.0.1"), Device: "dev1"}
	if tc.prepare != nil {
		tc.prepare(t, f, &a)
	}
	copyState(t, seq.rdb, fus.rdb)
	if before := dump(t, seq.rdb); before != dump(t, fus.rdb) {
		t.Fatal("the copy differs")
	}
	a1, a2 := a, a
	o1, o2 := seq.co.Buy(ctx, &a1), fus.co.Buy(ctx, &a2)
	if len(tc.fault) > 0 && !fault.done {
		t.Fatal("the fault was not injected")
	}
	if o1.Err != nil || o2.Err != nil { // the errors' texts name the call; compare their presence
		if (o1.Err == nil) != (o2.Err == nil) {
			return fmt.Sprintf("errors: sequential %v, fused %v", o1.Err, o2.Err)
		}
		o1.Err, o2.Err = nil, nil
	}
	if !reflect.DeepEqual(o1, o2) {
		return fmt.Sprintf("outcomes differ:\nsequential %+v\nfused      %+v", o1, o2)
	}
	if s1, s2 := dump(t, seq.rdb), dump(t, fus.rdb); s1 != s2 {
		return fmt.Sprintf("states differ after %+v:\nsequential:\n%s\nfused:\n%s", o1, s1, s2)
	}
	t.Logf("%s: %s %s %s", tc.name, o1.Kind, o1.Step, o1.Reason)
	return ""
}

// TestFusedRoundTrips counts what reaches Redis during one accepted buy
// with risk in the chain: the sequential chain, then the fused one.
func TestFusedRoundTrips(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		sequential bool
		requestID  string
		max        int
	}{
		{"sequential", true, "", 99},
		{"sequential, request id", true, "req-9", 99},
		{"fused", false, "", 2},
		{"fused, request id", false, "req-9", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testenv.NewEpochClock(0)
			n := &counter{}
			w := newFuseWorld(t, clk, fuseSetup{sequential: tc.sequential, hooks: []redis.Hook{n}})
			g, err := w.pool.Take(ctx, fuseAct, "u1")
			if err != nil {
				t.Fatal(err)
			}
			ch, err := w.captchas.Generate(ctx, captcha.GenerateParams{User: "u1"})
			if err != nil {
				t.Fatal(err)
			}
			// one buy first, so the scripts are loaded (EVALSHA, not NOSCRIPT then EVAL)
			g0, _ := w.pool.Take(ctx, fuseAct, "u0")
			ch0, _ := w.captchas.Generate(ctx, captcha.GenerateParams{User: "u0"})
			ip := netip.MustParseAddr("10.0.0.1") // risk runs all three rules: blacklist (user, IP, device), behaviour, device binding
			if out := w.co.Buy(ctx, &Attempt{User: "u0", RequestID: tc.requestID, Token: g0.Token, CaptchaID: ch0.ID, Captcha: "42", IP: ip, Device: "dev0"}); out.Kind != Accepted {
				t.Fatalf("warm-up: %+v", out)
			}
			*n = counter{}
			out := w.co.Buy(ctx, &Attempt{User: "u1", RequestID: tc.requestID, Token: g.Token, CaptchaID: ch.ID, Captcha: "42", IP: ip, Device: "dev1"})
			if out.Kind != Accepted {
				t.Fatalf("%+v", out)
			}
			t.Logf("%s: %d round trips (%d commands, %d pipelines)", tc.name, n.trips(), n.cmds, n.pipes)
			if n.trips() > tc.max {
				t.Fatalf("%d round trips, want <= %d", n.trips(), tc.max)
			}
		})
	}
}

// variantFuseCases are attempts at a variant of a sale with variants: the
// fused script's replay lookup must read the variant's ledger under the
// line's entry, as the sequential chain's Lookup does.
func variantFuseCases() []fuseCase {
	ctx := context.Background()
	reserve := func(variant, req string) func(t *testing.T, f *fuseFixture, a *Attempt) {
		return func(t *testing.T, f *fuseFixture, a *Attempt) {
			id, _ := ReservationID(a.User, req)
			id = withVariant(id, variant)
			res, err := f.w.d.Reserve(ctx, stock.Request{Activity: stock.VariantOf(fuseAct, variant), User: a.User, Qty: 1, ReservationID: entryOf(id, variant)})
			if err != nil || res.Status != stock.Reserved {
				t.Fatalf("reserve: %+v %v", res, err)
			}
		}
	}
	attempt := func(variant, req string, then func(t *testing.T, f *fuseFixture, a *Attempt)) func(t *testing.T, f *fuseFixture, a *Attempt) {
		return func(t *testing.T, f *fuseFixture, a *Attempt) {
			a.Variant, a.RequestID = variant, req
			if then != nil {
				then(t, f, a)
			}
		}
	}
	return []fuseCase{
		{name: "variant: accepted", variant: true, prepare: attempt("M", "req-1", nil)},
		{name: "variant: accepted, no request id", variant: true, prepare: attempt("M", "", nil)},
		{name: "variant: replay of a held reservation", variant: true, prepare: attempt("M", "req-1", reserve("M", "req-1"))},
		{name: "variant: same request id, another variant", variant: true, prepare: attempt("L", "req-1", reserve("M", "req-1"))},
		{name: "variant: unknown", variant: true, prepare: attempt("XL", "req-1", nil)},
		{name: "variant: sold out", variant: true, prepare: attempt("M", "req-2", func(t *testing.T, f *fuseFixture, _ *Attempt) {
			if res, err := f.w.d.Reserve(ctx, stock.Request{Activity: stock.VariantOf(fuseAct, "M"), User: "u9", Qty: 1, ReservationID: "other"}); err != nil || res.Status != stock.Reserved {
				t.Fatalf("reserve: %+v %v", res, err)
			}
		})},
	}
}

// TestFusedVariant: variant attempts take the fused admission (its replay
// lookup on the variant's ledger) with the same outcomes and Redis states
// as the sequential chain, and the replay is Replayed on both.
func TestFusedVariant(t *testing.T) {
	for _, tc := range variantFuseCases() {
		t.Run(tc.name, func(t *testing.T) {
			if diff := compareFused(t, tc, nil); diff != "" {
				t.Fatal(diff)
			}
		})
	}
}

// TestFusedVariantSeesParentLookup: a fused replay lookup that reads the
// sale's own ledger instead of the variant's (the bug the variant
// addressing prevents) differs from the sequential chain on the replay.
func TestFusedVariantSeesParentLookup(t *testing.T) {
	tc := variantFuseCases()[2]
	parent := func(cfg *Config) { cfg.Stock = parentLookup{cfg.Stock.(*stock.Deductor)} }
	if diff := compareFused(t, tc, parent); diff == "" {
		t.Fatal("the comparison did not see the fused lookup read the sale's ledger")
	}
}

// parentLookup is a Deductor whose fused lookup reads the sale's ledger
// under the attempt's reservation ID, dropping the variant.
type parentLookup struct{ *stock.Deductor }

func (p parentLookup) LookupCheck(_, id string) (fused.Check[stock.Reservation], error) {
	return p.Deductor.LookupCheck(fuseAct, strings.TrimSuffix(id, lineEntry))
}

// TestFusedVariantRoundTrips: an accepted variant buy with risk in the
// chain costs the fused admission's round trips, as a plain one.
func TestFusedVariantRoundTrips(t *testing.T) {
	ctx := context.Background()
	clk := testenv.NewEpochClock(0)
	n := &counter{}
	w := newFuseWorld(t, clk, fuseSetup{hooks: []redis.Hook{n}, variants: true})
	ip := netip.MustParseAddr("10.0.0.1")
	for i, u := range []string{"u0", "u1"} {
		g, err := w.pool.Take(ctx, fuseAct, u)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := w.captchas.Generate(ctx, captcha.GenerateParams{User: u})
		if err != nil {
			t.Fatal(err)
		}
		*n = counter{}
		v := []string{"M", "L"}[i]
		out := w.co.Buy(ctx, &Attempt{User: u, RequestID: "req-9", Variant: v, Token: g.Token, CaptchaID: ch.ID, Captcha: "42", IP: ip, Device: "dev" + u})
		if out.Kind != Accepted {
			t.Fatalf("%s: %+v", u, out)
		}
		t.Logf("%s (%s): %d round trips", u, v, n.trips())
		if i == 1 && n.trips() > 2 {
			t.Fatalf("%d round trips, want <= 2", n.trips())
		}
	}
}

// TestVariantRoundTripsAsPlain: an accepted buy of a variant reaches Redis
// as often as an accepted buy of a plain sale, sequential and fused (after
// one warm-up buy each: scripts loaded, the variant list learnt).
func TestVariantRoundTripsAsPlain(t *testing.T) {
	ctx := context.Background()
	trips := func(sequential, variants bool) int {
		clk := testenv.NewEpochClock(0)
		n := &counter{}
		w := newFuseWorld(t, clk, fuseSetup{sequential: sequential, hooks: []redis.Hook{n}, variants: variants})
		ip := netip.MustParseAddr("10.0.0.1")
		got := 0
		for i, u := range []string{"u0", "u1"} {
			g, err := w.pool.Take(ctx, fuseAct, u)
			if err != nil {
				t.Fatal(err)
			}
			ch, err := w.captchas.Generate(ctx, captcha.GenerateParams{User: u})
			if err != nil {
				t.Fatal(err)
			}
			a := &Attempt{User: u, RequestID: "req-9", Token: g.Token, CaptchaID: ch.ID, Captcha: "42", IP: ip, Device: "dev" + u}
			if variants {
				a.Variant = []string{"M", "L"}[i]
			}
			*n = counter{}
			if out := w.co.Buy(ctx, a); out.Kind != Accepted {
				t.Fatalf("%s: %+v", u, out)
			}
			got = n.trips()
		}
		return got
	}
	for _, sequential := range []bool{true, false} {
		plain, variant := trips(sequential, false), trips(sequential, true)
		t.Logf("sequential %v: plain %d round trips, variant %d", sequential, plain, variant)
		if variant != plain {
			t.Errorf("sequential %v: a variant buy takes %d round trips, a plain one %d", sequential, variant, plain)
		}
	}
}
