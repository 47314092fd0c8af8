package captcha

import (
	"context"
	"testing"

	"github.com/seckillkit/seckill/internal/testenv"
)

// BenchmarkGenerator measures the in-process image generators (the cost of
// drawing the PNG dominates).
func BenchmarkGenerator(b *testing.B) {
	letters, err := Letters(5, Style{})
	if err != nil {
		b.Fatal(err)
	}
	arith, err := Arithmetic(Style{}, false)
	if err != nil {
		b.Fatal(err)
	}
	for name, g := range map[string]Generator{"letters": letters, "arithmetic": arith} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.Generate(context.Background(), Request{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkNormalizeAnswer measures answer normalisation.
func BenchmarkNormalizeAnswer(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = normalizeAnswer(" XkCd7 ")
	}
}

// BenchmarkGenerateVerify measures one Generate (fixed text generator, so
// only Redis is measured) plus one successful Verify against the real
// Redis named by SECKILL_REDIS_ADDR, 50 parallel callers; skipped otherwise.
func BenchmarkGenerateVerify(b *testing.B) {
	rdb := testenv.RealRedis(b)
	s, err := New(rdb, fixed("", "abc"), WithKeyPrefix(testenv.Prefix(b)))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetParallelism(25) // 25 × GOMAXPROCS(2) = 50 callers
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ch, err := s.Generate(ctx, GenerateParams{User: "u"})
			if err == nil {
				err = s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "ABC", User: "u"})
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}
