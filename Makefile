# Developer shortcuts. The two commands that matter need no make:
#   go run ./examples/fullstack
#   go test ./...

.PHONY: test test-real ci bench

test:
	go test ./...

# The real-server tier locally: starts Redis, a Redis Cluster and MariaDB on
# loopback (ports from SECKILL_PORT_BASE, default 16000), runs the suite with
# -race against them, stops them.
test-real:
	@set -e; dir=$$(mktemp -d); trap 'bash .ci/services stop $$dir' EXIT; \
	eval "$$(bash .ci/services start $$dir)"; go test -race -count=1 ./...

ci:
	bash .ci/run

# Benchmarks, 5 runs each, summarised by benchstat (go install
# golang.org/x/perf/cmd/benchstat@latest). Redis-bound benchmarks need
# SECKILL_REDIS_ADDR; see BENCHMARKS.md for the exact commands per row.
bench:
	go test -run '^$$' -bench . -benchmem -count 5 ./... | tee bench.txt
	benchstat bench.txt
