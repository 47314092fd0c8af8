#!/usr/bin/env bash
# The peak of a sale measured on the split topology: up.sh with one
# `-role api` instance, PEAK_WORKERS `-role worker` processes and cmd/broker
# as their own processes, and `loadgen -peak` addressing the api instance
# directly (not through nginx), so the server CPU per buy it reads from that
# instance's /metrics is the api's own, without the consumer, relay and
# broker beside it. The bare server runs in a child process of the
# generator; the Redis commands per accepted buy are read from the Redis the
# environment names (INFO commandstats). Then down.sh --purge.
#
#   eval "$(bash .ci/services start)"
#   examples/fullstack/deploy/peak.sh                  # 20,000 users for 10,000 units
#   PEAK_USERS=10000 PEAK_REPORT=/tmp/peak.html examples/fullstack/deploy/peak.sh
#
# Needs what up.sh needs (SECKILL_MYSQL_DSN, SECKILL_REDIS_ADDR or
# SECKILL_REDIS_CLUSTER_ADDRS, go, nginx).
#
# Settings (environment; defaults in brackets):
#   PEAK_USERS      buyers, one buy each; the stock is half of them [20000]
#   PEAK_WORKERS    worker processes [1]
#   PEAK_CONNS      the generator's connections [256]
#   PEAK_REPORT     also write the HTML report here []
#   PEAK_START_IN   the sale starts this long after the api is up; longer
#                   than the generator's preparation of every buyer [120s]
#   PEAK_ARGS       extra loadgen flags (word-split) []
#   DEPLOY_*        passed to up.sh (DEPLOY_APIS, DEPLOY_USERS, DEPLOY_STOCK,
#                   DEPLOY_DEMO, DEPLOY_START_IN and DEPLOY_PATH_LEAD are set here)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)

users=${PEAK_USERS:-20000}
[[ $users =~ ^[1-9][0-9]{0,8}$ ]] || { echo "peak: PEAK_USERS must be a positive integer, got '$users'" >&2; exit 1; }
stock=$((users / 2 > 0 ? users / 2 : 1))

bin=$(mktemp -d /tmp/seckill-peak.XXXXXX)
trap 'rm -rf "$bin"' EXIT
(cd "$repo" && go build -o "$bin/loadgen" ./examples/fullstack/loadgen)

env_out=$(DEPLOY_APIS=1 DEPLOY_WORKERS="${PEAK_WORKERS:-1}" DEPLOY_DEMO=1 \
  DEPLOY_USERS="$users" DEPLOY_STOCK="$stock" \
  DEPLOY_START_IN="${PEAK_START_IN:-120s}" DEPLOY_PATH_LEAD=10m \
  EDGE_UNLIMITED=127.0.0.1 "$here/up.sh")
eval "$env_out"
trap '"$here/down.sh" --purge "$SECKILL_DEPLOY_STATE" >&2 || true; rm -rf "$bin"' EXIT

api=${SECKILL_DEPLOY_APIS%%,*}
args=(-q -peak -target "http://$api" -users "$users" -stock "$stock" -c "${PEAK_CONNS:-256}")
[ -z "${PEAK_REPORT:-}" ] || args+=(-report "$PEAK_REPORT")
read -ra extra <<<"${PEAK_ARGS:-}"
echo "peak: api instance $api (-role api), ${PEAK_WORKERS:-1} worker(s), broker $SECKILL_DEPLOY_BROKERS; $users users for $stock units" >&2
# -target: loadgen reads the Redis to count from SECKILL_REDIS_ADDR or
# SECKILL_REDIS_CLUSTER_ADDRS, the same the deployment uses.
"$bin/loadgen" "${args[@]}" "${extra[@]}"
