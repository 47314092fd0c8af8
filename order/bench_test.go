package order

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/seckillkit/seckill/internal/testenv"
)

// timedHandler records when the group session started, so join time is not
// counted as consume time.
type timedHandler struct {
	*Consumer
	start atomic.Int64
}

func (h *timedHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.start.CompareAndSwap(0, time.Now().UnixNano())
	return h.Consumer.Setup(s)
}

// BenchmarkConsume measures orders/s from Kafka (in-process kfake, one
// consumer process; one, three or six partitions consumed concurrently)
// into each database available — SQLite always, MariaDB and PostgreSQL
// when SECKILL_MYSQL_DSN and SECKILL_POSTGRES_DSN are set, so both servers
// are measured in one invocation — with the dedup row, the conditional
// stock update and the order insert for every order. "batch" is the
// Consumer's path (500 per transaction by default, one stock update per
// activity per batch); "naive" is one transaction per message
// (WithBatchSize(1)). Run both in the same invocation, e.g.
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

// benchUser is the user ID of message i of a benchmark.
func benchUser(i int, uuid bool) string {
	if uuid {
		return uuidUser(1 + i)
	}
	return num(1 + i)
}

// BenchmarkProcess measures Processor.Process alone (no Kafka) on batches
// of 500 messages, one goroutine, per database, with the batch's rows
// written through prepared multi-row INSERTs ("prepared", the default) or
// through the same statements sent as text ("text"; on pgx, which caches
// the statements it is given, that is an implicit prepare per connection).
func BenchmarkProcess(b *testing.B) {
	for _, kind := range dbKinds() {
		for _, mode := range []string{"prepared", "text"} {
			b.Run(fmt.Sprintf("db=%s/insert=%s", kind, mode), func(b *testing.B) {
				ctx := context.Background()
				db := openDB(b, kind)
				if err := AutoMigrate(ctx, db); err != nil {
					b.Fatal(err)
				}
				const batch = 500
				n := (b.N + batch - 1) / batch * batch
				addActivity(b, db, "1", int64(n)+1, 1)
				gen, err := NewIDGenerator(1)
				if err != nil {
					b.Fatal(err)
				}
				p, err := NewProcessor(db, gen)
				if err != nil {
					b.Fatal(err)
				}
				p.stmts.off.Store(mode == "text")
				msgs := make([]Message, n)
				now := time.Now()
				for i := range msgs {
					msgs[i] = Message{Version: MessageVersion, MsgID: fmt.Sprintf("m-%d", i), ReservationID: fmt.Sprintf("r-%d", i),
						ActivityID: "1", UserID: num(1 + i), Qty: 1, CreatedAt: now}
				}
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for lo := 0; lo < n; lo += batch {
					if _, err := p.Process(ctx, msgs[lo:lo+batch]); err != nil {
						b.Fatal(err)
					}
				}
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(n)/elapsed.Seconds(), "orders/s")
				if mode == "prepared" && p.stmts.used.Load() == 0 {
					b.Fatal("no prepared statement used")
				}
				var orders int64
				if err := db.Model(&Order{}).Count(&orders).Error; err != nil || orders != int64(n) {
					b.Fatalf("orders = %d (err %v), want %d", orders, err, n)
				}
			})
		}
	}
}

func benchConsume(b *testing.B, kind testenv.DBKind, batch int, partitions int32, uuid bool) {
	ctx := context.Background()
	db := openDB(b, kind)
	if err := AutoMigrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	n := b.N
	addActivity(b, db, "1", int64(n)+1, 1)
	brokers := testenv.Kafka(b, partitions, "orders")
	sp := syncProducer(b, brokers)
	now := time.Now()
	pms := make([]*sarama.ProducerMessage, 0, 1000)
	for i := 0; i < n; i++ {
		m := Message{MsgID: fmt.Sprintf("m-%d", i), ReservationID: fmt.Sprintf("r-%d", i),
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
	gen, err := NewIDGenerator(1)
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewProcessor(db, gen)
	if err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	finished := make(chan time.Time, 1)
	c, err := NewConsumer(p, ReleaserFunc(func(context.Context, string, string) error { return nil }),
		WithBatchSize(batch), WithLinger(time.Millisecond),
		WithNotifier(NotifierFunc(func(context.Context, Result) {
			if done.Add(1) == int64(n) {
				finished <- time.Now()
			}
		})))
	if err != nil {
		b.Fatal(err)
	}
	h := &timedHandler{Consumer: c}
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
	if st := c.Stats(); st.Batches > 0 {
		b.ReportMetric(float64(st.BatchMessages)/float64(st.Batches), "msgs/batch")
	}
	var orders int64
	if err := db.Model(&Order{}).Count(&orders).Error; err != nil || orders != int64(n) {
		b.Fatalf("orders = %d (err %v), want %d", orders, err, n)
	}
}

// BenchmarkNextID measures the snowflake generator (one shared generator).
func BenchmarkNextID(b *testing.B) {
	g, err := NewIDGenerator(1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.NextID(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkDecode measures message decoding and validation.
func BenchmarkDecode(b *testing.B) {
	v, err := msg(1, "1", uuidUser(1)).Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := Decode(v); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
