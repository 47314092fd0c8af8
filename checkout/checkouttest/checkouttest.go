// Package checkouttest is the conformance kit of package checkout, in the
// spirit of watermill's pub/sub test suite: given a constructor of any
// composition of checkout — the default steps or a user's list, embedded or
// real stores — [Run] runs the seam scenarios (retries, lost answers,
// crashes between steps, Kafka and the database down, a frozen or paused
// sale, sold out, other buyers' IDs, ID length limits, per-user caps, a
// resend while the first send's undo runs: resend_during_undo) and,
// after the order pipeline drained, COUNTS the invariants from Redis and
// SQL:
//
//   - no oversell: live orders never exceed the stock, Redis and the DB never
//     go below zero;
//   - the per-user cap holds in Redis and in the DB;
//   - nothing accepted is lost: every Accepted or Replayed reservation ends
//     as exactly one order or a FAILED result its owner can read;
//   - no duplicate order per reservation;
//   - stock is conserved: Redis remaining + held in flight + live orders =
//     initial, and DB stock + live orders = initial;
//   - the buyer is told the truth: an Accepted attempt holds a unit, a
//     retryable refusal holds nothing and keeps no access token, a SoldOut
//     refusal is given only when nothing remains.
//
// A sale with variants (Config.Variants: the variant scenarios
// variant_sold_out, variant_retry, variant_cap, variant_early_sold_out,
// variant_spent_token, variant_resend_during_undo, variant_handoff_failed)
// is counted per variant too: no oversell and conservation per variant, in Redis (the variant's
// ledger) and SQL (its activity row and the live lines of orders), the
// per-variant cap and the sale's cap over all variants, and every order
// for the variant its attempt named ("[variant]"). The sale-wide answers
// of checkout.Stock for a sale in sizes are checked too: Held of the sale
// is the sum over its sizes (a spent access token never buys a second
// size, and passes for a buyer holding none: "[held]"), and
// Checkout.SoldOutFor refuses before the body only once every size is
// sold out and never a buyer who won a size ("[truth]"). A constructor that
// builds no variants (Counts.VariantRemaining nil) has them skipped.
//
// Failures name the invariant in brackets ("[truth]", "[lost]", "[cap]",
// "[conserved]", "[oversell]", "[dup]", or "[expect]" for what a scenario
// expects of the answers).
//
//	func TestConformance(t *testing.T) {
//		checkouttest.Run(t, func(t testing.TB, c checkouttest.Config) *checkouttest.Sale {
//			// build the stores and checkout.New(checkout.Config{…, Steps: c.Steps})
//		})
//	}
//
// [Embedded] is the reference composition: every part real, over miniredis
// and SQLite (the kit's own tests also run it over MySQL/MariaDB when
// SECKILL_MYSQL_DSN names a server, TestKitOnMySQL, and over the real
// Redis server and Cluster when SECKILL_REDIS_ADDR and
// SECKILL_REDIS_CLUSTER_ADDRS name them, TestKitOnRealRedis). [Check] runs the same scenarios but records the failures
// instead of failing the test, so a test can show the kit catches a
// deliberately broken composition.
package checkouttest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/stock"
)

// Config is what a scenario asks the constructor to build: a fresh sale
// with Stock units, PerUserLimit units per buyer at most, and nothing sold.
type Config struct {
	Stock        int64
	PerUserLimit int64
	// Variants, when set, make the sale one with variants
	// (stock.Activity.Variants): each its own Stock and PerUserLimit (0:
	// the sale's), PerUserLimit the cap over all of them, Stock their sum.
	// The database has an activity row per variant, "<sale>/<variant>"
	// (stock.VariantOf), with its stock and cap, and the sale's own row.
	Variants []stock.Variant
	// Steps is the kit's edit of the steps: it wraps "reserve" (to lose a
	// reply) and inserts a step before it (to crash after the access
	// token) and one after it (to hold an attempt after its reservation,
	// then end it Busy). The constructor must apply it last, after its own edits:
	// checkout.Config{Steps: c.Steps}, or
	// Steps: func(d []checkout.Step) []checkout.Step { return c.Steps(mine(d)) }.
	Steps func(defaults []checkout.Step) []checkout.Step
}

