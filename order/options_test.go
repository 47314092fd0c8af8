package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/order/status"
)

// Every constructor builds with every option it accepts — the table of
// options.go — given as they are, and with nil options among them.
func TestEveryConstructorTakesItsOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.SQLite(t)
	require.NoError(t, order.AutoMigrate(ctx, db))
	rdb, _ := testenv.Miniredis(t)
	clock := newClock()
	log := slog.New(slog.DiscardHandler)
	obs := observe.Func(func(context.Context, observe.Event) {})
	onErr := func(context.Context, error) {}
	tabs := order.WithTables(defaultTables())
	stabs := status.WithTables(defaultTables())
	led := newLedger()

	p, err := order.NewProcessor(db, newGen(t, 1), nil, order.WithClock(clock), order.WithPayTimeout(time.Minute), tabs,
		order.WithTxHook(func(context.Context, *gorm.DB, []order.Order) error { return nil }), nil)
	require.NoError(t, err)
	res, err := status.NewResults(rdb, db, nil, status.WithClock(clock), status.WithLogger(log), status.WithKeyPrefix(testenv.Prefix(t)),
		status.WithResultTTL(time.Hour), stabs, nil)
	require.NoError(t, err)
	canc, err := status.NewCanceller(db, rdb, led, nil, status.WithClock(clock), status.WithLogger(log), status.WithKeyPrefix(testenv.Prefix(t)),
		status.WithBackoff(time.Millisecond, time.Second), status.WithOnError(onErr), status.WithObserver(obs), stabs,
		status.WithPollInterval(time.Second), status.WithScanInterval(time.Minute), status.WithScanBatch(10),
		status.WithOnPayCancelled(func(context.Context, order.Order) {}), nil)
	require.NoError(t, err)
	_, err = order.NewConsumer(p, led, nil, order.WithLogger(log), order.WithBatchSize(10), order.WithMaxAttempts(2),
		order.WithBackoff(time.Millisecond, time.Second), order.WithDeadLetter(deadLetterFunc(func(context.Context, order.Record, error) error { return nil })),
		order.WithResults(res), order.WithNotifier(notifierFunc(func(context.Context, order.Result) {})), order.WithScheduler(canc),
		order.WithHealthCheck(func(context.Context) error { return nil }), order.WithReleaseAttempts(2), order.WithOnError(onErr),
		order.WithObserver(obs), order.WithContextFrom(func(ctx context.Context, _ map[string]string) context.Context { return ctx }), nil)
	require.NoError(t, err)
	_, err = handoff.NewSubmitter(handoff.Publisher(func(context.Context, order.Message) error { return nil }),
		handoff.Fallback(func(context.Context, order.Message) error { return nil }), led,
		nil, handoff.WithClock(clock), handoff.WithLogger(log), handoff.WithResults(res), handoff.WithObserver(obs), nil)
	require.NoError(t, err)
	_, err = handoff.NewFence(db, led, nil, handoff.WithClock(clock), handoff.WithLogger(log), handoff.WithResults(res), handoff.WithTables(defaultTables()), nil)
	require.NoError(t, err)
	_, err = reconcile.NewReconciler(db, led.Reservations, led, nil, reconcile.WithClock(clock), reconcile.WithLogger(log), reconcile.WithResults(res), reconcile.WithObserver(obs), reconcile.WithTables(defaultTables()),
		reconcile.WithGrace(time.Minute), reconcile.WithDryRun(true), reconcile.WithPending(reconcile.Pending(func(context.Context, string) (bool, error) { return false, nil })), nil)
	require.NoError(t, err)
	_, err = status.NewOrders(db, nil, stabs, nil)
	require.NoError(t, err)

	// The nil values of the typed nil options are ignored too.
	var (
		nilClock  order.ProcessorOption
		nilTables order.TableOption
	)
	_, err = order.NewProcessor(db, newGen(t, 2), nilClock, nilTables)
	require.NoError(t, err)
}

