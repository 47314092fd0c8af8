package breaker_test

// The side-by-side benchmarks against sony/gobreaker/v2 (Execute, Allow,
// the open refusal and the plain-mutex reference of the closed path) are in
// the repository's bench module, so that this module does not require the
// anchor:
//
//	cd bench && flock /tmp/seckill-bench.lock go test -run '^$' -bench . -benchmem -count 5 ./breaker/

import (
	"context"
	"testing"

	"github.com/seckillkit/seckill/breaker"
)

func okDo(context.Context) (int, error) { return 1, nil }

// BenchmarkDo is the generic wrapper around Execute on the closed path,
// defaults.
func BenchmarkDo(b *testing.B) {
	br, err := breaker.New("bench")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := breaker.Do(ctx, br, okDo); err != nil {
			b.Fatal(err)
		}
	}
}
