package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
)

// countingProducer is a sarama.SyncProducer that counts every call.
type countingProducer struct {
	sarama.SyncProducer // nil: any other method panics
	calls               atomic.Int64
}

func (p *countingProducer) SendMessage(*sarama.ProducerMessage) (int32, int64, error) {
	p.calls.Add(1)
	return 0, 0, errors.New("no I/O in build")
}

func (p *countingProducer) SendMessages([]*sarama.ProducerMessage) error {
	p.calls.Add(1)
	return errors.New("no I/O in build")
}

// countSQL counts every statement db runs.
func countSQL(t *testing.T, db *gorm.DB) *atomic.Int64 {
	var n atomic.Int64
	cb := db.Callback()
	inc := func(*gorm.DB) { n.Add(1) }
	require.NoError(t, cb.Query().Before("gorm:query").Register("count:query", inc))
	require.NoError(t, cb.Create().Before("gorm:create").Register("count:create", inc))
	require.NoError(t, cb.Update().Before("gorm:update").Register("count:update", inc))
	require.NoError(t, cb.Delete().Before("gorm:delete").Register("count:delete", inc))
	require.NoError(t, cb.Row().Before("gorm:row").Register("count:row", inc))
	require.NoError(t, cb.Raw().Before("gorm:raw").Register("count:raw", inc))
	return &n
}

// TestBuildDoesNoIO: build puts every part, the worker list and the buy
// chain together without one Redis dial, SQL statement or Kafka send; the
// I/O is the workers' start. Before, wire preloaded the sale, issued the
// token pool, leased a machine ID and connected to Kafka while it built.
func TestBuildDoesNoIO(t *testing.T) {
	var dials atomic.Int64
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("no I/O in build")
		}})
	defer rdb.Close()
	db, err := openSQLite(filepath.Join(t.TempDir(), "build.db"))
	require.NoError(t, err)
	queries := countSQL(t, db)
	prod := &countingProducer{}
	for _, role := range []string{RoleAll, RoleAPI, RoleWorker} {
		t.Run(role, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Role = role
			a := offlineApp(t, cfg, rdb, db, prod)
			require.Zero(t, dials.Load(), "Redis dials during build")
			require.Zero(t, queries.Load(), "SQL statements during build")
			require.Zero(t, prod.calls.Load(), "Kafka sends during build")

			want := []string{"stock_soldout", "preloader", "token_pool", "session_revocations", "machine_lease", "canceller", "reconciler", "outbox_relay", "consumer", "metrics"}
			if role == RoleAPI {
				want = []string{"stock_soldout", "preloader", "token_pool", "session_revocations", "machine_lease", "canceller", "metrics"}
			}
			require.Equal(t, want, a.run.names())
			// The buy's 13 steps (checkout's; the path check and the
			// sold-out refusal before the body are handleBuy's).
			require.Len(t, a.co.Steps(), 13)
			require.Zero(t, a.run.stop(), "nothing started, nothing to stop")
		})
	}
}

// offlineApp is an App of cfg built over connections build never uses (it
// does no I/O), selling activity "1" for an hour from 2030-01-01.
func offlineApp(t *testing.T, cfg Config, rdb redis.UniversalClient, db *gorm.DB, prod sarama.SyncProducer) *App {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &App{cfg: cfg, log: log, m: newMetrics(), hub: newHub(), srv: newServers(),
		in: &Infra{Redis: rdb, StockRedis: rdb, DB: db, Producer: prod, Brokers: []string{"127.0.0.1:1"}},
		sale: &sale{key: "1", act: order.Activity{ID: "1", Stock: 10, Remaining: 10, PerUserLimit: 1,
			Start: start, End: start.Add(time.Hour)}}}
	a.run = newRunner(context.Background(), log, func(string) {})
	require.NoError(t, a.build("t1", nil))
	return a
}

