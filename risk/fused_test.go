package risk

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/internal/testenv"
)

// fuseRules is the three built-in rules over rdb, as a deployment composes
// them: the blacklist first, the behaviour (auto-ban), the device binding.
type fuseRules struct {
	rdb *redis.Client
	bl  *Blacklist
	beh *Behaviour
	dev *DeviceBinder
}

func newFuseRules(t *testing.T, rdb *redis.Client, clk Clock, flagOnly, challengeConflict bool, more ...func(*BehaviourConfig, *DeviceBinderConfig)) fuseRules {
	t.Helper()
	bl, err := NewBlacklist(rdb, BlacklistConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	bcfg := BehaviourConfig{Window: time.Minute, FlagAt: 2, DenyAt: 3, AutoBlacklist: bl, FlagOnly: flagOnly}
	dcfg := DeviceBinderConfig{ChallengeConflict: challengeConflict}
	for _, f := range more {
		f(&bcfg, &dcfg)
	}
	beh, err := NewBehaviour(rdb, bcfg)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := NewDeviceBinder(rdb, dcfg)
	if err != nil {
		t.Fatal(err)
	}
	return fuseRules{rdb, bl, beh, dev}
}

// runFused runs ch as a composer does (its Lua as a function of its KEYS
// and ARGV) and returns its reply and whether Pass held.
func runFused(ctx context.Context, rdb *redis.Client, lua, pass string, keys []string, args []any) (any, bool, error) {
	src := "local function c(KEYS, ARGV)\n" + lua + "\nend\nlocal r = c(KEYS, ARGV)\nreturn {r, (" + pass + ") and 1 or 0}"
	v, err := redis.NewScript(src).Run(ctx, rdb, keys, args...).Slice()
	if err != nil {
		return nil, false, err
	}
	return v[0], v[1] == int64(1), nil
}

// riskDump is every key of r with its value and TTL, the behaviour log's
// random nonces left out.
func riskDump(t *testing.T, r *redis.Client) string {
	t.Helper()
	keys := r.Keys(bg, "*").Val()
	slices.Sort(keys)
	nonce := regexp.MustCompile(`-[0-9a-f]+\.[0-9a-z]+`)
	var b strings.Builder
	for _, k := range keys {
		var v any
		switch r.Type(bg, k).Val() {
		case "string":
			v = r.Get(bg, k).Val()
		case "zset":
			v = nonce.ReplaceAllString(fmt.Sprint(r.ZRangeWithScores(bg, k, 0, -1).Val()), "-N")
		default:
			v = r.Type(bg, k).Val()
		}
		fmt.Fprintf(&b, "%s %v ttl=%v\n", k, v, r.PTTL(bg, k).Val())
	}
	return b.String()
}

// TestCheckCheckDecodesAsCheck runs Check on one Redis and CheckCheck's
// script and Decode on another with the same state, and compares the
// decisions, the errors, what WithOnDecision and WithOnFailure heard,
// whether the fused check passed, and the states after.
func TestCheckCheckDecodesAsCheck(t *testing.T) {
	user := Subject{UserID: "u1"}
	full := Subject{UserID: "u1", IP: netip.MustParseAddr("10.0.0.1"), DeviceID: "dev1"}
	ban := func(kind Kind, id string) func(t *testing.T, r fuseRules) {
		return func(t *testing.T, r fuseRules) {
			if _, err := r.bl.Add(bg, kind, id, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	record := func(n int) func(t *testing.T, r fuseRules) {
		return func(t *testing.T, r fuseRules) {
			for range n {
				if _, err := r.beh.Record(bg, "u1"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	bind := func(t *testing.T, r fuseRules) {
		if _, err := r.dev.Bind(bg, "dev1", "u2"); err != nil {
			t.Fatal(err)
		}
	}
	wrongType := func(key func(r fuseRules) string) func(t *testing.T, r fuseRules) {
		return func(t *testing.T, r fuseRules) {
			if err := r.rdb.HSet(bg, key(r), "x", "1").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	full6 := Subject{UserID: "u1", IP: netip.MustParseAddr("2001:db8:1:2::99"), DeviceID: "dev1"}
	auto := func(bc *BehaviourConfig, dc *DeviceBinderConfig) {
		bc.AutoBlacklistKinds = []Kind{KindUser, KindIP, KindDevice}
		dc.AutoBlacklist = bc.AutoBlacklist
	}
	require := func(bc *BehaviourConfig, dc *DeviceBinderConfig) { dc.RequireDevice = true }
	flagMissing := func(bc *BehaviourConfig, dc *DeviceBinderConfig) { dc.FlagMissing = true }
	banKeyOf := func(r fuseRules) string { return banKey(r.bl.o.prefix, KindUser, "u1") }
	devKeyOf := func(r fuseRules) string { return deviceKey(r.dev.o.prefix, "dev1") }
	cases := []struct {
		name              string
		s                 Subject
		prepare           func(t *testing.T, r fuseRules)
		opts              []CheckerOption
		flagOnly, conflct bool
		more              []func(*BehaviourConfig, *DeviceBinderConfig)
	}{
		{name: "allow", s: full},
		{name: "user only", s: user},
		{name: "no subject", s: Subject{}},
		{name: "invalid user", s: Subject{UserID: "a b"}},
		{name: "invalid device", s: Subject{UserID: "u1", DeviceID: "d{x}"}},
		{name: "user banned", s: full, prepare: ban(KindUser, "u1")},
		{name: "user banned, user only", s: user, prepare: ban(KindUser, "u1")},
		{name: "ip banned", s: full, prepare: ban(KindIP, "10.0.0.1")},
		{name: "device banned", s: full, prepare: ban(KindDevice, "dev1")},
		{name: "ipv4 network banned", s: full, prepare: ban(KindIP, "10.0.0.0/24")},
		{name: "ipv6 network banned", s: full6, prepare: ban(KindIP, "2001:db8:1:2::/64")},
		{name: "ipv6 other network banned", s: full6, prepare: ban(KindIP, "2001:db8:1:3::/64")},
		{name: "no device: challenge", s: user},
		{name: "no device: required", s: user, more: []func(*BehaviourConfig, *DeviceBinderConfig){require}},
		{name: "no device: flagged", s: user, more: []func(*BehaviourConfig, *DeviceBinderConfig){flagMissing}},
		{name: "no device, banned user", s: user, prepare: ban(KindUser, "u1"), more: []func(*BehaviourConfig, *DeviceBinderConfig){require}},
		{name: "too frequent: auto-ban of user, /64, device", s: full6, prepare: record(3), more: []func(*BehaviourConfig, *DeviceBinderConfig){auto}},
		{name: "device shared: auto-ban of the device", s: full, prepare: bind, more: []func(*BehaviourConfig, *DeviceBinderConfig){auto}},
		{name: "device shared again: escalated", s: full, prepare: func(t *testing.T, r fuseRules) {
			bind(t, r)
			if _, err := r.dev.Check(bg, Subject{UserID: "u3", DeviceID: "dev1"}); err != nil {
				t.Fatal(err)
			}
			if err := r.bl.Remove(bg, KindDevice, "dev1"); err != nil {
				t.Fatal(err)
			}
		}, more: []func(*BehaviourConfig, *DeviceBinderConfig){auto}},
		{name: "ban without ttl", s: full, prepare: func(t *testing.T, r fuseRules) {
			r.rdb.Set(bg, banKey(r.bl.o.prefix, KindIP, "10.0.0.1"), "junk", 0)
		}},
		{name: "flagged: challenge", s: full, prepare: record(2)},
		{name: "flagged, flag only", s: full, prepare: record(2), flagOnly: true},
		{name: "too frequent: auto-ban", s: full, prepare: record(3)},
		{name: "too frequent again", s: full, prepare: record(5)},
		{name: "device shared", s: full, prepare: bind},
		{name: "device shared: challenge", s: full, prepare: bind, conflct: true},
		{name: "challenge and device shared", s: full, prepare: func(t *testing.T, r fuseRules) { record(2)(t, r); bind(t, r) }, conflct: true},
		{name: "dry run: banned", s: full, prepare: ban(KindUser, "u1"), opts: []CheckerOption{WithDryRun(true)}},
		{name: "dry run: too frequent", s: full, prepare: record(3), opts: []CheckerOption{WithDryRun(true)}},
		{name: "ban key of the wrong type", s: full, prepare: wrongType(banKeyOf)},
		{name: "ban key of the wrong type, fail open", s: full, prepare: wrongType(banKeyOf), opts: []CheckerOption{WithFailurePolicy(FailOpen)}},
		{name: "ban key of the wrong type, fail challenge", s: full, prepare: wrongType(banKeyOf), opts: []CheckerOption{WithFailurePolicy(FailChallenge)}},
		{name: "ban key of the wrong type, dry run", s: full, prepare: wrongType(banKeyOf), opts: []CheckerOption{WithDryRun(true)}},
		{name: "device key of the wrong type", s: full, prepare: wrongType(devKeyOf)},
		{name: "device key of the wrong type, fail open", s: full, prepare: wrongType(devKeyOf), opts: []CheckerOption{WithFailurePolicy(FailOpen)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			type heard struct {
				mu   sync.Mutex
				log  []string
				opts []CheckerOption
			}
			newSide := func() (*redis.Client, fuseRules, *Checker, *heard) {
				rdb, mr := testenv.Miniredis(t)
				clk := newFakeClock()
				mr.SetTime(clk.Now())
				r := newFuseRules(t, rdb, clk, tc.flagOnly, tc.conflct, tc.more...)
				h := &heard{}
				opts := append([]CheckerOption{
					WithOnDecision(func(_ context.Context, s Subject, d Decision) {
						h.mu.Lock()
						defer h.mu.Unlock()
						h.log = append(h.log, fmt.Sprintf("decision %+v", d))
					}),
					WithOnFailure(func(_ context.Context, rule string, _ error) {
						h.mu.Lock()
						defer h.mu.Unlock()
						h.log = append(h.log, "failure "+rule)
					}),
				}, tc.opts...)
				c, err := NewChecker([]Rule{r.bl, r.beh, r.dev}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if tc.prepare != nil {
					tc.prepare(t, r)
				}
				return rdb, r, c, h
			}
			rdbA, _, seq, hA := newSide()
			rdbB, _, fus, hB := newSide()
			if a, b := riskDump(t, rdbA), riskDump(t, rdbB); a != b {
				t.Fatalf("the states differ before:\n%s\n%s", a, b)
			}
			d1, err1 := seq.Check(bg, tc.s)
			ch, err := fus.CheckCheck(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			reply, pass, err := runFused(bg, rdbB, ch.Lua, ch.Pass, ch.Keys, ch.Args)
			if err != nil {
				t.Fatal(err)
			}
			d2, err2 := ch.Decode(bg, reply)
			if (err1 == nil) != (err2 == nil) {
				t.Fatalf("errors: Check %v, fused %v", err1, err2)
			}
			if fmt.Sprintf("%+v", d1) != fmt.Sprintf("%+v", d2) {
				t.Fatalf("decisions differ:\nCheck %+v\nfused %+v", d1, d2)
			}
			if want := err1 == nil && d1.Action != Deny; pass != want {
				t.Fatalf("Pass %v, want %v (decision %+v, err %v)", pass, want, d1, err1)
			}
			if !slices.Equal(hA.log, hB.log) {
				t.Fatalf("hooks heard:\nCheck %q\nfused %q", hA.log, hB.log)
			}
			if a, b := riskDump(t, rdbA), riskDump(t, rdbB); a != b {
				t.Fatalf("the states differ after:\nCheck:\n%s\nfused:\n%s", a, b)
			}
			t.Logf("%s: %+v err=%v pass=%v", tc.name, d1, err1, pass)
		})
	}
}

// TestCheckCheckNeedsBuiltInRules: a checker with a rule of its own, or a
// type embedding a built-in rule, has no fused form.
func TestCheckCheckNeedsBuiltInRules(t *testing.T) {
	rdb, _ := testenv.Miniredis(t)
	r := newFuseRules(t, rdb, newFakeClock(), false, false)
	type embedded struct{ *Blacklist }
	for _, rules := range [][]Rule{
		{r.bl, NewRule("mine", func(context.Context, Subject) (Decision, error) { return Decision{}, nil })},
		{embedded{r.bl}},
	} {
		c, err := NewChecker(rules)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CheckCheck(Subject{UserID: "u1"}); err == nil {
			t.Fatalf("%v: a fused form", rules)
		}
	}
	c, err := NewChecker([]Rule{r.bl, r.beh, r.dev})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CheckCheck(Subject{UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
}
