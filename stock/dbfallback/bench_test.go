package dbfallback

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/seckillkit/seckill/stock"
)

// BenchmarkReserve measures one reservation transaction (lock the pool,
// look the ID up, cap, conditional UPDATE, INSERT) on the test database:
// SQLite by default, MariaDB with SECKILL_MYSQL_DSN. Every call reserves.
func BenchmarkReserve(b *testing.B) {
	e := newEnv(b)
	const act = "1"
	e.open(b, act, 1<<40, 1)
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			r, err := e.s.Reserve(bg, req(act, strconv.FormatInt(i, 10), 1, rid("b-%d", i)))
			if err != nil || !(r.Status == stock.Reserved) {
				b.Fatalf("reserve: %v %v", r.Status, err)
			}
		}
	})
}

// BenchmarkReserveReplay measures a retry of a known reservation ID.
func BenchmarkReserveReplay(b *testing.B) {
	e := newEnv(b)
	const act = "1"
	e.open(b, act, 10, 1)
	if _, err := e.s.Reserve(bg, req(act, "1", 1, "same")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := e.s.Reserve(bg, req(act, "1", 1, "same"))
			if err != nil || !r.Replayed {
				b.Fatalf("replay: %v %v", r.Status, err)
			}
		}
	})
}
