#!/usr/bin/env bash
# Brings up examples/fullstack as separate processes on loopback: the broker
# (cmd/broker, log on disk), DEPLOY_WORKERS `-role worker` processes,
# DEPLOY_APIS `-role api` instances and nginx in front (edge.sh), sharing the
# Redis (Cluster) and MariaDB/MySQL named by the environment. Each run gets a
# fresh database and Redis key prefix. It waits on health checks, prints the
# environment of the deployment and returns; down.sh stops it.
#
#   eval "$(deploy/up.sh)"                   # exports SECKILL_EDGE_URL, SECKILL_DEPLOY_STATE, ...
#   deploy/down.sh "$SECKILL_DEPLOY_STATE"    # stop everything by PID (--purge: drop the data too)
#
# Needs: SECKILL_MYSQL_DSN, and SECKILL_REDIS_CLUSTER_ADDRS or
# SECKILL_REDIS_ADDR (the Cluster wins when both are set); go (unless
# DEPLOY_BIN has the binaries) and nginx.
#
# Settings (environment; defaults in brackets):
#   DEPLOY_STATE        state directory [a new /tmp/seckill-deploy.XXXXXX]
#   DEPLOY_APIS         api instances [2]
#   DEPLOY_WORKERS      worker processes (one consumer group) [1]
#   DEPLOY_BIN          directory holding prebuilt `fullstack` and `broker` [built into STATE/bin]
#   DEPLOY_DB           database name [seckill_deploy_<random>]
#   DEPLOY_PREFIX       Redis key prefix [dep<random>:]
#   DEPLOY_DEMO         1: the instances run -demo and the edge passes /api/demo/* (load generator) [0]
#   DEPLOY_STOCK        units for sale [100]
#   DEPLOY_USERS        demo users user1..userN [10000]
#   DEPLOY_START_IN     the sale starts this long after the first instance is up [60s]
#   DEPLOY_PATH_LEAD    signed buy path released this long before the start [5s]
#   DEPLOY_PARTITIONS   partitions of the order topic [3]
#   DEPLOY_GLOBAL_RATE  buy requests/s the api tier admits in all; each instance
#                       runs -global-rate DEPLOY_GLOBAL_RATE/DEPLOY_APIS [100000]
#   DEPLOY_GLOBAL_BURST the tier's burst, split the same way [20000]
#   DEPLOY_LOG_LEVEL    log level of the api instances (workers log at info) [warn]
#   DEPLOY_SERVICE_ARGS extra flags for every service process (word-split) []
#   DEPLOY_TIMEOUT      seconds to wait for each process to become healthy [60]
#   EDGE_*              nginx settings, see edge.sh; EDGE_GLOBAL_RATE/BURST
#                       default to DEPLOY_GLOBAL_RATE/BURST
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

apis=${DEPLOY_APIS:-2}
workers=${DEPLOY_WORKERS:-1}
demo=${DEPLOY_DEMO:-0}
stock=${DEPLOY_STOCK:-100}
users=${DEPLOY_USERS:-10000}
start_in=${DEPLOY_START_IN:-60s}
path_lead=${DEPLOY_PATH_LEAD:-5s}
partitions=${DEPLOY_PARTITIONS:-3}
global_rate=${DEPLOY_GLOBAL_RATE:-100000}
global_burst=${DEPLOY_GLOBAL_BURST:-20000}
api_log=${DEPLOY_LOG_LEVEL:-warn}
timeout=${DEPLOY_TIMEOUT:-60}

for v in apis workers stock users partitions global_rate global_burst timeout; do
  is_uint "${!v}" || die "$v must be a positive integer, got '${!v}'"
done
case "$demo" in 1 | true | on) demo=1 ;; 0 | false | off) demo=0 ;; *) die "DEPLOY_DEMO must be 0 or 1, got '$demo'" ;; esac
((global_rate >= apis && global_burst >= apis)) || die "DEPLOY_GLOBAL_RATE and DEPLOY_GLOBAL_BURST must be at least DEPLOY_APIS"

# The shared servers.
dsn=${SECKILL_MYSQL_DSN:-}
[ -n "$dsn" ] || die "SECKILL_MYSQL_DSN is not set (e.g. 'root@tcp(127.0.0.1:3306)/?parseTime=true&interpolateParams=true&loc=UTC')"
# The run's database is -mysql-db: take any database name out of the DSN.
if [[ $dsn =~ ^(.*\)/)([^?]*)(.*)$ ]]; then
  dsn=${BASH_REMATCH[1]}${BASH_REMATCH[3]}
