# shellcheck shell=bash
# Shared by up.sh, down.sh and edge.sh (sourced, not run). Every wait here is
# bounded and polls a health check; every process is started with its PID
# (and, where /proc exists, its start time) recorded under $STATE/pids, and
# stopped by that PID only.
#
# The state directory ($STATE) holds:
#   .seckill-deploy   marker: down.sh removes only a directory that has it
#   env               the exports up.sh printed (source it)
#   pids/NAME.pid     "PID STARTTIME" of each process
#   logs/NAME.log     its stdout and stderr
#   bin/              the binaries up.sh built
#   broker/           the broker's log (cmd/broker -data)
#   nginx/            nginx's prefix: nginx.conf, nginx.pid, logs/, tmp/

shopt -u patsub_replacement 2>/dev/null || true # "&" in a ${v//p/s} replacement stays "&"
export PATH="$PATH:/usr/sbin:/sbin"

log() { echo "deploy: $*" >&2; }
die() {
  log "$*"
  exit 1
}

marker=.seckill-deploy

# init_state creates $STATE (or checks an existing one of ours).
init_state() {
  [ -n "${STATE:-}" ] || die "no state directory"
  if [ -e "$STATE" ] && [ ! -f "$STATE/$marker" ]; then
    if [ ! -d "$STATE" ] || [ -n "$(ls -A "$STATE")" ]; then
      die "$STATE exists and is not a deploy state directory"
    fi
  fi
  mkdir -p "$STATE/pids" "$STATE/logs"
  touch "$STATE/$marker"
}

# is_uint VALUE: a positive integer.
is_uint() { [[ $1 =~ ^[1-9][0-9]{0,8}$ ]]; }

