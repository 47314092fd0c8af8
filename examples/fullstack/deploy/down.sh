#!/usr/bin/env bash
# Stops what up.sh started, by the PIDs in its state directory, in order:
# nginx (SIGQUIT: finish the requests in progress), the api instances
# (SIGTERM: finish in-flight requests), the workers (SIGTERM: drain the
# consumer and the outbox, up to 30 s) and the broker (SIGTERM: persist its
# log). Whatever does not stop in time gets SIGTERM again, then SIGKILL.
# Then it removes the state directory.
#
#   deploy/down.sh [--purge] [STATE]     # STATE defaults to $SECKILL_DEPLOY_STATE
#
# --purge also drops the run's database and deletes its Redis keys (every
# key under its prefix, on every master of a Cluster): the names in
# STATE/env, which up.sh makes up per run unless DEPLOY_DB / DEPLOY_PREFIX
# named them. It needs the mariadb (or mysql) client and redis-cli. Without
# --purge the data stays for inspection.
#
# Exit status 1 when a process survived SIGKILL (the state directory is then
# kept) or the purge failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

purge=0
while (($#)); do
  case "$1" in
    --purge) purge=1 ;;
    -h | --help)
      echo "usage: $0 [--purge] [STATE]" >&2
      exit 2
      ;;
    *) break ;;
  esac
  shift
done
STATE=${1:-${SECKILL_DEPLOY_STATE:-}}
[ -n "$STATE" ] || die "no state directory (pass it, or set SECKILL_DEPLOY_STATE)"
[ -d "$STATE" ] || {
  log "$STATE does not exist: nothing to stop"
  exit 0
}
[ -f "$STATE/$marker" ] || die "$STATE is not a deploy state directory (no $marker): refusing to touch it"

status=0
# shellcheck disable=SC2046 # names are plain words
{
  bash "$here/edge.sh" stop "$STATE" || status=1
  stop_tier api TERM 35 $(names 'api*') || status=1
  stop_tier worker TERM 45 $(names 'worker*') || status=1
  stop_tier broker TERM 15 $(names broker) || status=1
}
left=()
for n in $(names '*'); do alive "$n" && left+=("$n (pid $(pid_of "$n"))"); done
if ((${#left[@]})); then
  log "still running: ${left[*]}; keeping $STATE"
  exit 1
fi

# drop_database DSN DB: DROP DATABASE through the mariadb/mysql client.
drop_database() {
  local dsn=$1 db=$2 client user pass addr args=()
  client=$(command -v mariadb || command -v mysql) || {
    log "purge: no mariadb/mysql client: database $db left in place"
    return 1
  }
  [[ $dsn =~ ^([^:@/]*)(:([^@]*))?@(tcp|unix)\(([^\)]*)\)/ ]] || {
    log "purge: cannot read the server from the DSN: database $db left in place"
    return 1
  }
  user=${BASH_REMATCH[1]}
  pass=${BASH_REMATCH[3]}
  addr=${BASH_REMATCH[5]}
  if [ "${BASH_REMATCH[4]}" = unix ]; then
    args=(--protocol=socket -S "$addr")
  else
    args=(--protocol=tcp -h "${addr%:*}" -P "${addr##*:}")
  fi
  MYSQL_PWD=$pass "$client" --no-defaults "${args[@]}" -u "${user:-root}" \
    -e "DROP DATABASE IF EXISTS \`$db\`" || {
    log "purge: DROP DATABASE $db failed"
    return 1
  }
}

# delete_keys PREFIX HOST:PORT...: UNLINKs every key under PREFIX on each
# node (one key per command: no cross-slot error on a Cluster).
delete_keys() {
  local prefix=$1 node
  shift
  for node in "$@"; do
    redis-cli -h "${node%:*}" -p "${node##*:}" --scan --pattern "$prefix*" |
      sed 's/^/UNLINK /' |
      redis-cli -h "${node%:*}" -p "${node##*:}" >/dev/null || return 1
  done
}

# cluster_masters SEED...: host:port of every master, from the first seed
# that answers CLUSTER NODES.
cluster_masters() {
  local seed out
  for seed in "$@"; do
    out=$(redis-cli -h "${seed%:*}" -p "${seed##*:}" cluster nodes 2>/dev/null) || continue
    awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "@"); print a[1] }' <<<"$out"
    return 0
  done
  return 1
}

if ((purge)) && [ ! -f "$STATE/env" ]; then
  log "purge: $STATE names no database or key prefix: nothing to purge"
elif ((purge)); then
  # shellcheck disable=SC1091
  source "$STATE/env"
  DEPLOY_MYSQL_DSN="" DEPLOY_REDIS_CLUSTER_ADDRS="" DEPLOY_REDIS_ADDR=""
  # shellcheck disable=SC1091
  [ -f "$STATE/servers" ] && source "$STATE/servers"
  if [ -n "$DEPLOY_MYSQL_DSN" ]; then
    drop_database "$DEPLOY_MYSQL_DSN" "$SECKILL_DEPLOY_DB" || status=1
  fi
  nodes=()
  if ! command -v redis-cli >/dev/null; then
    log "purge: no redis-cli: keys under $SECKILL_DEPLOY_PREFIX left in place"
    status=1
  elif [ -n "$DEPLOY_REDIS_CLUSTER_ADDRS" ]; then
    # shellcheck disable=SC2086 # one seed per word
    if masters=$(cluster_masters ${DEPLOY_REDIS_CLUSTER_ADDRS//,/ }); then
      mapfile -t nodes <<<"$masters"
    else
      log "purge: no Cluster node answered"
      status=1
    fi
  elif [ -n "$DEPLOY_REDIS_ADDR" ]; then
    nodes=("$DEPLOY_REDIS_ADDR")
  fi
  if ((${#nodes[@]})); then
    delete_keys "$SECKILL_DEPLOY_PREFIX" "${nodes[@]}" || {
      log "purge: deleting keys under $SECKILL_DEPLOY_PREFIX failed"
      status=1
    }
  fi
  ((status)) || log "purged database $SECKILL_DEPLOY_DB and keys $SECKILL_DEPLOY_PREFIX*"
fi

rm -rf "$STATE"
log "stopped; removed $STATE"
exit "$status"