else
  die "SECKILL_MYSQL_DSN: expected user[:password]@tcp(host:port)/[db][?params], got '$dsn'"
fi
redis_args=()
if [ -n "${SECKILL_REDIS_CLUSTER_ADDRS:-}" ]; then
  redis_args=(-redis-cluster "$SECKILL_REDIS_CLUSTER_ADDRS")
elif [ -n "${SECKILL_REDIS_ADDR:-}" ]; then
  redis_args=(-redis "$SECKILL_REDIS_ADDR")
else
  die "set SECKILL_REDIS_CLUSTER_ADDRS (a Redis Cluster) or SECKILL_REDIS_ADDR (a standalone Redis)"
fi
nginx_bin >/dev/null || die "nginx not found (install the nginx package, or set EDGE_NGINX)"

db=${DEPLOY_DB:-seckill_deploy_$(rand_hex 4)}
prefix=${DEPLOY_PREFIX:-dep$(rand_hex 4):}
# A failed start drops the data only when the names are this run's own.
purge_on_failure=--purge
[ -z "${DEPLOY_DB:-}${DEPLOY_PREFIX:-}" ] || purge_on_failure=""
[[ $db =~ ^[A-Za-z0-9_]{1,64}$ ]] || die "DEPLOY_DB must be 1-64 of [A-Za-z0-9_], got '$db'"
[[ $prefix =~ ^[A-Za-z0-9_.:-]{1,64}$ ]] || die "DEPLOY_PREFIX must be 1-64 of [A-Za-z0-9_.:-], got '$prefix'"

STATE=${DEPLOY_STATE:-$(mktemp -d /tmp/seckill-deploy.XXXXXX)}
init_state
[ -z "$(names '*')" ] || die "$STATE already holds a deployment (run down.sh on it first)"
STATE=$(cd "$STATE" && pwd)
# What down.sh needs, written before anything starts (down.sh --purge drops
# the database and deletes the keys of a half-started run too): "servers"
# holds the DSN, which may carry a password, and is never printed.
{
  echo "export SECKILL_DEPLOY_STATE=$(sq "$STATE")"
  echo "export SECKILL_DEPLOY_DB=$(sq "$db")"
  echo "export SECKILL_DEPLOY_PREFIX=$(sq "$prefix")"
} >"$STATE/env"
(
  umask 077
  printf 'DEPLOY_MYSQL_DSN=%q\n' "$dsn"
  printf 'DEPLOY_REDIS_CLUSTER_ADDRS=%q\n' "${SECKILL_REDIS_CLUSTER_ADDRS:-}"
  [ -n "${SECKILL_REDIS_CLUSTER_ADDRS:-}" ] || printf 'DEPLOY_REDIS_ADDR=%q\n' "${SECKILL_REDIS_ADDR:-}"
) >"$STATE/servers"

ok=0
on_exit() {
  ((ok)) && return 0
  log "up failed; stopping what was started (logs are in $STATE/logs until then)"
  local n
  for n in $(names '*'); do tail_log "$n"; done
  # shellcheck disable=SC2086 # empty or one word
  bash "$here/down.sh" $purge_on_failure "$STATE" >&2 || true
  [ -n "$purge_on_failure" ] || log "database $db and keys $prefix* were named by DEPLOY_DB/DEPLOY_PREFIX: left in place"
}
trap on_exit EXIT
trap 'exit 130' INT TERM # run on_exit on a signal too

# Binaries.
bin=${DEPLOY_BIN:-}
if [ -z "$bin" ]; then
  bin="$STATE/bin"
  mkdir -p "$bin"
  log "building the service and the broker into $bin"
  (cd "$repo" && go build -o "$bin/fullstack" ./examples/fullstack && go build -o "$bin/broker" ./examples/fullstack/cmd/broker)
fi
if [ ! -x "$bin/fullstack" ] || [ ! -x "$bin/broker" ]; then
  die "$bin must hold the fullstack and broker binaries"
fi