// TestRunnerContract: workers start in list order; a start that fails
// aborts, and exactly the workers started before it are stopped, in
// reverse order; a run that fails is counted and logged, not fatal; stop
// cancels the runs, calls stop before waiting for them, and runs once.
func TestRunnerContract(t *testing.T) {
	var (
		mu     sync.Mutex
		events []string
	)
	rec := func(s string) {
		mu.Lock()
		events = append(events, s)
		mu.Unlock()
	}
	var failed []string
	r := newRunner(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), func(name string) { failed = append(failed, name) })
	released := make(chan struct{})
	r.add(
		worker{name: "a", start: func(context.Context) error { rec("start a"); return nil },
			run:  func(ctx context.Context) error { <-ctx.Done(); return nil },
			stop: func() error { rec("stop a"); return nil }},
		worker{name: "b", run: func(ctx context.Context) error {
			<-released // ends only after its stop: stop must come before the wait
			return nil
		}, stop: func() error { rec("stop b"); close(released); return nil }},
		worker{name: "c", start: func(context.Context) error { rec("start c"); return errors.New("boom") },
			stop: func() error { rec("stop c (never started)"); return nil }},
	)
	err := r.start(context.Background())
	require.ErrorContains(t, err, "start c: boom")
	require.NoError(t, r.stop())
	require.NoError(t, r.stop(), "a second stop is a no-op")
	require.Equal(t, []string{"start a", "start c", "stop b", "stop a"}, events)
	require.Empty(t, failed)

	// A run that fails is counted, and the others keep running.
	// The test waits for the failure to be counted before it stops the
	// runner: a stop between the run's return and the count is a shutdown,
	// not a failure (CI: waiting only for the run's return raced with it).
	var failedMu sync.Mutex
	failed = nil
	counted := make(chan struct{})
	r = newRunner(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), func(name string) {
		failedMu.Lock()
		failed = append(failed, name)
		failedMu.Unlock()
		close(counted)
	})
	r.add(worker{name: "bad", run: func(context.Context) error { return errors.New("lost") }})
	require.NoError(t, r.start(context.Background()))
	<-counted
	require.NoError(t, r.stop()) // waits for the run: failed is final
	require.Equal(t, []string{"bad"}, failed)
}

// TestFlowDiagramMatchesChain: the README's flow diagram of a buy is the
// one flowDiagram renders from the checkout that runs. Regenerate it with
// SECKILL_UPDATE_FLOW=1 go test -run TestFlowDiagramMatchesChain.
func TestFlowDiagramMatchesChain(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	db, err := openSQLite(filepath.Join(t.TempDir(), "flow.db"))
	require.NoError(t, err)
	steps := offlineApp(t, DefaultConfig(), rdb, db, &countingProducer{}).co.Steps()
	want := flowDiagram(steps)
	const begin, end = "<!-- buy-chain:begin (generated from app/buy.go by TestFlowDiagramMatchesChain) -->\n```text\n", "```\n<!-- buy-chain:end -->"
	path := filepath.Join("..", "README.md")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	readme := string(b)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	require.True(t, i >= 0 && j > i, "README.md has no generated buy-chain block")
	if os.Getenv("SECKILL_UPDATE_FLOW") == "1" {
		readme = readme[:i+len(begin)] + want + readme[j:]
		require.NoError(t, os.WriteFile(path, []byte(readme), 0o644))
		return
	}
	require.Equal(t, want, readme[i+len(begin):j], "README.md's buy chain is stale: SECKILL_UPDATE_FLOW=1 go test -run TestFlowDiagramMatchesChain ./app/")
	// Every step is named once, in the order the chain runs them.
	lines := strings.Split(want, "\n")
	for k, s := range steps {
		f := strings.Fields(strings.TrimPrefix(lines[k+2], "→")) // after auth and handleBuy's line
		if f[1] == "⛨" {
			f = append(f[:1], f[2:]...)
		}
		require.Equal(t, []string{fmt.Sprintf("%d.", k+1), s.Name}, f[:2], "line %d", k+1)
		require.Contains(t, stepDocs, s.Name, "a step the diagram does not describe")
	}
}

// TestAppFieldsStaySmall: the node is its connections, its sale, its parts,
// its chain, its workers and its servers; a concern that needs state gets
// its own type.
func TestAppFieldsStaySmall(t *testing.T) {
	require.LessOrEqual(t, reflect.TypeOf(App{}).NumField(), 10)
}
