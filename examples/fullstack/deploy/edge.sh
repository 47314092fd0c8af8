#!/usr/bin/env bash
# The edge tier alone: renders nginx.conf.tmpl into STATE/nginx and runs
# nginx (its own prefix, pid file, logs and temp dirs there; no root
# needed) in front of the given instances, on a loopback port. up.sh calls
# it; it also fronts any set of instances you started yourself.
#
#   deploy/edge.sh start STATE HOST:PORT...   # prints: export SECKILL_EDGE_URL=http://127.0.0.1:PORT
#   deploy/edge.sh stop STATE                 # graceful stop (SIGQUIT), by PID
#
# Settings (environment; defaults in brackets):
#   EDGE_PORT          loopback port [a free one]
#   EDGE_WORKERS       nginx worker processes [auto]
#   EDGE_PER_IP_RATE   requests/s per client address, every path [20]
#   EDGE_PER_IP_BURST  burst above that rate, answered at once [40]
#   EDGE_PER_IP_CONN   requests in progress per client address [32]
#   EDGE_GLOBAL_RATE   buy requests/s through the edge, all clients [100000]
#   EDGE_GLOBAL_BURST  burst above that [20000]
#   EDGE_UNLIMITED     addresses/CIDRs exempt from the per-address limits,
#                      comma or space separated (a load generator) [none]
#   EDGE_DEMO          1: pass /api/demo/* (from loopback only) [0: 404]
#   EDGE_KEEPALIVE     idle upstream keep-alive connections per worker [128]
#   EDGE_WAIT          seconds to wait for GET /healthz through nginx [30]
#   EDGE_NGINX         the nginx binary [nginx on PATH, /usr/sbin included]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

usage() {
  echo "usage: $0 start STATE HOST:PORT... | stop STATE" >&2
  exit 2
}

edge_start() {
  local prefix nginx port
  init_state
  nginx=$(nginx_bin) || die "nginx not found (install the nginx package, or set EDGE_NGINX)"
  if alive edge; then die "an edge already runs from $STATE (pid $(pid_of edge))"; fi
  prefix="$STATE/nginx"
  mkdir -p "$prefix/logs" "$prefix/tmp"
  port=${EDGE_PORT:-}
  [ -n "$port" ] || port=$(free_port)
  EDGE_LISTEN=127.0.0.1:$port
  EDGE_WORKERS=${EDGE_WORKERS:-auto}
  EDGE_PER_IP_RATE=${EDGE_PER_IP_RATE:-20}
  EDGE_PER_IP_BURST=${EDGE_PER_IP_BURST:-40}
  EDGE_PER_IP_CONN=${EDGE_PER_IP_CONN:-32}
  EDGE_GLOBAL_RATE=${EDGE_GLOBAL_RATE:-100000}
  EDGE_GLOBAL_BURST=${EDGE_GLOBAL_BURST:-20000}
  EDGE_UNLIMITED=${EDGE_UNLIMITED:-}
  EDGE_DEMO=${EDGE_DEMO:-0}
  EDGE_KEEPALIVE=${EDGE_KEEPALIVE:-128}
  render_edge_conf "$here/nginx.conf.tmpl" "$prefix/nginx.conf" "$prefix"

  local args=(-p "$prefix/" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log")
  # NGINX in the environment would be taken for inherited sockets.
  env -u NGINX "$nginx" -t -q "${args[@]}" || die "nginx rejected $prefix/nginx.conf"
  local wait=${EDGE_WAIT:-30}
  is_uint "$wait" || die "EDGE_WAIT must be a positive integer"
  # The edge is up when an instance answers /healthz through it; stop
  # waiting at once if nginx exits.
  edge_ready() {
    alive edge || return 0
    [ "$(http_status 127.0.0.1 "$port" /healthz)" = 200 ]
  }
  local attempt
  for attempt in 1 2 3; do
    start_proc edge env -u NGINX "$nginx" "${args[@]}" -g 'daemon off;'
    wait_for "$wait" "GET /healthz through nginx on 127.0.0.1:$port" edge_ready || {
      tail -n 20 "$prefix/logs/error.log" >&2 2>/dev/null || true
      stop_tier edge QUIT 5 edge || true
      return 1
    }
    alive edge && break
    # A port picked as free was taken before nginx bound it: pick again.
    if ((attempt < 3)) && [ -z "${EDGE_PORT:-}" ] && cat "$STATE/logs/edge.log" "$prefix/logs/error.log" 2>/dev/null | grep -q 'Address already in use'; then
      log "port $port was taken meanwhile; picking another"
      port=$(free_port)
      EDGE_LISTEN=127.0.0.1:$port
      render_edge_conf "$here/nginx.conf.tmpl" "$prefix/nginx.conf" "$prefix"
      continue
    fi
    log "nginx exited"
    tail_log edge
    return 1
  done
  echo "export SECKILL_EDGE_URL=http://127.0.0.1:$port"
}

edge_stop() {
  [ -f "$STATE/pids/edge.pid" ] || return 0
  # SIGQUIT: stop accepting, finish the requests in progress (a result
  # stream lasts 2 minutes at most: cut after 15 s).
  stop_tier edge QUIT 15 edge
}

cmd=${1:-}
STATE=${2:-}
[ -n "$STATE" ] || usage
case "$cmd" in
  start)
    shift 2
    (($#)) || usage
    EDGE_UPSTREAMS=("$@")
    edge_start
    ;;
  stop)
    [ -f "$STATE/$marker" ] || die "$STATE is not a deploy state directory"
    edge_stop
    ;;
  *) usage ;;
esac
