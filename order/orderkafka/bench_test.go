package orderkafka

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/orderid"
)

// timedHandler records when the group session started, so join time is not
// counted as consume time.
type timedHandler struct {
	*Handler
	start atomic.Int64
}

func (h *timedHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.start.CompareAndSwap(0, time.Now().UnixNano())
	return h.Handler.Setup(s)
}

// BenchmarkConsume measures orders/s from Kafka (in-process kfake, one
// consumer process; one, three or six partitions consumed concurrently)
// into each database available — SQLite always, MariaDB and PostgreSQL
// when SECKILL_MYSQL_DSN and SECKILL_POSTGRES_DSN are set, so both servers
// are measured in one invocation — with the dedup row, the conditional
// stock update and the order insert for every order. "batch" is the
// order.Consumer's path (500 per transaction by default, one stock update per
// activity per batch); "naive" is one transaction per message
// (order.WithBatchSize(1)). Run both in the same invocation, e.g.
// -benchtime=20000x. User IDs are decimal strings ("1", "2", …: what
// int64 IDs become) except in the ids=uuid runs, where they are
// UUID-shaped (36 bytes); the activity ID is "1".
func BenchmarkConsume(b *testing.B) {
	for _, kind := range dbKinds() {
		for _, bc := range []struct {
			name       string
			batch      int
			partitions int32
			uuid       bool
		}{{"batch", 500, 1, false}, {"batch", 500, 3, false}, {"batch", 500, 3, true}, {"batch", 2000, 6, false}, {"naive", 1, 1, false}} {
			name := fmt.Sprintf("db=%s/%s=%d/partitions=%d", kind, bc.name, bc.batch, bc.partitions)
			if bc.uuid {
				name += "/ids=uuid"
			}
			b.Run(name, func(b *testing.B) {
				benchConsume(b, kind, bc.batch, bc.partitions, bc.uuid)
			})
		}
	}
}

func benchConsume(b *testing.B, kind testenv.DBKind, batch int, partitions int32, uuid bool) {
	ctx := context.Background()
	db := openDB(b, kind)
	if err := order.AutoMigrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	n := b.N
	addActivity(b, db, "1", int64(n)+1, 1)
	brokers := testenv.Kafka(b, partitions, "orders")
	sp := syncProducer(b, brokers)
	now := time.Now()
	pms := make([]*sarama.ProducerMessage, 0, 1000)
	for i := 0; i < n; i++ {
		m := order.Message{MsgID: fmt.Sprintf("m-%d", i), ReservationID: fmt.Sprintf("r-%d", i),
			ActivityID: "1", UserID: benchUser(i, uuid), Qty: 1, CreatedAt: now}
		v, err := m.Encode()
		if err != nil {
			b.Fatal(err)
		}
		pms = append(pms, &sarama.ProducerMessage{Topic: "orders", Key: sarama.StringEncoder(m.Key()), Value: sarama.ByteEncoder(v)})
		if len(pms) == cap(pms) || i == n-1 {
			if err := sp.SendMessages(pms); err != nil {
				b.Fatal(err)
			}
			pms = pms[:0]
		}
	}
	gen, err := orderid.New(1)
	if err != nil {
		b.Fatal(err)
	}
	var txs, txOrders atomic.Int64 // the consumer's transactions and their new orders
	p, err := order.NewProcessor(db, gen, order.WithTxHook(func(_ context.Context, _ *gorm.DB, orders []order.Order) error {
		txs.Add(1)
		txOrders.Add(int64(len(orders)))
		return nil
	}))
	if err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	finished := make(chan time.Time, 1)
	c, err := order.NewConsumer(p, order.ReleaserFunc(func(context.Context, string, string) error { return nil }),
		order.WithBatchSize(batch),
		order.WithNotifier(notifierFunc(func(context.Context, order.Result) {
			if done.Add(1) == int64(n) {
				finished <- time.Now()
			}
		})))
	if err != nil {
		b.Fatal(err)
	}
	h := &timedHandler{Handler: newHandler(b, c, WithLinger(time.Millisecond))}
	b.ReportAllocs()
	b.ResetTimer()
	r := runGroup(b, brokers, nil, "bench", "orders", h)
	var end time.Time
	select {
	case end = <-finished:
	case <-time.After(10 * time.Minute):
		b.Fatalf("only %d of %d orders after 10 minutes", done.Load(), n)
	}
	b.StopTimer()
	r.stop()
	elapsed := end.Sub(time.Unix(0, h.start.Load()))
	b.ReportMetric(float64(n)/elapsed.Seconds(), "orders/s")
	if n := txs.Load(); n > 0 {
		b.ReportMetric(float64(txOrders.Load())/float64(n), "msgs/batch")
	}
	var orders int64
	if err := db.Model(&order.Order{}).Count(&orders).Error; err != nil || orders != int64(n) {
		b.Fatalf("orders = %d (err %v), want %d", orders, err, n)
	}
}

// benchUser is the user ID of message i of a benchmark.
func benchUser(i int, uuid bool) string {
	if uuid {
		return uuidUser(1 + i)
	}
	return num(1 + i)
}

// dbKinds lists the kinds of database available, in a fixed order.
func dbKinds() []testenv.DBKind {
	kinds := []testenv.DBKind{testenv.KindSQLite}
	if os.Getenv(testenv.EnvMySQLDSN) != "" {
		kinds = append(kinds, testenv.KindMySQL)
	}
	if os.Getenv(testenv.EnvPostgresDSN) != "" {
		kinds = append(kinds, testenv.KindPostgres)
	}
	return kinds
}

// openDB returns a fresh database of the given kind, without tables.
func openDB(t testing.TB, kind testenv.DBKind) *gorm.DB {
	t.Helper()
	switch kind {
	case testenv.KindMySQL:
		return testenv.MySQL(t)
	case testenv.KindPostgres:
		return testenv.Postgres(t)
	}
	return testenv.SQLite(t)
}

// notifierFunc adapts a function to order.Notifier.
type notifierFunc func(ctx context.Context, r order.Result)

func (f notifierFunc) Notify(ctx context.Context, r order.Result) { f(ctx, r) }
