package orderid

import "testing"

// BenchmarkNextID measures the snowflake generator (one shared generator).
func BenchmarkNextID(b *testing.B) {
	g, err := New(1)
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
