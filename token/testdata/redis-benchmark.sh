#!/bin/sh
# Runs the exact take.lua that Pool.Take runs (lib.lua prepended) through
# redis-benchmark with EVALSHA at 50 connections, on a pool of N free
# tokens, every request a (mostly) distinct user. Usage, from token/:
#   PORT=16379 N=200000 sh testdata/redis-benchmark.sh
set -eu
PORT=${PORT:-16379}
N=${N:-200000}
P="tbench$$:{a:rb}:tok:"
SRC=$(cat lib.lua take.lua)
SHA=$(redis-cli -p "$PORT" script load "$SRC")
redis-cli -p "$PORT" eval "for i = 1, tonumber(ARGV[1]) do redis.call('RPUSH', KEYS[1], string.format('%022d', i)) end redis.call('HSET', KEYS[2], 'issued', ARGV[1]) return 1" 2 "${P}free" "${P}meta" "$N" >/dev/null
redis-benchmark -p "$PORT" -n "$N" -c 50 -r 1000000000 --csv \
  evalsha "$SHA" 5 "${P}free" "${P}state" "${P}owner" "${P}exp" "${P}meta" u:__rand_int__ 300000 0 16
redis-cli -p "$PORT" del "${P}free" "${P}state" "${P}owner" "${P}exp" "${P}meta" >/dev/null