// A nil collaborator — a required argument, or the value of an option that
// needs one — fails the constructor with ErrInvalidConfig.
func TestNilCollaboratorIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.SQLite(t)
	require.NoError(t, order.AutoMigrate(ctx, db))
	rdb, _ := testenv.Miniredis(t)
	led := newLedger()
	p := newProc(t, db)
	pub := handoff.Publisher(func(context.Context, order.Message) error { return nil })
	fb := handoff.Fallback(func(context.Context, order.Message) error { return nil })
	for name, err := range map[string]error{
		"processor db":       second(order.NewProcessor(nil, newGen(t, 1))),
		"processor ids":      second(order.NewProcessor(db, nil)),
		"processor clock":    second(order.NewProcessor(db, newGen(t, 1), order.WithClock(nil))),
		"processor tx hook":  second(order.NewProcessor(db, newGen(t, 1), order.WithTxHook(nil))),
		"consumer processor": second(order.NewConsumer(nil, led)),
		"consumer releaser":  second(order.NewConsumer(p, nil)),
		"consumer dlq":       second(order.NewConsumer(p, led, order.WithDeadLetter(nil))),
		"consumer results":   second(order.NewConsumer(p, led, order.WithResults(nil))),
		"consumer notifier":  second(order.NewConsumer(p, led, order.WithNotifier(nil))),
		"consumer scheduler": second(order.NewConsumer(p, led, order.WithScheduler(nil))),
		"submitter pub":      second(handoff.NewSubmitter(nil, fb, led)),
		"submitter fallback": second(handoff.NewSubmitter(pub, nil, led)),
		"submitter releaser": second(handoff.NewSubmitter(pub, fb, nil)),
		"fence db":           second(handoff.NewFence(nil, led)),
		"fence releaser":     second(handoff.NewFence(db, nil)),
		"results redis":      second(status.NewResults(nil, db)),
		"canceller db":       second(status.NewCanceller(nil, rdb, led)),
		"canceller releaser": second(status.NewCanceller(db, rdb, nil)),
		"reconciler ledger":  second(reconcile.NewReconciler(db, nil, led)),
		"reconciler pending": second(reconcile.NewReconciler(db, led.Reservations, led, reconcile.WithPending(nil))),
		"orders db":          second(status.NewOrders(nil)),
		"consumer logger":    second(order.NewConsumer(p, led, order.WithLogger(nil))),
		"submitter logger":   second(handoff.NewSubmitter(pub, fb, led, handoff.WithLogger(nil))),
		"fence logger":       second(handoff.NewFence(db, led, handoff.WithLogger(nil))),
		"results logger":     second(status.NewResults(rdb, db, status.WithLogger(nil))),
		"canceller logger":   second(status.NewCanceller(db, rdb, led, status.WithLogger(nil))),
		"reconciler logger":  second(reconcile.NewReconciler(db, led.Reservations, led, reconcile.WithLogger(nil))),
	} {
		assert.ErrorIs(t, err, order.ErrInvalidConfig, name)
	}
}

func second[T any](_ T, err error) error { return err }