# The broker: three kfake brokers on loopback, log and offsets on disk,
# fsynced per produce.
mkdir -p "$STATE/broker"
broker_ready() {
  alive broker || return 0 # exited: stop waiting, see below
  local p
  for p in "${bports[@]}"; do port_in_use "$p" || return 1; done
}
for attempt in 1 2 3; do
  bports=()
  for _ in 1 2 3; do bports+=("$(free_port)"); done
  brokers="127.0.0.1:${bports[0]},127.0.0.1:${bports[1]},127.0.0.1:${bports[2]}"
  start_proc broker "$bin/broker" -ports "$(IFS=,; echo "${bports[*]}")" -data "$STATE/broker" -partitions "$partitions"
  wait_for "$timeout" "the broker on $brokers" broker_ready
  alive broker && break
  # A port picked as free was taken before the broker bound it: pick again.
  if ((attempt == 3)) || ! grep -q 'address already in use' "$STATE/logs/broker.log"; then
    die "the broker exited"
  fi
  log "a broker port was taken meanwhile; picking others"
done
log "broker up on $brokers"

# The signing secret, shared by every instance (a path signed by one
# verifies on the others); in the environment, not on command lines.
SECKILL_SECRET=$(rand_hex 32)
export SECKILL_SECRET
# The bearer token of every instance's /metrics and /healthz details (the
# edge never proxies /metrics; Prometheus scrapes each instance with it).
SECKILL_METRICS_TOKEN=$(rand_hex 16)
export SECKILL_METRICS_TOKEN
node_rate=$(((global_rate + apis - 1) / apis))
node_burst=$(((global_burst + apis - 1) / apis))
read -ra extra <<<"${DEPLOY_SERVICE_ARGS:-}"
common=("${redis_args[@]}" -mysql "$dsn" -mysql-db "$db" -kafka "$brokers" -prefix "$prefix"
  -stock "$stock" -users "$users" -start-in "$start_in" -path-lead "$path_lead"
  -demo="$( ((demo)) && echo true || echo false)" -demo-with-real-servers="$( ((demo)) && echo true || echo false)")

api_addrs=()
start_api() { # start_api N
  local n=api$1 url
  start_proc "$n" "$bin/fullstack" -role api -addr 127.0.0.1:0 -trusted-proxies 127.0.0.1 \
    -global-rate "$node_rate" -global-burst "$node_burst" -log-level "$api_log" "${common[@]}" ${extra[@]+"${extra[@]}"}
  # The instance prints its URL once it listens (port 0: the kernel's pick).
  api_url() {
    alive "$n" || die "$n exited"
    url=$(grep -m 1 -o 'running at http://127\.0\.0\.1:[0-9]*' "$STATE/logs/$n.log") || return 1
    url=${url#running at http://}
    [ -n "$url" ]
  }
  wait_for "$timeout" "$n to listen" api_url
  api_healthy() {
    alive "$n" || die "$n exited"
    [ "$(http_status 127.0.0.1 "${url##*:}" /healthz)" = 200 ]
  }
  wait_for "$timeout" "$n /healthz" api_healthy
  echo "$url" >"$STATE/pids/$n.addr"
  api_addrs+=("$url")
  log "$n up on $url"
}
start_worker() { # start_worker N
  local n=worker$1
  start_proc "$n" "$bin/fullstack" -role worker -log-level info "${common[@]}" ${extra[@]+"${extra[@]}"}
  # No HTTP: the worker is up once it says so (after migrating, loading the
  # sale and starting the consumer, the relay, the canceller and the
  # reconciler).
  worker_ready() {
    alive "$n" || die "$n exited"
    grep -q 'worker running' "$STATE/logs/$n.log"
  }
  wait_for "$timeout" "$n to start" worker_ready
  log "$n up"
}

# One at a time: the first instance creates the tables and seeds the sale
# (its start is DEPLOY_START_IN from now); the others join it.
start_api 1
for ((i = 1; i <= workers; i++)); do start_worker "$i"; done
for ((i = 2; i <= apis; i++)); do start_api "$i"; done

# The edge: nginx in front of the api instances.
export EDGE_GLOBAL_RATE=${EDGE_GLOBAL_RATE:-$global_rate}
export EDGE_GLOBAL_BURST=${EDGE_GLOBAL_BURST:-$global_burst}
export EDGE_DEMO=$demo
edge_env=$(bash "$here/edge.sh" start "$STATE" "${api_addrs[@]}")
eval "$edge_env"
log "edge up on $SECKILL_EDGE_URL (nginx, $apis api instances, $workers workers)"

{
  echo "$edge_env"
  echo "export SECKILL_DEPLOY_APIS=$(sq "$(IFS=,; echo "${api_addrs[*]}")")"
  echo "export SECKILL_DEPLOY_BROKERS=$(sq "$brokers")"
  echo "export SECKILL_METRICS_TOKEN=$(sq "$SECKILL_METRICS_TOKEN")"
} >>"$STATE/env"
ok=1
cat "$STATE/env"
