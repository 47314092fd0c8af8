#!/bin/sh
# bench.sh: Room.Join and Room.Admit against redis-benchmark running the
# same scripts (lib.lua + join.lua, lib.lua + admit.lua) with EVALSHA on 50
# connections, against the same Redis, alternated in one command (the box's
# load drifts). Run it under the shared benchmark lock:
#
#   eval "$(bash .ci/services start)"   # or export SECKILL_REDIS_ADDR=host:port
#   flock /tmp/seckill-bench.lock waitroom/testdata/bench.sh
#
# join:  redis-benchmark evalsha join.lua 3 meta ent q <user> 0
#        (distinct users, -r 10^9; a room configured with a start an hour
#        ago: every entry is placed first in, first out), then
#        go test -bench 'BenchmarkJoin50$' (50 goroutines; "join" is
#        Room.Join, "script" the bare script through go-redis EVALSHA)
# admit: the queue filled with N users by redis-benchmark's join, then
#        redis-benchmark evalsha admit.lua 5 meta ent pq q adm 0 60000 0 1000 1
#        (one user a call, the rate 10^9/s: no call waits), then
#        go test -bench 'BenchmarkAdmit50$'
# Env: N (requests per run, default 100000), ROUNDS (default 3).
set -eu
ADDR=${SECKILL_REDIS_ADDR:?set SECKILL_REDIS_ADDR}
HOST=${ADDR%:*}
PORT=${ADDR##*:}
N=${N:-100000}
ROUNDS=${ROUNDS:-3}
DIR=$(cd "$(dirname "$0")/.." && pwd)
CLI="redis-cli -h $HOST -p $PORT"
P="wrbench$$:"
K="$P{wr:b}"
COMMIT=$(printf 'the seed revealed at the start!!' | sha256sum | cut -d' ' -f1)
START=$(( ($(date +%s) - 3600) * 1000 ))

clean() { $CLI del "$K:meta" "$K:ent" "$K:pq" "$K:q" "$K:adm" >/dev/null; }
trap clean EXIT
configure() { # rate
	clean
	$CLI eval "$(cat "$DIR/lib.lua" "$DIR/configure.lua")" 1 "$K:meta" "$START" "$COMMIT" "$1" 0 0 >/dev/null
}
rb() { # label, redis-benchmark arguments...: prints requests/s
	label=$1
	shift
	row=$(redis-benchmark -h "$HOST" -p "$PORT" -c 50 -n "$N" -r 1000000000 --csv "$@" | tail -n 1)
	echo "redis-benchmark $label: $(echo "$row" | awk -F'","' '{ print $2 }') req/s"
}

i=0
while [ $i -lt "$ROUNDS" ]; do
	configure 1000
	JOIN=$($CLI script load "$(cat "$DIR/lib.lua" "$DIR/join.lua")")
	rb "join.lua" evalsha "$JOIN" 3 "$K:meta" "$K:ent" "$K:q" "u__rand_int__" 0
	echo "  entries: $($CLI hlen "$K:ent")"
	(cd "$DIR" && go test -run '^$' -bench 'BenchmarkJoin50$' -benchtime "${N}x" -count 1 . | grep '^Benchmark')

	configure 1000000000
	JOIN=$($CLI script load "$(cat "$DIR/lib.lua" "$DIR/join.lua")")
	redis-benchmark -h "$HOST" -p "$PORT" -c 50 -n $((N * 2)) -r 1000000000 -q evalsha "$JOIN" 3 "$K:meta" "$K:ent" "$K:q" "u__rand_int__" 0 >/dev/null
	ADMIT=$($CLI script load "$(cat "$DIR/lib.lua" "$DIR/admit.lua")")
	rb "admit.lua (max 1)" evalsha "$ADMIT" 5 "$K:meta" "$K:ent" "$K:pq" "$K:q" "$K:adm" 0 60000 0 1000 1
	echo "  admitted: $($CLI zcard "$K:adm") of $($CLI hlen "$K:ent") entries"
	(cd "$DIR" && go test -run '^$' -bench 'BenchmarkAdmit50$' -benchtime "${N}x" -count 1 . | grep '^Benchmark')
	i=$((i + 1))
done
