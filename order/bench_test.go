package order

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckillkit/seckill/order/orderid"
)

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
				gen, err := orderid.New(1)
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

// BenchmarkHandleCart measures Processor.Handle, one message per
// transaction, one goroutine, per database: a plain order of 1 unit
// ("plain") against a cart of 3 lines in 3 activities ("cart3": 4 dedup
// rows, the order row, 3 line rows, 3 cap reads, 3 stock updates). Caps
// are 10, so the plain order reads the buyer's units too.
func BenchmarkHandleCart(b *testing.B) {
	for _, kind := range dbKinds() {
		for _, shape := range []string{"plain", "cart3"} {
			b.Run(fmt.Sprintf("db=%s/%s", kind, shape), func(b *testing.B) {
				ctx := context.Background()
				db := openDB(b, kind)
				if err := AutoMigrate(ctx, db); err != nil {
					b.Fatal(err)
				}
				for _, a := range []string{"1", "1/M", "1/L", "2"} {
					addActivity(b, db, a, int64(b.N)+1, 10)
				}
				gen, err := orderid.New(1)
				if err != nil {
					b.Fatal(err)
				}
				p, err := NewProcessor(db, gen)
				if err != nil {
					b.Fatal(err)
				}
				now := time.Now()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					m := Message{Version: MessageVersion, MsgID: fmt.Sprintf("m-%d", i), ReservationID: fmt.Sprintf("r-%d", i),
						ActivityID: "1", UserID: num(1 + i), Qty: 1, CreatedAt: now}
					if shape == "cart3" {
						m.Qty = 0
						m.Lines = []Line{{ActivityID: "1/M", Qty: 1}, {ActivityID: "1/L", Qty: 1}, {ActivityID: "2", Qty: 1}}
					}
					out, err := p.Handle(ctx, m)
					if err != nil || out.Status != StatusSuccess {
						b.Fatalf("%+v %v", out, err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
			})
		}
	}
}
