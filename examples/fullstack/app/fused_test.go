package app_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// tripKey marks the context of the buy whose Redis round trips are
// counted, with the phase of the buy (admission and reserve, or hand-off);
// the app's workers' calls carry no mark.
type tripKey struct{}

// trips counts the round trips to Redis of marked calls by phase: one per
// command, one per pipeline.
type trips struct {
	mu    sync.Mutex
	n     map[string]int
	names map[string][]string
}

func (c *trips) add(ctx context.Context, name string) {
	phase, _ := ctx.Value(tripKey{}).(string)
	if phase == "" {
		return
	}
	if name == "pipeline(positions)" {
		// orderkafka.Positions' write-behind: its goroutine keeps the
		// values of the context of the Record that started it, but no buy
		// waits for it, and under load one pipeline carries the positions
		// of every buy acknowledged meanwhile (TestPositionsRecordWritesBehind).
		phase = "behind"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n, c.names = map[string]int{}, map[string][]string{}
	}
	c.n[phase]++
	c.names[phase] = append(c.names[phase], name)
}

func (c *trips) read(phase string) (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[phase], strings.Join(c.names[phase], " ")
}

func (c *trips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (c *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := cmd.Name()
		if a := cmd.Args(); len(a) > 3 && strings.HasPrefix(name, "eval") {
			name += "(" + fmt.Sprint(a[3]) + ")"
		}
		c.add(ctx, name)
		return next(ctx, cmd)
	}
}

func (c *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		name := "pipeline"
		if len(cmds) > 0 {
			if a := cmds[0].Args(); len(a) > 1 && strings.HasSuffix(fmt.Sprint(a[1]), ":kafka_pos") {
				name = "pipeline(positions)"
			}
		}
		c.add(ctx, name)
		return next(ctx, cmds)
	}
}

// steps drops the risk step unless risk,
// and marks the hand-off's calls of a counted buy as such.
func steps(risk bool) func([]checkout.Step) []checkout.Step {
	return func(steps []checkout.Step) []checkout.Step {
		out := steps[:0:0]
		for _, s := range steps {
			switch s.Name {
			case checkout.StepRisk:
				if !risk {
					continue
				}
			case checkout.StepSubmit:
				run := s.Run
				s.Run = func(ctx context.Context, a *checkout.Attempt) checkout.Outcome {
					if ctx.Value(tripKey{}) != nil {
						ctx = context.WithValue(ctx, tripKey{}, "handoff")
					}
					return run(ctx, a)
				}
			}
			out = append(out, s)
		}
		return out
	}
}

// TestFusedAdmissionRoundTrips counts the Redis round trips of one
// accepted buy (with a request ID, so the replay lookup runs) through the
// reference deployment's checkout, after a warm-up buy so the scripts are
// loaded: the per-user window (counted by the app), the replay lookup, the
// captcha and the access token in one script, then the reservation: at
// most 2 for the whole buy, with the risk rules (risk.Checker.CheckCheck)
// or without: the hand-off writes no QUEUED result (a reservation in
// flight reads queued from the ledger), so it adds none. The Kafka
// position the hand-off records is written behind, by a goroutine no buy
// waits for, batched under load: counted apart (it raced with the count:
// CI once saw it land inside the window).
func TestFusedAdmissionRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sequential bool
		risk       bool
		max        int // of the admission and the reserve; 0: reported only
	}{
		{"fused, no risk", false, false, 2},
		{"sequential, no risk", true, false, 0},
		{"fused, risk", false, true, 2},
		{"sequential, risk", true, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := embeddedConfig(3, 10)
			cfg.SequentialAdmission = tc.sequential
			app.SetCheckoutSteps(&cfg, steps(tc.risk))
			n := &trips{}
			app.HookRedis(&cfg, n)
			a, _ := startApp(t, cfg)
			co := app.Checkout(a)
			ctx := context.Background()
			for i, user := range []string{"warm", "buyer"} {
				at, err := app.Credentials(ctx, a, user)
				if err != nil {
					t.Fatal(err)
				}
				at.RequestID = "req-1"
				bctx := ctx
				if i == 1 {
					bctx = context.WithValue(ctx, tripKey{}, "admission")
				}
				if out := co.Buy(bctx, &at); out.Kind != checkout.Accepted {
					t.Fatalf("%s: %+v", user, out)
				}
			}
			got, names := n.read("admission")
			h, hnames := n.read("handoff")
			b, _ := n.read("behind")
			t.Logf("%s: %d round trips to Redis up to the reserve (%s), %d in the hand-off (%s); %d written behind (positions, not waited for)", tc.name, got, names, h, hnames, b)
			if tc.max > 0 && got+h > tc.max {
				t.Fatalf("%d round trips up to the reserve and %d in the hand-off, want <= %d in all", got, h, tc.max)
			}
		})
	}
}

// TestFusedWindowCounted: a buy refused by the per-user window is counted
// (seckill_limiter_refusals_total{limiter="user"}) whether the window ran
// in the fused script or on its own.
func TestFusedWindowCounted(t *testing.T) {
	for _, sequential := range []bool{false, true} {
		cfg := embeddedConfig(1, 10)
		cfg.SequentialAdmission = sequential
		cfg.UserRate, cfg.UserWindow = 1, time.Hour
		a, _ := startApp(t, cfg)
		co := app.Checkout(a)
		ctx := context.Background()
		var last checkout.Outcome
		for range 2 {
			at, err := app.Credentials(ctx, a, "u1")
			if err != nil {
				t.Fatal(err)
			}
			at.RequestID = "req-" + at.CaptchaID
			last = co.Buy(ctx, &at)
		}
		if last.Step != checkout.StepUserLimit || last.Kind != checkout.Refused {
			t.Fatalf("sequential=%v: second buy %+v, want refused by %s", sequential, last, checkout.StepUserLimit)
		}
		if got := app.Limited(a, "user"); got != 1 {
			t.Fatalf("sequential=%v: seckill_limiter_refusals_total{limiter=\"user\"} = %v, want 1", sequential, got)
		}
	}
}