# proc_start PID prints the process's start time (clock ticks since boot,
# field 22 of /proc/PID/stat), or "-" without /proc.
proc_start() {
  local stat rest f
  if [ ! -r "/proc/$1/stat" ]; then
    [ -d /proc/self ] && return 1 # /proc exists: the process does not
    echo -
    return 0
  fi
  stat=$(<"/proc/$1/stat") || return 1
  rest=${stat##*) } # after the command name, which may hold spaces
  read -ra f <<<"$rest"
  echo "${f[19]}"
}

# proc_alive PID START: the process runs (not a zombie) and is the one that
# was started (same start time), not a later process that reused the PID.
proc_alive() {
  local pid=$1 start=$2 now stat rest
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/stat" ]; then
    stat=$(<"/proc/$pid/stat") 2>/dev/null || return 1
    rest=${stat##*) }
    [ "${rest:0:1}" != Z ] || return 1
    now=$(proc_start "$pid") || return 1
    [ "$start" = - ] || [ "$now" = "$start" ] || return 1
  fi
  return 0
}

# start_proc NAME CMD... starts CMD in the background, stdin from /dev/null,
# stdout and stderr to logs/NAME.log, and records its PID.
start_proc() {
  local name=$1 pid start
  shift
  "$@" </dev/null >"$STATE/logs/$name.log" 2>&1 &
  pid=$!
  start=$(proc_start "$pid") || start=gone
  echo "$pid $start" >"$STATE/pids/$name.pid"
}

# alive NAME: the process recorded as NAME runs.
alive() {
  local pf="$STATE/pids/$1.pid" pid start
  [ -f "$pf" ] || return 1
  read -r pid start <"$pf"
  [ "$start" != gone ] || return 1
  proc_alive "$pid" "$start"
}

# pid_of NAME prints the recorded PID.
pid_of() {
  local pid _
  read -r pid _ <"$STATE/pids/$1.pid"
  echo "$pid"
}

# names PATTERN prints the recorded process names matching the glob.
names() {
  local f
  for f in "$STATE"/pids/$1.pid; do
    [ -f "$f" ] || continue
    f=${f##*/}
    echo "${f%.pid}"
  done
}

# signal_and_wait SIGNAL SECONDS NAME...: sends SIGNAL to each process that
# still runs, then waits up to SECONDS for all of them to end. Returns 1 if
# one still runs.
signal_and_wait() {
  local sig=$1 secs=$2 n i left
  shift 2
  for n in "$@"; do
    if alive "$n"; then kill -s "$sig" "$(pid_of "$n")" 2>/dev/null || true; fi
  done
  for ((i = 0; i <= secs * 10; i++)); do
    left=0
    for n in "$@"; do alive "$n" && left=1; done
    ((left)) || return 0
    sleep 0.1
  done
  return 1
}

# stop_tier "LABEL" SIGNAL SECONDS NAME...: stops the processes gracefully
# (SIGNAL, SECONDS), then with SIGTERM (5 s), then SIGKILL. Prints what it
# had to kill. Returns 1 if something survived SIGKILL.
stop_tier() {
  local label=$1 sig=$2 secs=$3 n
  shift 3
  (($#)) || return 0
  signal_and_wait "$sig" "$secs" "$@" && return 0
  log "$label: still running after SIG$sig and ${secs}s, sending SIGTERM"
  [ "$sig" != TERM ] && signal_and_wait TERM 5 "$@" && return 0
  for n in "$@"; do alive "$n" && log "$label: killing $n (pid $(pid_of "$n"))"; done
  signal_and_wait KILL 5 "$@" && return 0
  for n in "$@"; do alive "$n" && log "$label: $n (pid $(pid_of "$n")) survived SIGKILL"; done
  return 1
}

# wait_for SECONDS WHAT CMD...: polls CMD every 100 ms until it succeeds,
# at most SECONDS.
wait_for() {
  local secs=$1 what=$2 i
  shift 2
  for ((i = 0; i < secs * 10; i++)); do
    "$@" && return 0
    sleep 0.1
  done
  log "timed out after ${secs}s waiting for $what"
  return 1
}

# http_status HOST PORT PATH prints the status code of GET PATH (HTTP/1.0
# over bash's /dev/tcp: no curl needed). Fails when nothing answers.
http_status() {
  (
    exec 3<>"/dev/tcp/$1/$2" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$3" "$1" >&3
    IFS= read -r -t 5 line <&3 || exit 1
    read -r _ code _ <<<"${line%$'\r'}"
    printf '%s\n' "$code"
  ) 2>/dev/null
}

# port_in_use PORT: something listens on 127.0.0.1:PORT.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port prints a loopback port nothing listens on, below the usual
# ephemeral range and not handed out before by this script (picked_ports).
picked_ports=" "
free_port() {
  local i p
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + RANDOM % 12000))
    [[ $picked_ports == *" $p "* ]] && continue
    port_in_use "$p" && continue
    picked_ports+="$p "
    echo "$p"
    return 0
  done
  die "found no free loopback port"
}

# sq VALUE prints VALUE single-quoted for the shell.
sq() {
  local q="'\\''"
  printf "'%s'" "${1//\'/$q}"
}

# rand_hex N prints N random bytes as hex.
rand_hex() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }

# tail_log NAME prints the end of a process's log to stderr.
tail_log() {
  [ -f "$STATE/logs/$1.log" ] || return 0
  log "last lines of logs/$1.log:"
  tail -n 20 "$STATE/logs/$1.log" >&2 || true
}

# nginx_bin prints the nginx binary (EDGE_NGINX overrides the lookup; not
# NGINX, which nginx itself reads: the sockets a binary upgrade hands over).
nginx_bin() {
  if [ -n "${EDGE_NGINX:-}" ]; then
    echo "$EDGE_NGINX"
  elif command -v nginx >/dev/null; then
    command -v nginx
  else
    return 1
  fi
}

# nginx_rate NAME prints the rate in variable NAME as nginx writes it: "N"
# means N requests per second; "Nr/s" and "Nr/m" are taken as they are.
nginx_rate() {
  local v=${!1}
  if is_uint "$v"; then
    echo "${v}r/s"
  elif [[ $v =~ ^[1-9][0-9]{0,8}r/[sm]$ ]]; then
    echo "$v"
  else
    die "$1 must be N (per second), Nr/s or Nr/m, got '$v'"
  fi
}

# render_edge_conf TEMPLATE OUT PREFIX: writes nginx.conf from the template.
# Reads EDGE_LISTEN, EDGE_WORKERS, EDGE_UPSTREAMS (array of host:port),
# EDGE_UNLIMITED, EDGE_DEMO, EDGE_PER_IP_RATE, EDGE_PER_IP_BURST,
# EDGE_PER_IP_CONN, EDGE_GLOBAL_RATE, EDGE_GLOBAL_BURST, EDGE_KEEPALIVE.
render_edge_conf() {
  local tmpl=$1 out=$2 prefix=$3 t a servers="" unlimited="" user="" demo v name
  for name in EDGE_PER_IP_BURST EDGE_PER_IP_CONN EDGE_GLOBAL_BURST EDGE_KEEPALIVE; do
    is_uint "${!name}" || die "$name must be a positive integer, got '${!name}'"
  done
  # Rates: N (per second), Nr/s or Nr/m.
  local per_ip_rate global_rate
  per_ip_rate=$(nginx_rate EDGE_PER_IP_RATE) || exit 1
  global_rate=$(nginx_rate EDGE_GLOBAL_RATE) || exit 1
  [[ $EDGE_WORKERS == auto ]] || is_uint "$EDGE_WORKERS" || die "EDGE_WORKERS must be auto or a positive integer, got '$EDGE_WORKERS'"
  [[ $EDGE_LISTEN =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+$ ]] || die "EDGE_LISTEN must be a loopback 127.x.y.z:port, got '$EDGE_LISTEN'"
  ((${#EDGE_UPSTREAMS[@]})) || die "no upstream instance"
  for a in "${EDGE_UPSTREAMS[@]}"; do
    [[ $a =~ ^[A-Za-z0-9.-]+:[0-9]+$ || $a =~ ^\[[0-9a-fA-F:]+\]:[0-9]+$ ]] || die "bad upstream address '$a'"
    servers+="        server $a max_fails=3 fail_timeout=5s;"$'\n'
  done
  for a in ${EDGE_UNLIMITED//,/ }; do
    [[ $a =~ ^[0-9a-fA-F.:]+(/[0-9]{1,3})?$ ]] || die "EDGE_UNLIMITED: bad address or CIDR '$a'"
    unlimited+="        $a 1;"$'\n'
  done
  local nofile conns
  nofile=$(ulimit -Hn)
  [[ $nofile =~ ^[0-9]+$ ]] && ((nofile <= 65536)) || nofile=65536
  conns=$((nofile / 2 > 16384 ? 16384 : nofile / 2))
  ((conns >= 512)) || die "the open-file limit ($nofile) is too low for nginx; raise ulimit -n"
  if [ "$(id -u)" -eq 0 ]; then
    # The master opens the logs and the pid file as root; the workers need
    # no file, so they run as nobody.
    user="user nobody $(id -gn nobody 2>/dev/null || echo nogroup);"
  fi
  case "$EDGE_DEMO" in
    1 | true | on)
      demo='            # DEMO ONLY, and from this machine only.
            allow 127.0.0.0/8;
            allow ::1;
            deny all;
            proxy_pass http://seckill_api;'
      ;;
    0 | false | off | "")
      demo="            default_type application/json;
            add_header X-Request-ID \$edge_request_id always;
            return 404 '{\"status\":\"not_found\",\"message\":\"not found\"}\\n';"
      ;;
    *) die "EDGE_DEMO must be 0 or 1, got '$EDGE_DEMO'" ;;
  esac
  t=$(<"$tmpl")
  t=${t//@@PREFIX@@/"$prefix"}
  t=${t//@@LISTEN@@/"$EDGE_LISTEN"}
  t=${t//@@WORKERS@@/"$EDGE_WORKERS"}
  t=${t//@@NOFILE@@/"$nofile"}
  t=${t//@@CONNECTIONS@@/"$conns"}
  t=${t//@@USER@@/"$user"}
  t=${t//@@UPSTREAM_SERVERS@@$'\n'/"$servers"}
  t=${t//@@UNLIMITED@@$'\n'/"$unlimited"}
  t=${t//@@DEMO@@/"$demo"}
  t=${t//@@PER_IP_RATE@@/"$per_ip_rate"}
  t=${t//@@GLOBAL_RATE@@/"$global_rate"}
  for name in PER_IP_BURST PER_IP_CONN GLOBAL_BURST KEEPALIVE; do
    v=EDGE_$name
    t=${t//@@$name@@/"${!v}"}
  done
  [[ $t != *@@*@@* ]] || die "template $tmpl: placeholder left: $(grep -o '@@[A-Z_]*@@' <<<"$t" | sort -u | tr '\n' ' ')"
  printf '%s\n' "$t" >"$out"
}