// An option given to a constructor it does not apply to does not compile:
// each snippet below is built with the go tool (through an overlay, so
// nothing is written to the source tree) and must fail with a type error
// naming the constructor's option type; a control snippet using the right
// options must build.
func TestInapplicableOptionDoesNotCompile(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	const imports = `import (
	"context"
	"time"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/operate"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/orderkafka"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/order/status"
)

var (
	_ = context.Background
	_ = time.Second
	_ = orderid.New
	_ = orderkafka.NewHandler
	_ = handoff.NewSubmitter
	_ = operate.PruneDedup
	_ = reconcile.NewReconciler
	_ = status.NewResults
)
`
	bad := map[string]struct{ code, want string }{
		"producer_pay_timeout":  {`orderkafka.NewProducer(nil, "orders", order.WithPayTimeout(time.Second))`, "orderkafka.ProducerOption"},
		"handler_headers":       {`orderkafka.NewHandler(nil, orderkafka.WithHeaders(nil))`, "orderkafka.HandlerOption"},
		"handler_batch_size":    {`orderkafka.NewHandler(nil, order.WithBatchSize(1))`, "orderkafka.HandlerOption"},
		"consumer_pay_timeout":  {`order.NewConsumer(nil, nil, order.WithPayTimeout(time.Second))`, "order.ConsumerOption"},
		"consumer_tables":       {`order.NewConsumer(nil, nil, order.WithTables(order.Tables{}))`, "order.ConsumerOption"},
		"processor_batch_size":  {`order.NewProcessor(nil, nil, order.WithBatchSize(1))`, "order.ProcessorOption"},
		"processor_logger":      {`order.NewProcessor(nil, nil, order.WithLogger(nil))`, "order.ProcessorOption"},
		"submitter_tables":      {`handoff.NewSubmitter(nil, nil, nil, handoff.WithTables(order.Tables{}))`, "handoff.SubmitterOption"},
		"results_backoff":       {`status.NewResults(nil, nil, status.WithBackoff(1, 2))`, "status.ResultsOption"},
		"results_results":       {`status.NewResults(nil, nil, order.WithResults(nil))`, "status.ResultsOption"},
		"fence_key_prefix":      {`handoff.NewFence(nil, nil, status.WithKeyPrefix("x"))`, "handoff.FenceOption"},
		"canceller_grace":       {`status.NewCanceller(nil, nil, nil, reconcile.WithGrace(1))`, "status.CancellerOption"},
		"reconciler_scan_batch": {`reconcile.NewReconciler(nil, nil, nil, status.WithScanBatch(1))`, "reconcile.Option"},
		"orders_clock":          {`status.NewOrders(nil, status.WithClock(nil))`, "status.TableOption"},
		"migrate_clock":         {`order.AutoMigrate(context.Background(), nil, order.WithClock(nil))`, "order.TableOption"},
		"prune_clock":           {`operate.PruneDedup(context.Background(), nil, time.Time{}, 1, order.WithClock(nil))`, "order.TableOption"},
		"fence_batch_size":      {`handoff.NewFence(nil, nil, order.WithBatchSize(1))`, "handoff.FenceOption"},
		"orderid_new_ttl":       {`orderid.New(1, orderid.WithTTL(time.Second))`, "orderid.GeneratorOption"},
		"orderid_lease_epoch":   {`orderid.AcquireMachine(context.Background(), nil, orderid.WithEpoch(time.Time{}))`, "orderid.LeaseOption"},
		"orderid_order_clock":   {`orderid.New(1, order.WithClock(nil))`, "orderid.GeneratorOption"},
	}
	good := `func init() {
	_, _ = order.NewConsumer(nil, nil, order.WithBatchSize(1), order.WithBackoff(1, 2), order.WithResults(nil))
	_, _ = order.NewProcessor(nil, nil, order.WithPayTimeout(time.Second), order.WithTables(order.Tables{}), order.WithClock(nil))
	_, _ = handoff.NewFence(nil, nil, handoff.WithTables(order.Tables{}), handoff.WithClock(nil), handoff.WithLogger(nil), handoff.WithResults(nil))
	_, _ = status.NewResults(nil, nil, status.WithClock(nil), status.WithTables(order.Tables{}), status.WithResultTTL(1))
	_, _ = status.NewCanceller(nil, nil, nil, status.WithKeyPrefix(""), status.WithTables(order.Tables{}), status.WithScanBatch(1))
	_, _ = status.NewOrders(nil, status.WithTables(order.Tables{}))
	_, _ = reconcile.NewReconciler(nil, nil, nil, reconcile.WithClock(nil), reconcile.WithGrace(1), reconcile.WithTables(order.Tables{}))
	_, _ = handoff.NewSubmitter(nil, nil, nil, handoff.WithClock(nil), handoff.WithResults(nil))
	_ = operate.PruneDedup
	_, _ = orderkafka.NewProducer(nil, "orders", orderkafka.WithHeaders(nil))
	_, _ = orderkafka.NewHandler(nil, orderkafka.WithLinger(0))
	_, _ = orderid.New(1, orderid.WithEpoch(time.Time{}), orderid.WithClock(nil))
	_, _ = orderid.AcquireMachine(context.Background(), nil, orderid.WithTTL(time.Second), orderid.WithKeyPrefix("x"))
}
`
	wd, err := os.Getwd()
	require.NoError(t, err)
	tmp := t.TempDir()
	overlay := map[string]string{}
	var pkgs []string
	add := func(name, body string) {
		src := filepath.Join(tmp, name+".go")
		require.NoError(t, os.WriteFile(src, []byte("package "+name+"\n\n"+imports+"\n"+body), 0o600))
		overlay[filepath.Join(wd, "_optioncheck", name, name+".go")] = src
		pkgs = append(pkgs, "./_optioncheck/"+name)
	}
	add("control", good)
	for name, c := range bad {
		add(name, "func init() {\n\t_, _ = "+c.code+"\n}\n")
	}
	b, err := json.Marshal(map[string]any{"Replace": overlay})
	require.NoError(t, err)
	ovl := filepath.Join(tmp, "overlay.json")
	require.NoError(t, os.WriteFile(ovl, b, 0o600))
	out, err := exec.Command(goTool, append([]string{"build", "-overlay", ovl}, pkgs...)...).CombinedOutput()
	require.Error(t, err, "the snippets with inapplicable options must not compile")
	// The go tool prints "# <package>" and then the package's errors.
	errs := map[string]string{}
	var cur string
	for _, line := range strings.Split(string(out), "\n") {
		if pkg, ok := strings.CutPrefix(line, "# "); ok {
			cur = pkg[strings.LastIndex(pkg, "/")+1:]
			continue
		}
		errs[cur] += line + "\n"
	}
	assert.NotContains(t, errs, "control", "the control snippet must compile:\n%s", out)
	for name, c := range bad {
		msg, ok := errs[name]
		if assert.True(t, ok, "%s compiled: %s", name, c.code) {
			assert.Contains(t, msg, fmt.Sprintf("as %s value", c.want), name)
		}
	}
}
