#!/bin/sh
# bench.sh: Deductor.Reserve vs redis-benchmark running the same reserve.lua
# with EVALSHA, against the same Redis, in one command. Run it from anywhere,
# under the shared benchmark lock:
#
#   eval "$(bash .ci/services start)"   # or export SECKILL_REDIS_ADDR=host:port
#   flock /tmp/seckill-bench.lock stock/testdata/bench.sh
#
# Scenarios (both with 50 connections / 50 callers, distinct users and
# request IDs, the activity's keys carrying an expiry like Load sets):
#   deduct   stock never runs out: every call reserves (full write path)
#   soldout  stock 0: every call is refused inside Redis
# Env: N (requests per run, default 200000), COUNT (go -count, default 3).
#
# With the argument "coalesce" it compares one-by-one Reserve with
# coalesced Reserve (WithCoalescing) instead, 200 callers, stock 10^9:
#   redis-benchmark -c 200  EVALSHA reserve.lua        (one request per call)
#   redis-benchmark -c 4    EVALSHA reserve_many.lua   (B requests per call, B=64)
#   go test -bench BenchmarkReserveCoalescing          (one-by-one, coalesced)
# each redis-benchmark run followed by the server's CPU (INFO cpu
# used_cpu_sys + used_cpu_user) per reservation over that run.
set -eu
ADDR=${SECKILL_REDIS_ADDR:?set SECKILL_REDIS_ADDR}
HOST=${ADDR%:*}
PORT=${ADDR##*:}
N=${N:-200000}
COUNT=${COUNT:-3}
DIR=$(cd "$(dirname "$0")/.." && pwd)
CLI="redis-cli -h $HOST -p $PORT"

P="rbench$$:"
META="$P{a:1}:meta"
BUYERS="$P{a:1}:buyers"
LEDGER="$P{a:1}:resv"
EXP=$(( $(date +%s) * 1000 + 86400000 ))

load() { # stock
	$CLI del "$META" "$BUYERS" "$LEDGER" >/dev/null
	$CLI hset "$META" stock "$1" total "$1" limit 1 start 0 end 0 exp "$EXP" >/dev/null
}
rb() { # name
	# (Re)load the script right before the run: tests on a shared server may
	# SCRIPT FLUSH, and redis-benchmark cannot recover from NOSCRIPT.
	SHA=$($CLI script load "$(cat "$DIR/reserve.lua")")
	# -r: a large keyspace so request IDs and users rarely repeat (the Go
	# benchmark uses strictly distinct ones).
	echo "redis-benchmark $1: evalsha reserve.lua 3 meta buyers ledger <rid> <user> 1"
	redis-benchmark -h "$HOST" -p "$PORT" -c 50 -n "$N" -r 1000000000 --csv \
		evalsha "$SHA" 3 "$META" "$BUYERS" "$LEDGER" __rand_int__ __rand_int__ 1 | tail -n 1
	# Proof that the script did the work: ledger entries and stock left.
	echo "  ledger entries: $($CLI hlen "$LEDGER")  stock left: $($CLI hget "$META" stock)"
}
trap '$CLI del "$META" "$BUYERS" "$LEDGER" >/dev/null' EXIT

cpu() { # used_cpu_sys + used_cpu_user of the server, seconds
	$CLI info cpu | tr -d '\r' | awk -F: '$1 == "used_cpu_sys" || $1 == "used_cpu_user" { s += $2 } END { printf "%.3f", s }'
}

if [ "${1:-}" = coalesce ]; then
	B=${B:-64}
	load 1000000000
	SHA=$($CLI script load "$(cat "$DIR/reserve.lua")")
	echo "redis-benchmark -c 200: evalsha reserve.lua 3 meta buyers ledger <rid> <user> 1"
	c0=$(cpu)
	row=$(redis-benchmark -h "$HOST" -p "$PORT" -c 200 -n "$N" -r 1000000000 --csv \
		evalsha "$SHA" 3 "$META" "$BUYERS" "$LEDGER" __rand_int__ __rand_int__ 1 | tail -n 1)
	c1=$(cpu)
	rps=$(echo "$row" | awk -F'","' '{ print $2 }')
	echo "  reservations/s: $rps  latency ms (avg,min,p50,p95,p99,max): ${row##*\"$rps\",}"
	n=$($CLI hlen "$LEDGER")
	echo "  ledger entries: $n  redis cpu: $(echo "$c0 $c1 $n" | awk '{ printf "%.2f", ($2 - $1) * 1e6 / $3 }') us/reservation"

	load 1000000000
	SHA=$($CLI script load "$(cat "$DIR/reserve_many.lua")")
	# B request IDs, B users, B quantities; every __rand_int__ is drawn anew.
	IDS="" USERS="" QTYS=""
	i=0
	while [ $i -lt "$B" ]; do
		IDS="$IDS __rand_int__" USERS="$USERS __rand_int__" QTYS="$QTYS 1"
		i=$((i + 1))
	done
	CALLS=$((N / B))
	echo "redis-benchmark -c 4: evalsha reserve_many.lua 3 meta buyers ledger $B <$B rids> <$B users> <$B x 1> ($CALLS calls)"
	c0=$(cpu)
	# shellcheck disable=SC2086 # the lists are split on purpose
	row=$(redis-benchmark -h "$HOST" -p "$PORT" -c 4 -n "$CALLS" -r 1000000000 --csv \
		evalsha "$SHA" 3 "$META" "$BUYERS" "$LEDGER" "$B" $IDS $USERS $QTYS | tail -n 1)
	c1=$(cpu)
	n=$($CLI hlen "$LEDGER")
	rps=$(echo "$row" | awk -F'","' '{ print $2 }')
	echo "  calls/s: $rps  reservations/s: $(echo "$rps $B" | awk '{ printf "%.0f", $1 * $2 }')  latency ms (avg,min,p50,p95,p99,max): ${row##*\"$rps\",}"
	echo "  ledger entries: $n  redis cpu: $(echo "$c0 $c1 $n" | awk '{ printf "%.2f", ($2 - $1) * 1e6 / $3 }') us/reservation"

	# COUNT rounds of -count 1, so the two modes alternate (the box's load drifts).
	i=0
	while [ $i -lt "$COUNT" ]; do
		(cd "$DIR" && go test -run '^$' -bench 'BenchmarkReserveCoalescing$' -benchtime "${N}x" -benchmem -count 1 . | grep '^Benchmark')
		i=$((i + 1))
	done
	exit 0
fi

load 1099511627776
rb deduct
(cd "$DIR" && go test -run '^$' -bench 'BenchmarkReserve$' -benchtime "${N}x" -benchmem -count "$COUNT" .)
load 0
rb soldout
load 1099511627776
rb deduct
