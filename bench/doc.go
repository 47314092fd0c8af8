// Package bench is the module of the benchmarks that measure a package of
// github.com/seckillkit/seckill side by side with an anchor library in the
// same `go test -bench` run:
//
//   - limiter: TokenBucket against golang.org/x/time/rate, SlidingWindow
//     against github.com/go-redis/redis_rate/v10 (real Redis);
//   - breaker: Execute, the two-step Allow and the open refusal against
//     github.com/sony/gobreaker/v2, with the plain-mutex reference of the
//     closed path;
//   - risk: the in-process checks and middleware against x/time/rate Allow;
//   - stock: the in-process sold-out refusal against x/time/rate Allow and
//     time.Now.
//
// It is a module of its own (with a replace of the library to ../) so that
// the library's go.mod requires none of the anchors: go.mod does not keep
// test-only requirements apart, and a service that imports one package of
// the library would otherwise get every anchor in its module graph, raised
// by minimal version selection to the version listed here. The package
// benchmarks that need no anchor (and the Redis-bound ones anchored by a
// plain go-redis call or by redis-benchmark) stay next to their code.
//
// The benchmarks run from this directory, e.g.
//
//	cd bench && go test -run '^$' -bench . -benchmem ./breaker/
//
// Redis-bound ones need SECKILL_REDIS_ADDR and are skipped without it.
// Figures and the exact commands per row: BENCHMARKS.md.
package bench
