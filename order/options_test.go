package order

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

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/observe"
)

// Every constructor builds with every option it accepts — the table of
// options.go — given as they are, and with nil options among them.
func TestEveryConstructorTakesItsOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.SQLite(t)
	require.NoError(t, AutoMigrate(ctx, db))
	rdb, _ := testenv.Miniredis(t)
	clock := newClock()
	log := slog.New(slog.DiscardHandler)
	obs := observe.Func(func(context.Context, observe.Event) {})
	onErr := func(context.Context, error) {}
	tabs := WithTables(DefaultTables())
	led := newLedger()

	p, err := NewProcessor(db, newGen(t, 1), nil, WithClock(clock), WithPayTimeout(time.Minute), tabs,
		WithTxHook(func(context.Context, *gorm.DB, []Order) error { return nil }), nil)
	require.NoError(t, err)
	res, err := NewResults(rdb, db, nil, WithClock(clock), WithLogger(log), WithKeyPrefix(testenv.Prefix(t)),
		WithResultTTL(time.Hour), tabs, nil)
	require.NoError(t, err)
	canc, err := NewCanceller(db, rdb, led, nil, WithClock(clock), WithLogger(log), WithKeyPrefix(testenv.Prefix(t)),
		WithBackoff(time.Millisecond, time.Second), WithOnError(onErr), WithObserver(obs), tabs,
		WithPollInterval(time.Second), WithScanInterval(time.Minute), WithScanBatch(10),
		WithOnPayCancelled(func(context.Context, Order) {}), nil)
	require.NoError(t, err)
	_, err = NewConsumer(p, led, nil, WithClock(clock), WithLogger(log), WithBatchSize(10), WithMaxAttempts(2),
		WithBackoff(time.Millisecond, time.Second), WithDeadLetter(DeadLetterFunc(func(context.Context, Record, error) error { return nil })),
		WithResults(res), WithNotifier(NotifierFunc(func(context.Context, Result) {})), WithScheduler(canc),
		WithHealthCheck(func(context.Context) error { return nil }), WithReleaseAttempts(2), WithOnError(onErr),
		WithObserver(obs), WithContextFrom(func(ctx context.Context, _ map[string]string) context.Context { return ctx }), nil)
	require.NoError(t, err)
	_, err = NewSubmitter(PublisherFunc(func(context.Context, Message) error { return nil }),
		FallbackFunc(func(context.Context, Message) error { return nil }), led,
		nil, WithClock(clock), WithLogger(log), WithResults(res), WithObserver(obs), nil)
	require.NoError(t, err)
	_, err = NewFence(db, led, nil, WithClock(clock), WithLogger(log), WithResults(res), tabs, nil)
	require.NoError(t, err)
	_, err = NewReconciler(db, led, led, nil, WithClock(clock), WithLogger(log), WithResults(res), WithObserver(obs), tabs,
		WithGrace(time.Minute), WithDryRun(true), WithPending(PendingFunc(func(context.Context, string) (bool, error) { return false, nil })), nil)
	require.NoError(t, err)
	_, err = NewOrders(db, nil, tabs, WithCanceller(canc), nil)
	require.NoError(t, err)

	// The nil values of the typed nil options are ignored too.
	var (
		nilClock  ClockOption
		nilTables TableOption
	)
	_, err = NewProcessor(db, newGen(t, 2), nilClock, nilTables)
	require.NoError(t, err)
}

