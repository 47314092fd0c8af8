# Developer shortcuts. The two commands that matter need no make:
#   go run ./examples/fullstack
#   go test ./...                     (the library)
#   go test ./examples/fullstack/...  (the reference deployment)

.PHONY: test test-real ci bench chaos soak

test:
	go test ./...
	go test ./examples/fullstack/...

# The real-server tier locally: starts Redis, a Redis Cluster and MariaDB on
# loopback (ports from SECKILL_PORT_BASE, default 16000), runs the suite with
# -race against them, stops them.
test-real:
	@set -e; dir=$$(mktemp -d); trap 'bash .ci/services stop $$dir' EXIT; \
	eval "$$(bash .ci/services start $$dir)"; \
	go test -race -count=1 -timeout 40m ./... ./examples/fullstack/...

ci:
	bash .ci/run

# The fault battery (examples/fullstack/chaos, see RELIABILITY.md) with a
# bigger workload than the one `go test ./...` runs: 3 seeds per scenario,
# 3,000 users, 100 units, and the scenarios with a known violation
# (SECKILL_CHAOS_KNOWN=1: F12l fails until the finding is fixed). Needs
# SECKILL_MYSQL_DSN and redis-server on PATH; F5 needs mariadbd and
# mariadb-install-db (/usr/sbin is searched), F12 and F12l redis-cli.
# Writes the results table and the fault timelines to
# $$TMPDIR/seckill-chaos-report.md (/tmp without TMPDIR).
chaos:
	SECKILL_CHAOS_SEEDS=3 SECKILL_CHAOS_USERS=3000 SECKILL_CHAOS_STOCK=100 SECKILL_CHAOS_KNOWN=1 \
	SECKILL_CHAOS_REPORT=$${TMPDIR:-/tmp}/seckill-chaos-report.md \
	go test -count=1 -timeout 90m -run TestChaos -v ./examples/fullstack/chaos/

# The randomized soak (examples/fullstack/chaos TestSoak, see
# RELIABILITY.md): per seed, the battery's chain under continuous load for
# 30 minutes while a nemesis strikes faults of the battery's catalogue on
# a seeded random schedule with overlaps; invariants and every buyer's
# history checked at each quiet checkpoint (every ~5 min) and at the end.
# 3 fresh random seeds, each printed with the line that replays it
# (SECKILL_SOAK_SEED). SECKILL_SOAK_DURATION and SECKILL_SOAK_SEEDS resize
# it. Same servers as `make chaos`. Report: $$TMPDIR/seckill-soak-report.md.
soak:
	SECKILL_SOAK=long SECKILL_SOAK_RANDOM=1 SECKILL_SOAK_REPORT=$${TMPDIR:-/tmp}/seckill-soak-report.md \
	go test -count=1 -timeout 6h -run 'TestSoak$$' -v ./examples/fullstack/chaos/

# Benchmarks, 5 runs each, summarised by benchstat (go install
# golang.org/x/perf/cmd/benchstat@latest). Redis-bound benchmarks need
# SECKILL_REDIS_ADDR; see BENCHMARKS.md for the exact commands per row.
bench:
	(go test -run '^$$' -bench . -benchmem -count 5 ./... ./examples/fullstack/... && cd bench && go test -run '^$$' -bench . -benchmem -count 5 ./...) | tee bench.txt
	benchstat bench.txt