// Sale is one composition under test, built fresh for each scenario.
type Sale struct {
	Checkout *checkout.Checkout
	// Attempt returns fresh valid credentials of user for one send: the
	// user's access token (the same one while it is bound or spent), a new
	// captcha with its answer, a signed link. The kit sets RequestID.
	Attempt func(ctx context.Context, user string) (checkout.Attempt, error)
	// Drain runs the order pipeline until nothing is in flight: queued
	// messages consumed, the outbox relayed, the reconciler run past its
	// grace. Bounded; an error fails the scenario.
	Drain func(ctx context.Context) error
	// Counts reads the sale's state from Redis and SQL.
	Counts func(ctx context.Context) (Counts, error)
	// Faults are optional: a scenario whose fault is nil is skipped with a
	// one-line reason.
	Faults Faults
}

// Faults switch the composition's dependencies off and on. Each is
// optional.
type Faults struct {
	// KafkaDown makes the order publisher fail while down: the submitter
	// must take the outbox, and Drain relays it once Kafka is back.
	KafkaDown func(down bool)
	// OutboxDown makes the outbox write fail while down. With KafkaDown,
	// the hand-off fails (handoff.ErrRetry): the reservation is released
	// through the fence.
	OutboxDown func(down bool)
	// Freeze freezes the sale as after a Redis data loss
	// (stock.Deductor.Freeze), or unfreezes it.
	Freeze func(ctx context.Context, frozen bool) error
	// Pause pauses (stock.Deductor.Pause) or resumes the sale.
	Pause func(ctx context.Context, paused bool) error
}

// Unit is the buyer and quantity of one reservation or order.
type Unit struct {
	User    string
	Qty     int64
	Variant string // of a sale with variants: the variant held or ordered
}

// Counts is the sale's state, read from Redis (the stock ledger, the token
// pool) and SQL (the activity row, the orders).
type Counts struct {
	Initial        int64           // units put on sale
	RedisRemaining int64           // units nobody holds, in Redis
	DBRemaining    int64           // the activity row's stock
	Held           map[string]Unit // Redis: held reservations by reservation ID
	Live           map[string]Unit // SQL: live (not cancelled) orders by reservation ID, quantities summed
	Rows           map[string]int  // SQL: order rows of any status by reservation ID
	TokensUsed     int64           // access tokens consumed; -1 without a token pool

	// Of a sale with variants (nil otherwise): the units nobody holds in
	// each variant's ledger, and each variant's activity row's stock.
	// RedisRemaining and DBRemaining are then their sums; Held and Live
	// are keyed by the order's reservation ID (a line's ledger entry
	// "<id>#0" counts under "<id>"), each Unit naming its variant.
	VariantRemaining   map[string]int64
	VariantDBRemaining map[string]int64
}

// NewSale builds one composition for one scenario. It may fail t (with
// Fatalf) and register cleanups on it.
type NewSale func(t testing.TB, c Config) *Sale

// Run runs every scenario as a subtest of t against fresh sales from
// newSale.
func Run(t *testing.T, newSale NewSale) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { runScenario(t, sc, newSale) })
	}
}

// Check runs every scenario as a subtest of t like [Run], but records what
// fails instead of failing t: the failures by scenario name (scenarios that
// passed or were skipped are absent). The subtests log them. It lets a test
// show that the kit fails a deliberately broken composition.
func Check(t *testing.T, newSale NewSale) map[string][]string {
	t.Helper()
	failed := map[string][]string{}
	for _, sc := range scenarios {
		var msgs []string
		t.Run(sc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			done := make(chan struct{})
			go func() { // Fatalf and Skipf end this goroutine, not the subtest
				defer close(done)
				runScenario(r, sc, newSale)
			}()
			<-done
			msgs = r.messages()
			for _, m := range msgs {
				t.Logf("recorded: %s", m)
			}
		})
		if len(msgs) > 0 {
			failed[sc.name] = msgs
		}
	}
	return failed
}

// recorder is a testing.TB whose failures and skips are recorded, not
// reported: everything else (names, cleanups, temp dirs, logs) is the
// subtest's.
type recorder struct {
	testing.TB
	mu      sync.Mutex
	msgs    []string
	failed  bool
	skipped bool
}

func (r *recorder) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	if msg != "" {
		r.msgs = append(r.msgs, msg)
	}
}

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed && len(r.msgs) == 0 {
		return []string{"failed"}
	}
	return append([]string(nil), r.msgs...)
}

func (r *recorder) Fail()                             { r.fail("") }
func (r *recorder) Error(args ...any)                 { r.fail(strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }
func (r *recorder) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recorder) FailNow()                          { r.fail(""); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *recorder) Skip(args ...any)                 { r.TB.Log(args...); r.SkipNow() }
func (r *recorder) Skipf(format string, args ...any) { r.TB.Logf(format, args...); r.SkipNow() }
func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}