// A nil collaborator — a required argument, or the value of an option that
// needs one — fails the constructor with ErrInvalidConfig.
func TestNilCollaboratorIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.SQLite(t)
	require.NoError(t, AutoMigrate(ctx, db))
	rdb, _ := testenv.Miniredis(t)
	led := newLedger()
	p := newProc(t, db)
	pub := PublisherFunc(func(context.Context, Message) error { return nil })
	fb := FallbackFunc(func(context.Context, Message) error { return nil })
	for name, err := range map[string]error{
		"processor db":       second(NewProcessor(nil, newGen(t, 1))),
		"processor ids":      second(NewProcessor(db, nil)),
		"processor clock":    second(NewProcessor(db, newGen(t, 1), WithClock(nil))),
		"processor tx hook":  second(NewProcessor(db, newGen(t, 1), WithTxHook(nil))),
		"consumer processor": second(NewConsumer(nil, led)),
		"consumer releaser":  second(NewConsumer(p, nil)),
		"consumer dlq":       second(NewConsumer(p, led, WithDeadLetter(nil))),
		"consumer results":   second(NewConsumer(p, led, WithResults(nil))),
		"consumer notifier":  second(NewConsumer(p, led, WithNotifier(nil))),
		"consumer scheduler": second(NewConsumer(p, led, WithScheduler(nil))),
		"submitter pub":      second(NewSubmitter(nil, fb, led)),
		"submitter fallback": second(NewSubmitter(pub, nil, led)),
		"submitter releaser": second(NewSubmitter(pub, fb, nil)),
		"fence db":           second(NewFence(nil, led)),
		"fence releaser":     second(NewFence(db, nil)),
		"results redis":      second(NewResults(nil, db)),
		"canceller db":       second(NewCanceller(nil, rdb, led)),
		"canceller releaser": second(NewCanceller(db, rdb, nil)),
		"reconciler ledger":  second(NewReconciler(db, nil, led)),
		"reconciler pending": second(NewReconciler(db, led, led, WithPending(nil))),
		"orders db":          second(NewOrders(nil)),
		"orders canceller":   second(NewOrders(db, WithCanceller(nil))),
		"consumer logger":    second(NewConsumer(p, led, WithLogger(nil))),
		"submitter logger":   second(NewSubmitter(pub, fb, led, WithLogger(nil))),
		"fence logger":       second(NewFence(db, led, WithLogger(nil))),
		"results logger":     second(NewResults(rdb, db, WithLogger(nil))),
		"canceller logger":   second(NewCanceller(db, rdb, led, WithLogger(nil))),
		"reconciler logger":  second(NewReconciler(db, led, led, WithLogger(nil))),
	} {
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
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
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/orderkafka"
)

var (
	_ = context.Background
	_ = time.Second
	_ = orderid.New
	_ = orderkafka.NewHandler
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
		"submitter_tables":      {`order.NewSubmitter(nil, nil, nil, order.WithTables(order.Tables{}))`, "order.SubmitterOption"},
		"results_backoff":       {`order.NewResults(nil, nil, order.WithBackoff(1, 2))`, "order.ResultsOption"},
		"results_results":       {`order.NewResults(nil, nil, order.WithResults(nil))`, "order.ResultsOption"},
		"fence_key_prefix":      {`order.NewFence(nil, nil, order.WithKeyPrefix("x"))`, "order.FenceOption"},
		"canceller_grace":       {`order.NewCanceller(nil, nil, nil, order.WithGrace(1))`, "order.CancellerOption"},
		"reconciler_scan_batch": {`order.NewReconciler(nil, nil, nil, order.WithScanBatch(1))`, "order.ReconcilerOption"},
		"orders_clock":          {`order.NewOrders(nil, order.WithClock(nil))`, "order.OrdersOption"},
		"migrate_clock":         {`order.AutoMigrate(context.Background(), nil, order.WithClock(nil))`, "order.TableOption"},
		"orderid_new_ttl":       {`orderid.New(1, orderid.WithTTL(time.Second))`, "orderid.GeneratorOption"},
		"orderid_lease_epoch":   {`orderid.AcquireMachine(context.Background(), nil, orderid.WithEpoch(time.Time{}))`, "orderid.LeaseOption"},
		"orderid_order_clock":   {`orderid.New(1, order.WithClock(nil))`, "orderid.GeneratorOption"},
	}
	good := `func init() {
	_, _ = order.NewConsumer(nil, nil, order.WithBatchSize(1), order.WithClock(nil), order.WithBackoff(1, 2), order.WithResults(nil))
	_, _ = order.NewProcessor(nil, nil, order.WithPayTimeout(time.Second), order.WithTables(order.Tables{}), order.WithClock(nil))
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
