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

// BenchmarkReserveSize is BenchmarkReserve on the sizes of a sale in 12
// sizes, round robin: each transaction also locks the sale's row and sums
// the buyer's units over the sale's sizes.
func BenchmarkReserveSize(b *testing.B) {
	e := newEnv(b)
	a := activity("1", 0, 1)
	for i := range 12 {
		a.Variants = append(a.Variants, stock.Variant{ID: strconv.Itoa(36 + i), Stock: 1 << 40})
	}
	if err := e.s.Open(bg, a, 1<<40); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			size := stock.VariantOf(a.ID, a.Variants[i%12].ID)
			r, err := e.s.Reserve(bg, req(size, strconv.FormatInt(i, 10), 1, rid("b-%d", i)))
			if err != nil || !(r.Status == stock.Reserved) {
				b.Fatalf("reserve: %v %v", r.Status, err)
			}
		}
	})
}
