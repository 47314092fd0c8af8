package outbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/seckillkit/seckill/internal/testenv"
	"gorm.io/gorm"
)

// Database-bound benchmarks run on every database available, one
// sub-benchmark per kind (sqlite/…, mysql/…, postgres/…): SQLite always,
// MariaDB and PostgreSQL when SECKILL_MYSQL_DSN and SECKILL_POSTGRES_DSN are
// set, so one run puts them side by side. Kafka is an in-process 3-broker
// kfake (or SECKILL_KAFKA_BROKERS). Figures: the outbox sections of
// BENCHMARKS.md.

// plainRow has the outbox row's shape without the package: the anchor for
// Write's own overhead on the same database.
type plainRow struct {
	ID            int64     `gorm:"primaryKey;autoIncrement"`
	MsgID         string    `gorm:"type:varchar(64);uniqueIndex"`
	Topic         string    `gorm:"type:varchar(255)"`
	MsgKey        string    `gorm:"type:varchar(255)"`
	Payload       []byte    `gorm:""`
	Status        string    `gorm:"type:varchar(16);index:idx_plain_poll,priority:1"`
	NextAttemptAt time.Time `gorm:"precision:6;index:idx_plain_poll,priority:2"`
	CreatedAt     time.Time `gorm:"precision:6"`
}

func (plainRow) TableName() string { return "outbox_bench_plain" }

var benchPayload = []byte(`{"v":1,"msg_id":"0123456789abcdef0123456789abcdef","reservation_id":"r-123456","user_id":123456,"activity_id":42,"qty":1}`)

// BenchmarkWrite measures the cost of one outbox message written in the
// caller's transaction (ns/op is per message), on each database.
func BenchmarkWrite(b *testing.B) {
	for _, kind := range dbKinds() {
		for _, perTx := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/outbox/per-tx=%d", kind, perTx), func(b *testing.B) {
				db := migratedDB(b, kind)
				w, _ := NewWriter()
				ctx := context.Background()
				msgs := make([]Message, perTx)
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; done += perTx {
					n := min(perTx, b.N-done)
					for i := range n {
						msgs[i] = Message{Topic: "orders", Key: "123456", Payload: benchPayload}
					}
					err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return w.Write(ctx, tx, msgs[:n]...) })
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
			b.Run(fmt.Sprintf("%s/anchor-gorm-create/per-tx=%d", kind, perTx), func(b *testing.B) {
				db := openDB(b, kind)
				if err := db.AutoMigrate(&plainRow{}); err != nil {
					b.Fatal(err)
				}
				rows := make([]plainRow, perTx)
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; done += perTx {
					n := min(perTx, b.N-done)
					now := time.Now().UTC()
					for i := range n {
						rows[i] = plainRow{MsgID: NewMsgID(), Topic: "orders", MsgKey: "123456", Payload: benchPayload,
							Status: "PENDING", NextAttemptAt: now, CreatedAt: now}
					}
					err := db.Transaction(func(tx *gorm.DB) error { return tx.Create(rows[:n]).Error })
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

func benchProducer(b *testing.B, brokers []string) sarama.SyncProducer {
	c := safeProducerConfig()
	c.Producer.Flush.MaxMessages = 0
	p, err := sarama.NewSyncProducer(brokers, c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

// fill writes n PENDING rows, 1000 per transaction.
func fill(b *testing.B, db *gorm.DB, w *Writer, n int, topic string) {
	msgs := make([]Message, 0, 1000)
	for i := range n {
		msgs = append(msgs, Message{Topic: topic, Key: fmt.Sprint(i % 1000), Payload: benchPayload})
		if len(msgs) == cap(msgs) || i == n-1 {
			if err := w.Write(context.Background(), db, msgs...); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
}

// BenchmarkRelay measures rows/s from the outbox table into Kafka (kfake):
// claim + publish + mark SENT, b.N rows written beforehand. The anchor
// sends the same records straight through the same producer config.
func BenchmarkRelay(b *testing.B) {
	type variant struct {
		name  string
		batch int
		wrap  func(p *SaramaPublisher) Publisher
		conc  int
	}
	variants := []variant{
		{"batch-publisher/batch=100", 100, func(p *SaramaPublisher) Publisher { return p }, 1},
		{"batch-publisher/batch=500", 500, func(p *SaramaPublisher) Publisher { return p }, 1},
		{"one-by-one/concurrency=1", 100, func(p *SaramaPublisher) Publisher { return PublisherFunc(p.Publish) }, 1},
		{"one-by-one/concurrency=16", 100, func(p *SaramaPublisher) Publisher { return PublisherFunc(p.Publish) }, 16},
	}
	for _, kind := range dbKinds() {
		for _, v := range variants {
			b.Run(string(kind)+"/relay/"+v.name, func(b *testing.B) {
				topic := "bench-" + NewMsgID()[:8]
				brokers := testenv.Kafka(b, 3, topic)
				sp, _ := NewSaramaPublisher(benchProducer(b, brokers))
				db := migratedDB(b, kind)
				w, _ := NewWriter()
				fill(b, db, w, b.N, topic)
				r, err := NewRelay(db, v.wrap(sp), WithBatchSize(v.batch), WithPublishConcurrency(v.conc))
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				sent := 0
				for sent < b.N {
					got, err := r.RunOnce(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if got.Sent != got.Claimed {
						b.Fatalf("batch %+v", got)
					}
					if got.Claimed == 0 {
						b.Fatalf("drained at %d of %d", sent, b.N)
					}
					sent += got.Sent
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
	for _, batch := range []int{1, 100, 500} {
		b.Run(fmt.Sprintf("anchor-sarama-send/batch=%d", batch), func(b *testing.B) {
			topic := "bench-" + NewMsgID()[:8]
			brokers := testenv.Kafka(b, 3, topic)
			p := benchProducer(b, brokers)
			pms := make([]*sarama.ProducerMessage, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				n := min(batch, b.N-done)
				for i := range n {
					pms[i] = producerMessage(Message{Topic: topic, Key: fmt.Sprint((done + i) % 1000), MsgID: "0123456789abcdef0123456789abcdef", Payload: benchPayload})
				}
				var err error
				if n == 1 {
					_, _, err = p.SendMessage(pms[0])
				} else {
					err = p.SendMessages(pms[:n])
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
