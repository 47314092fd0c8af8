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

load 1099511627776
rb deduct
(cd "$DIR" && go test -run '^$' -bench 'BenchmarkReserve$' -benchtime "${N}x" -benchmem -count "$COUNT" .)
load 0
rb soldout
load 1099511627776
rb deduct
