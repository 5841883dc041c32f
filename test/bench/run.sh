#!/usr/bin/env bash
# test/bench/run.sh - gangkeeper's benchmark suite (DESIGN §10, issue #11).
#
# Builds what it needs in build/bench (RelWithDebInfo, -DGK_BUILD_BENCH=ON),
# installs missing Debian packages, runs the benchmarks and writes
# test/bench/RESULTS.md: machine, date, commit, and every figure next to its
# target with met / not met.
#
# Usage: test/bench/run.sh [--quick] [--keep] [SECTION...]
#   SECTION   webhook | micro | scheduling | e2e   (default: all four)
#             Sections not run keep their part of an existing RESULTS.md
#             (each part carries its own date and commit).
#   --quick   a smoke run: short points, one round (minutes, not figures of record)
#   --keep    keep the scratch directory (raw outputs, logs) and print its path
#
# Knobs (environment; full-run default, then --quick's):
#   DURATION        seconds per webhook load point (10; 3)
#   ROUNDS          rounds of the webhook sweep (2; 1)
#   CONNS           webhook connection counts ("8 32 64")
#   PACED_CONNS     connections of the paced latency run (32)
#   PACED_FRACTION  paced rate as a fraction of the maximum (0.7)
#   PACED_DISPATCH  how the paced client hands due requests to its
#                   connections for the verdict: pool (an idle one takes
#                   the oldest due request, as the API server's HTTP client
#                   does) or connection (each connection its own schedule)
#   GK_SERVE_ARGS   extra `gangkeeper serve` flags (none)
#   EXPOSURE        "IDLE SLOW RATE": hostile connections held while a paced
#                   /validate client measures ("10000 1000 1000"; "2000 200 500")
#   GBENCH_MIN_TIME Google Benchmark --benchmark_min_time (0.5; 0.05)
#   REPLICA_ARGS    gangkeeper_replica_bench seconds clients kills ("10 16 5"; "3 4 1")
#   E2E_ARGS        gangkeeper_e2e_bench arguments for Kueue's baseline shape
#                   (none; "--scale 0.05 --limit 120")
#   E2E_LARGE_ARGS  the same for Kueue's large-scale shape (none: all 50,000
#                   workloads; "--scale 0.02 --limit 120")
#   NOTE            a line for the top of RESULTS.md
#   BUILD_TIMEOUT   seconds the build may take (5400)
#   RESULTS         the output file (test/bench/RESULTS.md)
#
# Everything runs on 127.0.0.1. Scratch files live in one `mktemp -d`
# directory; every process this script starts is stopped by its pid; every
# step has a time limit.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_SRC="$REPO/test/bench"
HTTPS_DIR="$BENCH_SRC/https"
BUILD="$REPO/build/bench"
GK="$BUILD/src/cli/gangkeeper"
BENCH_BIN="$BUILD/test/bench"
BODY="$REPO/test/fixtures/admission/review-job.json"
ALL_SECTIONS=(webhook micro scheduling e2e)

QUICK=0
KEEP=0
SECTIONS=()
ARGS_GIVEN="$*"
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --keep) KEEP=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    webhook | micro | scheduling | e2e) SECTIONS+=("$arg") ;;
    *) echo "run.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[[ ${#SECTIONS[@]} -gt 0 ]] || SECTIONS=("${ALL_SECTIONS[@]}")

if [[ "$QUICK" == 1 ]]; then
  : "${DURATION:=3}" "${ROUNDS:=1}" "${REPLICA_ARGS:=3 4 1}" "${GBENCH_MIN_TIME:=0.05}"
  : "${E2E_ARGS:=--scale 0.05 --limit 120}" "${E2E_LARGE_ARGS:=--scale 0.02 --limit 120}" "${EXPOSURE:=2000 200 500}"
else
  : "${DURATION:=10}" "${ROUNDS:=2}" "${REPLICA_ARGS:=10 16 5}" "${GBENCH_MIN_TIME:=0.5}" "${E2E_ARGS:=}" "${E2E_LARGE_ARGS:=}"
fi
: "${EXPOSURE:=10000 1000 1000}" "${CONNS:=8 32 64}" "${PACED_CONNS:=32}" "${PACED_FRACTION:=0.7}" "${PACED_DISPATCH:=pool}" "${GK_SERVE_ARGS:=}"
: "${NOTE:=}" "${BUILD_TIMEOUT:=5400}" "${RESULTS:=$BENCH_SRC/RESULTS.md}"
NPROC="$(nproc)"
# The exposure rows hold 11,000 connections: both ends need the descriptors.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
CLK_TCK="$(getconf CLK_TCK)"

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }
selected() { [[ " ${SECTIONS[*]} " == *" $1 "* ]]; }

# ---------------------------------------------------------------- processes

WORK="$(mktemp -d "${TMPDIR:-/tmp}/gk-bench.XXXXXX")"
mkdir -p "$WORK/raw" "$WORK/sections" "$WORK/tmp"
STARTED=()  # pids of the servers this script started

# stop_pid PID [GRACE_S]: TERM, wait up to GRACE_S, then KILL; reaps it.
stop_pid() {
  local pid=$1 grace=${2:-15} i
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid ignored TERM for ${grace} s; sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local pid
  for pid in "${STARTED[@]}"; do stop_pid "$pid" 30; done
  STARTED=()
  if [[ "$KEEP" == 1 ]]; then
    log "scratch directory kept: $WORK"
  else
    rm -rf "${WORK:?}"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free loopback port for nginx (gangkeeper takes port 0 and says which).
free_port() {
  local p
  for p in $(seq 18443 18999); do
    if [[ -z "$(ss -Hltn "sport = :$p")" ]]; then
      echo "$p"
      return 0
    fi
  done
  die "no free port in 18443-18999"
}

# CPU ticks (user + system) of the given pids and their direct children.
cpu_ticks() {
  local p sum=0 t
  for p in "$@" $(for q in "$@"; do ps -o pid= --ppid "$q" 2>/dev/null || true; done); do
    t="$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$p/stat" 2>/dev/null || echo 0)"
    sum=$((sum + ${t:-0}))
  done
  echo "$sum"
}

# peers_start PORT FILE: samples (every 0.2 s, in the background) the peers of
# the established connections to PORT; peers_stop prints how many distinct
# ones it saw. With keep-alive held that is the client's connection count; a
# server that closes connections shows more (churn between two samples may
# still go unseen, so it is a lower bound).
PEERS_PID=""
peers_start() {
  local port=$1 file=$2
  : >"$file"
  while true; do
    ss -Htn state established "( sport = :$port )" >>"$file" 2>/dev/null || true
    sleep 0.2
  done &
  PEERS_PID=$!
  STARTED+=("$PEERS_PID")
}
peers_stop() {
  local file=$1
  stop_pid "$PEERS_PID" 2
  PEERS_PID=""
  awk '{ print $4 }' "$file" | sort -u | grep -c . || true
}

# ---------------------------------------------------------------- numbers

# kv KEY LINE: the value of KEY=value in a line of space-separated pairs.
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
# grouped N: 12345.6 -> 12,346
grouped() {
  awk -v x="$1" 'BEGIN { if (x == "" || x == "-") { print "-"; exit }
    s = sprintf("%.0f", x); n = length(s); o = ""
    for (i = 1; i <= n; i++) { o = o substr(s, i, 1); if ((n - i) % 3 == 0 && i < n) o = o "," }
    print o }'
}
# fmt DIGITS X [SCALE]: X*SCALE with DIGITS decimals, "-" when empty.
fmt() {
  awk -v d="$1" -v x="$2" -v s="${3:-1}" 'BEGIN { if (x == "" || x == "-") print "-"; else printf "%.*f\n", d, x * s }'
}
# ms_or_us MS: "12.3 ms", or "45.6 µs" below a millisecond.
ms_or_us() {
  awk -v x="$1" 'BEGIN { if (x == "" || x == "-") print "-"; else if (x < 1) printf "%.1f µs\n", x * 1000
    else printf "%.1f ms\n", x }'
}
# verdict VALUE OP LIMIT -> met / not met / no figure   (OP: < <= > >=)
verdict() {
  awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
    if (v == "" || v == "-") { print "no figure"; exit }
    ok = (op == "<" && v + 0 < l + 0) || (op == "<=" && v + 0 <= l + 0) ||
         (op == ">" && v + 0 > l + 0) || (op == ">=" && v + 0 >= l + 0)
    print (ok ? "met" : "not met") }'
}

# target SECTION_FILE TARGET MEASURED VERDICT: one row of the summary at the
# top of RESULTS.md. Kept as comments at the end of the section's own text
# (so a section kept from an earlier run brings its rows along).
target() { printf '<!-- target|%s|%s|%s -->\n' "$2" "$3" "$4" >>"${1%.md}.targets"; }

# ---------------------------------------------------------------- setup

install_deps() {
  "$REPO/scripts/deps.sh" build
  # Same conventions as scripts/deps.sh: only what is missing, quietly.
  local want=(jq) missing=() p sudo=""
  selected webhook && want+=(nginx wrk nghttp2-client openssl)
  selected micro && want+=(etcd-server)
  for p in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  [[ ${#missing[@]} -gt 0 ]] || return 0
  log "installing ${missing[*]}"
  [[ "$(id -u)" -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  timeout 900 $sudo apt-get update -qq
  timeout 1800 $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
  local targets=(gangkeeper)
  selected webhook && targets+=(gangkeeper_paced_load gangkeeper_idle_load)
  selected micro && targets+=(gangkeeper_webhook_bench gangkeeper_broker_bench gangkeeper_store_bench
    gangkeeper_audit_bench gangkeeper_replica_bench)
  log "configuring $BUILD"
  timeout 600 cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGK_BUILD_BENCH=ON \
    >"$WORK/raw/cmake.log" 2>&1 || { cat "$WORK/raw/cmake.log" >&2; die "cmake failed"; }
  log "building ${targets[*]} (up to ${BUILD_TIMEOUT} s)"
  timeout "$BUILD_TIMEOUT" ninja -C "$BUILD" -j "$NPROC" "${targets[@]}" >"$WORK/raw/build.log" 2>&1 ||
    { tail -n 40 "$WORK/raw/build.log" >&2; die "build failed (log above)"; }
  # The end-to-end program is optional: its section says so when it is missing.
  E2E_BUILD_NOTE=""
  if selected e2e; then
    rm -f "$BENCH_BIN/gangkeeper_e2e_bench"
    ninja -C "$BUILD" -t targets all >"$WORK/raw/targets.txt" 2>/dev/null || true
    if ! grep -q '^gangkeeper_e2e_bench:' "$WORK/raw/targets.txt"; then
      E2E_BUILD_NOTE="no such target in test/bench/CMakeLists.txt"
    elif ! timeout "$BUILD_TIMEOUT" ninja -C "$BUILD" -j "$NPROC" gangkeeper_e2e_bench >"$WORK/raw/build-e2e.log" 2>&1; then
      E2E_BUILD_NOTE="its build failed"
      log "gangkeeper_e2e_bench did not build; its section says so"
    fi
  fi
}

machine_table() {
  local cpu mhz ram kernel os src dev rota model virt
  cpu="$(awk -F: '/model name/ { sub(/^ +/, "", $2); print $2; exit }' /proc/cpuinfo)"
  mhz="$(awk -F: '/cpu MHz/ { printf "%.0f", $2; exit }' /proc/cpuinfo)"
  ram="$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  kernel="$(uname -r)"
  # shellcheck disable=SC1091  # the machine's file, not ours
  os="$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}")"
  virt="$(systemd-detect-virt 2>/dev/null || true)"
  src="$(findmnt -no SOURCE -T "$WORK" 2>/dev/null || true)"
  dev="$(lsblk -no PKNAME "$src" 2>/dev/null | head -n1 || true)"
  [[ -n "$dev" ]] || dev="$(basename "${src:-?}")"
  rota="$(lsblk -dno ROTA "/dev/$dev" 2>/dev/null | tr -d ' ' || true)"
  model="$(lsblk -dno MODEL "/dev/$dev" 2>/dev/null | sed 's/ *$//' || true)"
  case "$rota" in
    0) rota="non-rotational" ;; 1) rota="rotational flag set (virtual disks often say so)" ;; *) rota="type unknown" ;;
  esac
  echo "| what | value |"
  echo "|---|---|"
  echo "| CPUs (nproc) | $NPROC |"
  echo "| CPU model | ${cpu:-?}${mhz:+ ($mhz MHz)} |"
  echo "| RAM | $ram |"
  echo "| OS, kernel | $os, $kernel${virt:+ ($virt)} |"
  echo "| scratch disk | ${src:-?} ($(findmnt -no FSTYPE -T "$WORK" 2>/dev/null || echo '?'); /dev/$dev: $rota${model:+, $model}) |"
  echo "| load average at start | $(cut -d' ' -f1-3 /proc/loadavg) |"
}

source_line() {
  local commit dirty
  commit="$(git -C "$REPO" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  dirty="$(git -C "$REPO" status --porcelain 2>/dev/null | wc -l)"
  if [[ "$dirty" -gt 0 ]]; then
    echo "commit $commit, tree dirty ($dirty paths modified or untracked)"
  else
    echo "commit $commit, clean tree"
  fi
}

# Every section starts with this line, so a part kept from an earlier run
# still says when and on what it was measured.
stamp() {
  echo "_Measured $(date -u '+%Y-%m-%d %H:%M UTC'), $(source_line), \`run.sh ${ARGS_GIVEN}\`._"
  echo
}

# ================================================================ webhook

GK_PID=""
NGINX_PID=""
GK_PORT=""
API_PORT=""
NGINX_PORT=""
CERTS=""

start_gangkeeper() {
  local i out
  CERTS="$WORK/certs"
  timeout 60 "$GK" certs --out "$CERTS" >"$WORK/raw/certs.out" 2>"$WORK/raw/certs.err" ||
    { cat "$WORK/raw/certs.err" >&2; die "gangkeeper certs failed"; }
  mkdir -p "$WORK/policies"
  cp "$REPO"/policies/*.yaml "$HTTPS_DIR/team-ml.yaml" "$WORK/policies/"
  TOKEN="$(openssl rand -hex 24)"
  printf -- '- name: bench\n  sha256: %s\n  role: viewer\n' \
    "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)" >"$WORK/tokens.yaml"
  # shellcheck disable=SC2086  # GK_SERVE_ARGS: extra flags, split on spaces
  "$GK" serve --webhook-addr=127.0.0.1:0 --api-addr=127.0.0.1:0 \
    --tls-cert="$CERTS/tls.crt" --tls-key="$CERTS/tls.key" --policies="$WORK/policies" \
    --data-dir="$WORK/data" --kube=none --tokens="$WORK/tokens.yaml" $GK_SERVE_ARGS \
    >"$WORK/raw/gangkeeper.out" 2>"$WORK/raw/gangkeeper.err" &
  GK_PID=$!
  STARTED+=("$GK_PID")
  for ((i = 0; i < 300; i++)); do
    out="$(cat "$WORK/raw/gangkeeper.out")"
    if [[ "$out" == *"try:"* ]]; then
      GK_PORT="$(sed -n 's|.*webhook: https://[^ ]*:\([0-9][0-9]*\) .*|\1|p' <<<"$out" | head -n1)"
      API_PORT="$(sed -n 's|.*api: *https://[^ ]*:\([0-9][0-9]*\) .*|\1|p' <<<"$out" | head -n1)"
      break
    fi
    kill -0 "$GK_PID" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$GK_PORT" && -n "$API_PORT" ]] || { tail -n 30 "$WORK/raw/gangkeeper.err" >&2; die "gangkeeper did not start"; }
  for ((i = 0; i < 300; i++)); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 --cacert "$CERTS/ca.crt" \
      "https://127.0.0.1:$API_PORT/readyz" || true)" == 200 ]] && break
    sleep 0.1
  done
  log "gangkeeper (pid $GK_PID) ready: webhook 127.0.0.1:$GK_PORT, api 127.0.0.1:$API_PORT"
}

# The static answer nginx gives: an allowed AdmissionReview response of
# exactly 400 bytes (the padding is a warning text), for the review's uid.
nginx_answer() {
  local uid head tail pad text=""
  uid="$(jq -r .request.uid "$BODY")"
  head="{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":\"$uid\",\"allowed\":true,\"warnings\":[\""
  tail='"]}}'
  pad=$((400 - ${#head} - ${#tail}))
  while ((${#text} < pad)); do text+="queued in LocalQueue team-ml/gpu-queue (static answer of the nginx floor); "; done
  printf '%s%s%s' "$head" "${text:0:pad}" "$tail"
}

start_nginx() {
  local dir="$WORK/nginx" answer i
  mkdir -p "$dir/tmp" "$dir/logs"
  NGINX_PORT="$(free_port)"
  answer="$(nginx_answer)"
  [[ ${#answer} == 400 ]] || die "nginx answer is ${#answer} bytes, not 400"
  # TLS as gangkeeper's listener (src/server/tls.cc): TLS 1.2 and 1.3, the
  # same cipher lists and groups, server preference, the same certificate
  # and key. Keep-alive as gangkeeper's defaults (120 s, 10,000 requests).
  # One worker per core, like gangkeeper's threads over both cores. No
  # access log: this is the floor, not a twin (gangkeeper logs every request).
  cat >"$dir/nginx.conf" <<EOF
worker_processes $NPROC;
daemon off;
master_process on;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  server_tokens off;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  keepalive_timeout 120s;
  keepalive_requests 10000;
  client_body_buffer_size 64k;
  client_max_body_size 4m;
  server {
    listen 127.0.0.1:$NGINX_PORT ssl;
    ssl_certificate $CERTS/tls.crt;
    ssl_certificate_key $CERTS/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
    ssl_ecdh_curve X25519:P-256:P-384;
    ssl_prefer_server_ciphers on;
    location / {
      default_type application/json;
      if (\$request_method != POST) { return 405; }
      return 200 '$answer';
    }
  }
}
EOF
  timeout 30 nginx -t -p "$dir" -e "$dir/logs/error.log" -c "$dir/nginx.conf" >"$WORK/raw/nginx-t.log" 2>&1 ||
    { cat "$WORK/raw/nginx-t.log" >&2; die "nginx rejected its configuration"; }
  nginx -p "$dir" -e "$dir/logs/error.log" -c "$dir/nginx.conf" >"$WORK/raw/nginx.log" 2>&1 &
  NGINX_PID=$!
  STARTED+=("$NGINX_PID")
  for ((i = 0; i < 100; i++)); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 --cacert "$CERTS/ca.crt" -X POST \
      --data-binary @"$BODY" "https://127.0.0.1:$NGINX_PORT/mutate" || true)" == 200 ]] && break
    kill -0 "$NGINX_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$NGINX_PID" 2>/dev/null || { cat "$WORK/raw/nginx.log" "$dir/logs/error.log" >&2; die "nginx did not start"; }
  log "nginx (pid $NGINX_PID) on 127.0.0.1:$NGINX_PORT"
}

# post PORT PATH OUT: one POST of the review; prints "status bytes".
post() {
  curl -sS --max-time 10 --cacert "$CERTS/ca.crt" -H 'Content-Type: application/json' \
    --data-binary @"$BODY" -o "$3" -w '%{http_code} %{size_download}' "https://127.0.0.1:$1$2"
}

# tls_params PORT [-tls1_2]: "TLSv1.3 TLS_AES_128_GCM_SHA256 X25519" as negotiated
# by OpenSSL's default client (what wrk and h2load offer).
tls_params() {
  timeout 10 openssl s_client -connect "127.0.0.1:$1" -servername localhost -CAfile "$CERTS/ca.crt" "${@:2}" \
    </dev/null 2>/dev/null | awk '
      /^New, / { gsub(",", ""); proto = $2; cipher = $5 }
      /Server Temp Key:/ { gsub(",", ""); group = $4 }
      END { printf "%s %s %s\n", proto, cipher, group }'
}

# Checks before the load: both endpoints answer allowed, /validate
# registered the workload, and what each server answers.
webhook_sanity() {
  local out="$1" m v n name
  m="$(post "$GK_PORT" /mutate "$WORK/raw/mutate.json")"
  v="$(post "$GK_PORT" /validate "$WORK/raw/validate.json")"
  n="$(post "$NGINX_PORT" /validate "$WORK/raw/nginx.json")"
  grep -q '"allowed":true' "$WORK/raw/mutate.json" || die "/mutate did not allow the review: $(head -c 400 "$WORK/raw/mutate.json")"
  grep -q '"allowed":true' "$WORK/raw/validate.json" || die "/validate did not allow the review: $(head -c 600 "$WORK/raw/validate.json")"
  name="$(jq -r .request.object.metadata.name "$BODY")"
  curl -sS --max-time 10 --cacert "$CERTS/ca.crt" -H "Authorization: Bearer $TOKEN" \
    -o "$WORK/raw/workload.json" "https://127.0.0.1:$API_PORT/v1/workloads/team-ml/$name" ||
    die "GET /v1/workloads/team-ml/$name failed"
  if ! jq -e 'type == "object" and (has("error") | not)' "$WORK/raw/workload.json" >/dev/null 2>&1; then
    die "the review was not registered: $(head -c 300 "$WORK/raw/workload.json")"
  fi
  {
    echo "| | gangkeeper /mutate | gangkeeper /validate | nginx (any POST) |"
    echo "|---|---|---|---|"
    echo "| status, answer bytes | ${m% *}, ${m#* } | ${v% *}, ${v#* } | ${n% *}, ${n#* } |"
    echo "| TLS (default client) | $(tls_params "$GK_PORT") | same listener | $(tls_params "$NGINX_PORT") |"
    echo "| TLS 1.2 (forced) | $(tls_params "$GK_PORT" -tls1_2) | same listener | $(tls_params "$NGINX_PORT" -tls1_2) |"
    echo
    echo "The review registered by /validate: workload \`team-ml/$name\`," \
      "state \`$(jq -r '(.state // .phase // "?")' "$WORK/raw/workload.json")\`" \
      "in ClusterQueue \`$(jq -r '(.clusterQueue // .cluster_queue // "?")' "$WORK/raw/workload.json")\`."
  } >>"$out"
  log "sanity: /mutate $m, /validate $v, nginx $n; workload team-ml/$name registered"
}

# run_wrk LABEL PORT PATH CONNS ROUND PID: one wrk point, a row of $WEBHOOK_TSV.
run_wrk() {
  local label=$1 port=$2 path=$3 conns=$4 round=$5 pid=$6
  local threads=$((conns < NPROC ? conns : NPROC)) raw="$WORK/raw/wrk-$label-c$4-r$5.txt"
  local t0 t1 seen line errs
  t0="$(cpu_ticks "$pid")"
  peers_start "$port" "$raw.peers"
  # bash's `time` gives the client's CPU (wrk is waited for by timeout).
  {
    TIMEFORMAT='%U %S'
    time GK_BENCH_BODY="$BODY" timeout -s INT $((DURATION + 30)) wrk -t"$threads" -c"$conns" -d"${DURATION}s" \
      --timeout 10s --latency -s "$HTTPS_DIR/post.lua" "https://127.0.0.1:$port$path" >"$raw" 2>&1 || true
  } 2>"$raw.time"
  t1="$(cpu_ticks "$pid")"
  seen="$(peers_stop "$raw.peers")"
  line="$(grep '^WRK ' "$raw" | tail -n1 || true)"
  if [[ -z "$line" ]]; then
    log "wrk $label c$conns: no result"
    sed 's/^/  /' "$raw" >&2
    printf '%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\n' "$label" "$conns" "$round" >>"$WEBHOOK_TSV"
    return 0
  fi
  errs=$(($(kv connect_errors "$line") + $(kv read_errors "$line") + $(kv write_errors "$line") +
    $(kv timeouts "$line") + $(kv bad_status "$line")))
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$conns" "$round" "$(kv rps "$line")" \
    "$(kv p50_us "$line")" "$(kv p90_us "$line")" "$(kv p99_us "$line")" "$(kv max_us "$line")" "$errs" \
    "$(awk -v t=$((t1 - t0)) -v hz="$CLK_TCK" -v d="$DURATION" 'BEGIN { printf "%.2f", t / hz / d }')" \
    "$seen" "$(awk -v d="$DURATION" '{ printf "%.2f", ($1 + $2) / d }' "$raw.time")" >>"$WEBHOOK_TSV"
  log "wrk $label c$conns round $round: $(kv rps "$line") req/s, p99 $(kv p99_us "$line") us, errors $errs"
}

# run_h2load TAG LABEL PORT PATH CONNS: per-connection fairness (h2load
# reports each connection's req/s; a minimum of 0 means a starved connection).
run_h2load() {
  local label=$2 port=$3 path=$4 conns=$5 raw="$WORK/raw/h2load-$1-c$5.txt" rc=0
  local threads=$((conns < NPROC ? conns : NPROC)) rps per reqs
  timeout -s INT $((DURATION + 15)) h2load --h1 -c"$conns" -t"$threads" -D"$DURATION" -d "$BODY" \
    -H 'content-type: application/json' "https://127.0.0.1:$port$path" >"$raw" 2>&1 || rc=$?
  if [[ "$rc" == 124 ]]; then
    echo "| $label | $conns | did not finish within $((DURATION + 15)) s (a starved or closed connection) | - | - |"
    return 0
  fi
  rps="$(awk '/^finished in/ { gsub(",", ""); print $4 }' "$raw")"
  per="$(awk '/^req\/s/ { printf "%s / %s", $3, $4 }' "$raw")"
  reqs="$(awk '/^requests:/ { gsub(",", ""); printf "%s done, %s succeeded, %s failed, %s errored, %s timeout", $6, $8, $10, $12, $14 }' "$raw")"
  echo "| $label | $conns | $(grouped "$rps") | ${per:--} | ${reqs:--} |"
}

# run_paced LABEL PORT PATH RATE PID [DISPATCH]: the paced client
# (DISPATCH: pool or connection, default PACED_DISPATCH); prints its RESULT
# line plus client_cores= and server_cores= (CPU per second of the run).
run_paced() {
  local label=$1 port=$2 path=$3 rate=$4 pid=$5 dispatch=${6:-$PACED_DISPATCH} raw="$WORK/raw/paced-$1.txt" t0 t1 line
  t0="$(cpu_ticks "$pid")"
  {
    TIMEFORMAT='%U %S %R'
    time timeout -s INT $((DURATION + 60)) "$BENCH_BIN/gangkeeper_paced_load" --port "$port" \
      --ca "$CERTS/ca.crt" --body "$BODY" --path "$path" --rate "$rate" --connections "$PACED_CONNS" \
      --seconds "$DURATION" --warmup 1 --expect '"allowed":true' --dispatch "$dispatch" >"$raw" 2>&1 || true
  } 2>"$raw.time"
  t1="$(cpu_ticks "$pid")"
  line="$(grep '^RESULT ' "$raw" | tail -n1 || true)"
  if [[ -z "$line" ]]; then
    sed 's/^/  /' "$raw" >&2
    echo ""
    return 0
  fi
  echo "$line $(awk -v t=$((t1 - t0)) -v hz="$CLK_TCK" '{ printf "client_cores=%.2f server_cores=%.2f", ($1 + $2) / $3, t / hz / $3 }' "$raw.time")"
}

# limits_bitten: gangkeeper_http_connection_limits_total summed over its labels.
limits_bitten() {
  curl -sS --max-time 10 --cacert "$CERTS/ca.crt" -H "Authorization: Bearer $TOKEN" \
    "https://127.0.0.1:$API_PORT/metrics" 2>/dev/null |
    awk '/^gangkeeper_http_connection_limits_total/ { s += $NF } END { print s + 0 }'
}

# webhook_exposure OUT: a well-behaved client's /validate latency while
# hostile connections are held (gangkeeper_idle_load): none, idle after the
# handshake, slowloris, and both at once.
webhook_exposure() {
  local out=$1 idle slow rate row n s line hold raw ready i before after p99
  read -r idle slow rate <<<"$EXPOSURE"
  {
    echo
    echo "### Unmoved by idle and slow connections (paced /validate at $(grouped "$rate") req/s)"
    echo
    echo "\`gangkeeper_idle_load\` (test/bench/idle_load.cc) holds hostile connections from loopback sources"
    echo "127.0.0.2 and up (900 per address, under the per-source cap of 1,000): *idle* ones complete the"
    echo "TLS handshake and send nothing; *slowloris* ones send a request header one byte every 5 s and are"
    echo "opened again when cut. Once they are open the paced client (as above, $PACED_CONNS connections from"
    echo "127.0.0.1) sends /validate for ${DURATION} s. Default limits: --max-connections 10000, 1,000 per source,"
    echo "a 10 s header deadline, a 120 s idle timeout; \"limits bitten\" is the change of"
    echo "\`gangkeeper_http_connection_limits_total\` during the row (the cap closing the oldest idle ones)."
    echo
    echo "| hostile connections | held at start (idle / slow) | p50 ms | p99 ms | p99.9 ms | errors | reconnects | limits bitten | at the end: idle open / closed, slowloris cut |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
  } >>"$out"
  for row in none idle slow both; do
    case "$row" in
      none) n=0 s=0 ;;
      idle) n=$idle s=0 ;;
      slow) n=0 s=$slow ;;
      both) n=$idle s=$slow ;;
    esac
    raw="$WORK/raw/exposure-$row.txt"
    hold=""
    ready="- / -"
    before="$(limits_bitten)"
    if ((n + s > 0)); then
      "$BENCH_BIN/gangkeeper_idle_load" --port "$GK_PORT" --ca "$CERTS/ca.crt" --idle "$n" --slow "$s" \
        --seconds $((DURATION + 120)) >"$raw" 2>&1 &
      hold=$!
      STARTED+=("$hold")
      for ((i = 0; i < 1200; i++)); do  # 120 s to open them
        grep -q '^READY ' "$raw" && break
        kill -0 "$hold" 2>/dev/null || break
        sleep 0.1
      done
      line="$(grep '^READY ' "$raw" || true)"
      ready="$(kv idle "$line") / $(kv slow "$line")"
    fi
    line="$(PACED_CONNS=$PACED_CONNS run_paced "exposure-$row" "$GK_PORT" /validate "$rate" "$GK_PID")"
    after="$(limits_bitten)"
    if [[ -n "$hold" ]]; then
      stop_pid "$hold" 10  # TERM: it prints its RESULT line and exits
    fi
    p99="$(fmt 2 "$(kv p99_us "$line")" 0.001)"
    log "exposure $row ($ready held): p99 ${p99:-?} ms"
    echo "| $row ($n idle, $s slowloris) | $ready | $(fmt 2 "$(kv p50_us "$line")" 0.001) | $p99 |" \
      "$(fmt 2 "$(kv p999_us "$line")" 0.001) | $(kv errors "$line") | $(kv reconnects "$line") |" \
      "$((after - before)) | $(grep '^RESULT ' "$raw" 2>/dev/null | sed 's/^RESULT //' || echo -) |" >>"$out"
    [[ "$row" == none ]] || target "$out" "webhook /validate p99 with $row hostile connections < 10 ms" \
      "${p99:--} ms" "$(verdict "$p99" '<' 10)"
    sleep 2
  done
}

section_webhook() {
  local out="$WORK/sections/webhook.md" round c label pid port path
  WEBHOOK_TSV="$WORK/raw/webhook.tsv"
  : >"$WEBHOOK_TSV"
  start_gangkeeper
  start_nginx
  {
    echo "## Webhook throughput and latency"
    echo
    stamp
    echo "Targets (DESIGN §10): at 32 connections at least 60 % of nginx's requests/s; p99 under 5 ms at"
    echo "70 % of gangkeeper's maximum rate."
    echo
  } >"$out"
  webhook_sanity "$out"

  log "webhook: ${ROUNDS} round(s) x {$CONNS} connections x {nginx, /mutate, /validate}, ${DURATION} s each"
  for ((round = 1; round <= ROUNDS; round++)); do
    for c in $CONNS; do
      run_wrk nginx "$NGINX_PORT" /validate "$c" "$round" "$NGINX_PID"
      sleep 1
      run_wrk mutate "$GK_PORT" /mutate "$c" "$round" "$GK_PID"
      sleep 1
      run_wrk validate "$GK_PORT" /validate "$c" "$round" "$GK_PID"
      sleep 1
    done
  done
  kill -0 "$GK_PID" 2>/dev/null || die "gangkeeper exited during the load (see $WORK/raw/gangkeeper.err)"

  {
    echo
    echo "### Maximum rate (wrk, closed loop)"
    echo
    echo "wrk $(wrk -v 2>&1 | awk 'NR == 1 { print $2 }'), ${NPROC} threads (at most one per connection), ${DURATION} s per"
    echo "point, ${ROUNDS} round(s); within a round nginx, /mutate and /validate run back to back at each"
    echo "connection count. req/s and latencies are the mean over the rounds (each round's req/s in brackets)."
    echo "\"server / client cores\" = CPU seconds the server / wrk used per second (out of ${NPROC}); \"server CPU /"
    echo "req\" = server cores ÷ req/s, what one request costs the server; \"connections seen\" = distinct client"
    echo "connections found established at the server's port, sampled every 0.2 s (keep-alive held: equal to"
    echo "conns; a server that closed connections would show more)."
    echo
    echo "| server, path | conns | req/s | p50 ms | p99 ms | errors | server / client cores | server CPU / req | connections seen | vs nginx |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  } >>"$out"
  awk -F'\t' -v conns="$CONNS" '
    function g(x,   s, n, i, o) { s = sprintf("%.0f", x); n = length(s); o = ""
      for (i = 1; i <= n; i++) { o = o substr(s, i, 1); if ((n - i) % 3 == 0 && i < n) o = o "," } return o }
    $4 != "-" { k = $1 SUBSEP $2; n[k]++; rps[k] += $4; p50[k] += $5; p99[k] += $7; err[k] += $9
                cores[k] += $10; acc[k] += $11; cli[k] += $12; each[k] = each[k] (each[k] == "" ? "" : " / ") g($4) }
    END {
      split(conns, cs, " ")
      name["nginx"] = "nginx (static 400 B)"; name["mutate"] = "gangkeeper /mutate"; name["validate"] = "gangkeeper /validate"
      split("nginx mutate validate", ls, " ")
      for (i = 1; i in cs; i++) for (j = 1; j <= 3; j++) {
        k = ls[j] SUBSEP cs[i]
        if (!(k in n)) { printf "| %s | %s | - | - | - | - | - | - | - | - |\n", name[ls[j]], cs[i]; continue }
        r = rps[k] / n[k]; nk = "nginx" SUBSEP cs[i]
        ratio = (ls[j] != "nginx" && (nk in n) && rps[nk] > 0) ? sprintf("%.0f %%", 100 * r / (rps[nk] / n[nk])) : "-"
        printf "| %s | %s | %s (%s) | %.2f | %.2f | %d | %.2f / %.2f | %.0f µs | %d | %s |\n", name[ls[j]], cs[i],
          g(r), each[k], p50[k] / n[k] / 1000, p99[k] / n[k] / 1000, err[k], cores[k] / n[k], cli[k] / n[k],
          (r > 0 ? 1e6 * cores[k] / n[k] / r : 0), acc[k] / n[k], ratio
      }
    }' "$WEBHOOK_TSV" >>"$out"

  # Targets at 32 connections.
  local nginx32 ratio max_m max_v
  nginx32="$(awk -F'\t' '$1 == "nginx" && $2 == 32 && $4 != "-" { s += $4; n++ } END { if (n) print s / n }' "$WEBHOOK_TSV")"
  local want
  for path in mutate validate; do
    ratio="$(awk -F'\t' -v p="$path" -v ng="$nginx32" '$1 == p && $2 == 32 && $4 != "-" { s += $4; n++ }
      END { if (n && ng > 0) printf "%.1f", 100 * s / n / ng }' "$WEBHOOK_TSV")"
    want=$([[ $path == mutate ]] && echo 60 || echo 45)  # issue #22: /validate journals, /mutate does not
    target "$out" "webhook /$path req/s at 32 connections >= $want % of nginx" "${ratio:--} %" "$(verdict "$ratio" '>=' "$want")"
  done

  # Fairness: per-connection rates at the largest connection count.
  local cmax
  cmax="$(tr ' ' '\n' <<<"$CONNS" | sort -n | tail -n1)"
  {
    echo
    echo "### Every connection served (h2load --h1, $cmax connections, ${DURATION} s)"
    echo
    echo "h2load $(h2load --version | awk '{ print $2 }' | sed 's|.*/||') reports each connection's req/s; a minimum of 0"
    echo "would be a starved connection (the API server keeps up to 25 connections per instance)."
    echo
    echo "| server, path | conns | req/s | per-connection req/s min / max | requests |"
    echo "|---|---:|---:|---:|---|"
    run_h2load nginx "nginx (static 400 B)" "$NGINX_PORT" /validate "$cmax"
    run_h2load mutate "gangkeeper /mutate" "$GK_PORT" /mutate "$cmax"
    run_h2load validate "gangkeeper /validate" "$GK_PORT" /validate "$cmax"
  } >>"$out"

  # Latency at 70 % of the maximum rate, open loop.
  max_m="$(awk -F'\t' '$1 == "mutate" && $4 != "-" { s[$2] += $4; n[$2]++ }
    END { for (c in s) if (s[c] / n[c] > m) m = s[c] / n[c]; print m + 0 }' "$WEBHOOK_TSV")"
  max_v="$(awk -F'\t' '$1 == "validate" && $4 != "-" { s[$2] += $4; n[$2]++ }
    END { for (c in s) if (s[c] / n[c] > m) m = s[c] / n[c]; print m + 0 }' "$WEBHOOK_TSV")"
  {
    echo
    echo "### Latency at ${PACED_FRACTION} x the maximum rate (paced, open loop)"
    echo
    echo "\`gangkeeper_paced_load\` (test/bench/paced_load.cc): $PACED_CONNS keep-alive TLS connections driven by"
    echo "one event loop (epoll, non-blocking OpenSSL, waking at most every 500 µs for due requests). The requests"
    echo "fall due on one even schedule at the offered rate; with \`--dispatch pool\` (the rows the verdict reads) each"
    echo "due request goes to an idle connection, oldest first, and waits when all $PACED_CONNS are busy, as the API"
    echo "server's HTTP client takes an idle keep-alive connection (or opens one) for each admission call rather"
    echo "than queueing a call behind another on a busy one. The rows marked *per-connection schedule* are the"
    echo "stricter client of earlier runs: each connection sends on its own fixed schedule, so one slow answer"
    echo "delays the requests due after it on that connection. Latency is counted from"
    echo "the time a request was *due*, so a stall shows in the percentiles instead of slowing the client"
    echo "(no coordinated omission; wrk has no rate limit and h2load's \`--rps\` counts from the actual"
    echo "send). The maximum rate is the best mean req/s of the wrk table for that path. ${DURATION} s"
    echo "measured after 1 s of warm-up; every answer checked for \`\"allowed\":true\`. The nginx row is the"
    echo "same client at the /mutate rate: what the client and the shared cores add on their own."
    echo
    echo "| server, path | max req/s | offered | achieved | p50 ms | p90 ms | p99 ms | p99.9 ms | service p99 ms | sent >1 ms late | reconnects | errors | server / client cores |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  } >>"$out"
  local rate line p99 row_label maxr dispatch reference
  local other=connection
  [[ "$PACED_DISPATCH" == connection ]] && other=pool
  for row in mutate validate nginx mutate:ref validate:ref; do
    path=${row%%:*}
    reference=$([[ $row == *:ref ]] && echo 1 || echo 0)
    dispatch=$([[ $reference == 1 ]] && echo "$other" || echo "$PACED_DISPATCH")
    case "$path" in
      mutate) maxr=$max_m; port=$GK_PORT; row_label="gangkeeper /mutate" ;;
      validate) maxr=$max_v; port=$GK_PORT; row_label="gangkeeper /validate" ;;
      nginx) maxr="-"; port=$NGINX_PORT; row_label="nginx (static 400 B)" ;;
    esac
    [[ $reference == 1 ]] && row_label="$row_label, *$([[ $other == connection ]] && echo per-connection || echo pool) schedule*"
    rate="$(fmt 0 "$([[ $path == validate ]] && echo "$max_v" || echo "$max_m")" "$PACED_FRACTION")"
    if [[ "$rate" == "-" || "$rate" == 0 ]]; then
      echo "| $row_label | - | - | - | - | - | - | - | - | - | - | - | - |" >>"$out"
      continue
    fi
    line="$(run_paced "$path$([[ $reference == 1 ]] && echo "-$other")" "$port" \
      "/$([[ $path == nginx ]] && echo mutate || echo "$path")" "$rate" \
      "$([[ $path == nginx ]] && echo "$NGINX_PID" || echo "$GK_PID")" "$dispatch")"
    log "paced $path ($dispatch) at $rate req/s: ${line:-no result}"
    if [[ -z "$line" ]]; then
      echo "| $row_label | $(grouped "$maxr") | $(grouped "$rate") | no result | - | - | - | - | - | - | - | - | - |" >>"$out"
      p99=""
    else
      p99="$(fmt 2 "$(kv p99_us "$line")" 0.001)"
      echo "| $row_label | $(grouped "$maxr") | $(grouped "$rate") | $(grouped "$(kv achieved_rps "$line")") |" \
        "$(fmt 2 "$(kv p50_us "$line")" 0.001) | $(fmt 2 "$(kv p90_us "$line")" 0.001) | $p99 |" \
        "$(fmt 2 "$(kv p999_us "$line")" 0.001) | $(fmt 2 "$(kv svc_p99_us "$line")" 0.001) |" \
        "$(kv late_1ms "$line") | $(kv reconnects "$line") | $(kv errors "$line") |" \
        "$(kv server_cores "$line") / $(kv client_cores "$line") |" >>"$out"
    fi
    if [[ "$path" != nginx && $reference == 0 ]]; then
      target "$out" "webhook /$path p99 at ${PACED_FRACTION} x max rate < 5 ms" "${p99:--} ms" "$(verdict "$p99" '<' 5)"
    fi
  done
  kill -0 "$GK_PID" 2>/dev/null || die "gangkeeper exited during the load (see $WORK/raw/gangkeeper.err)"
  webhook_exposure "$out"

  {
    echo
    echo "### How this was measured"
    echo
    echo "- gangkeeper is started as a user would: \`gangkeeper serve --kube=none\` with its own data directory"
    echo "  in a scratch directory, certificates from \`gangkeeper certs\` (ECDSA P-256), the repository's"
    echo "  \`policies/\` plus \`test/bench/https/team-ml.yaml\` (a ClusterQueue and the LocalQueue"
    echo "  \`team-ml/gpu-queue\` the review needs), default flags${GK_SERVE_ARGS:+ plus \`$GK_SERVE_ARGS\`}: $NPROC cores shared with the"
    echo "  load client, access log (one line per request) on, to a file."
    echo "- nginx $(nginx -v 2>&1 | sed 's|.*/||') serves a fixed 400-byte AdmissionReview answer to every POST, with the same"
    echo "  certificate and key, TLS versions, cipher lists and groups as gangkeeper's listener (negotiated"
    echo "  parameters in the first table), keep-alive like gangkeeper's defaults, ${NPROC} workers, no access log."
    echo "- Every request is the same 5 KB review (\`test/fixtures/admission/review-job.json\`, $(wc -c <"$BODY") bytes,"
    echo "  CREATE of a 2-pod GPU Job). /validate registers it once; every repeat carries the same uid, so"
    echo "  registering it again is idempotent (nothing new is journaled): the /validate figures measure"
    echo "  decode + validation + the broker's idempotent registration, not a stream of new workloads"
    echo "  (\`gangkeeper_replica_bench\` in the micro-benchmarks sends distinct creates, each journaled)."
    echo "- The load client shares the $NPROC cores with the server: req/s are \"server plus client on $NPROC cores\","
    echo "  the same for both servers; compare the ratio more than the absolute numbers."
  } >>"$out"
  stop_pid "$NGINX_PID" 15
  stop_pid "$GK_PID" 40
  STARTED=()
  cp "$WORK/raw/gangkeeper.err" "$WORK/raw/gangkeeper-final.err" 2>/dev/null || true
}

# ================================================================ micro

# gb FILE NAME FIELD: FIELD of the benchmark NAME (arguments included,
# Google Benchmark's suffixes like iterations:N or manual_time ignored).
gb() {
  jq -r --arg n "$2" --arg f "$3" '
    [.benchmarks[] | select((.run_type // "iteration") == "iteration")
     | select((.name | split("/") | map(select(test("^(iterations|manual_time|real_time|min_time|repeats|threads):?") | not)) | join("/")) == $n)
    ][0][$f] // empty' "$1"
}
# gb_ms FILE NAME: real time per iteration in milliseconds.
gb_ms() {
  local t u
  t="$(gb "$1" "$2" real_time)"
  u="$(gb "$1" "$2" time_unit)"
  [[ -n "$t" ]] || { echo ""; return 0; }
  awk -v t="$t" -v u="$u" 'BEGIN { f = (u == "ns") ? 1e-6 : (u == "us") ? 1e-3 : (u == "s") ? 1000 : 1; printf "%.3f\n", t * f }'
}

# run_gbench NAME [ARGS...]: runs build/bench/test/bench/NAME with JSON output.
run_gbench() {
  local name=$1 json="$WORK/raw/$1.json"
  shift
  log "running $name"
  TMPDIR="$WORK/tmp" timeout 1800 "$BENCH_BIN/$name" --benchmark_out="$json" --benchmark_out_format=json \
    --benchmark_min_time="$GBENCH_MIN_TIME" "$@" >"$WORK/raw/$name.txt" 2>&1 ||
    log "$name failed or timed out (see its part of RESULTS.md)"
  [[ -s "$json" ]] || echo '{"benchmarks":[]}' >"$json"
  echo "$json"
}

section_micro() {
  local out="$WORK/sections/micro.md" j v v2 ms
  {
    echo "## Micro-benchmarks"
    echo
    stamp
    echo "Google Benchmark programs of \`test/bench/\` (RelWithDebInfo, \`--benchmark_min_time=$GBENCH_MIN_TIME\` where"
    echo "a benchmark does not fix its own iterations) and \`gangkeeper_replica_bench\`. Store and audit"
    echo "benchmarks write to the scratch disk of the machine table."
    echo
  } >"$out"

  # --- broker
  j="$(run_gbench gangkeeper_broker_bench --benchmark_filter='^BM_(Drain10k|Decision|CompletionChurn|KueueLargeScale)')"
  {
    echo "### Broker (\`gangkeeper_broker_bench\`)"
    echo
    echo "| benchmark | what it measures | figure | DESIGN §10 target | verdict |"
    echo "|---|---|---:|---|---|"
  } >>"$out"
  ms="$(gb_ms "$j" BM_Drain10k/10000)"
  v="$(fmt 3 "$ms" 0.001)"
  echo "| BM_Drain10k | 10,000 pending gangs (1-64 pods, GPU flavors and MIG profiles) over 100 ClusterQueues in 10 cohorts: Add all, then Schedule to a fixed point (mean of 5; admitted $(gb "$j" BM_Drain10k/10000 admitted | cut -d. -f1), preempted $(gb "$j" BM_Drain10k/10000 preempted | cut -d. -f1)) | ${v} s | < 1 s | $(verdict "$v" '<' 1) |" >>"$out"
  target "$out" "broker: 10,000 pending drained < 1 s" "$v s" "$(verdict "$v" '<' 1)"
  v="$(gb "$j" BM_Decision p99_us)"
  echo "| BM_Decision | one Schedule call that decides something (a new 1-4 pod gang on the drained 10k state): p50 $(fmt 1 "$(gb "$j" BM_Decision p50_us)") µs, max $(fmt 1 "$(gb "$j" BM_Decision max_us)") µs over $(gb "$j" BM_Decision timed_calls | cut -d. -f1) timed calls | p99 $(fmt 1 "$v") µs | p99 < 50 µs | $(verdict "$v" '<' 50) |" >>"$out"
  target "$out" "broker: decision p99 < 50 µs" "$(fmt 1 "$v") µs" "$(verdict "$v" '<' 50)"
  echo "| BM_CompletionChurn | the end of Kueue's baseline trace: 30 full ClusterQueues in 5 cohorts with 10,000 pending 1-cpu workloads; one completion and one arrival, then Schedule (admits into the freed room, sets the same-shaped rest aside again): p50 $(fmt 0 "$(gb "$j" BM_CompletionChurn/10000 p50_us)") µs over 2,000 calls | p99 $(fmt 0 "$(gb "$j" BM_CompletionChurn/10000 p99_us)") µs | - (reported: grows with the pending workloads of a cohort) | - |" >>"$out"
  # BM_Memory100k measures a process that holds a broker and nothing else,
  # so it runs in a process of its own: after the benchmarks above, the
  # heap they freed is still mapped (the same run measured 389 MB, 234 MB
  # after malloc_trim). The bench links the system allocator; the
  # gangkeeper binary ships with jemalloc (src/cli/CMakeLists.txt), whose
  # size classes round differently, so it runs again with jemalloc
  # preloaded. The verdict takes the larger figure.
  local jem jg jj="" vg vj=""
  jg="$WORK/raw/gangkeeper_broker_bench-memory.json"
  log "running gangkeeper_broker_bench BM_Memory100k alone"
  TMPDIR="$WORK/tmp" timeout 600 "$BENCH_BIN/gangkeeper_broker_bench" --benchmark_filter='^BM_Memory100k' \
    --benchmark_out="$jg" --benchmark_out_format=json >"$WORK/raw/gangkeeper_broker_bench-memory.txt" 2>&1 ||
    log "BM_Memory100k failed or timed out"
  [[ -s "$jg" ]] || echo '{"benchmarks":[]}' >"$jg"
  jem="$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -n1 || true)"
  if [[ -n "$jem" ]]; then
    jj="$WORK/raw/gangkeeper_broker_bench-jemalloc.json"
    log "running gangkeeper_broker_bench BM_Memory100k alone under jemalloc"
    TMPDIR="$WORK/tmp" LD_PRELOAD="$jem" timeout 600 "$BENCH_BIN/gangkeeper_broker_bench" --benchmark_filter='^BM_Memory100k' \
      --benchmark_out="$jj" --benchmark_out_format=json >"$WORK/raw/gangkeeper_broker_bench-jemalloc.txt" 2>&1 ||
      log "BM_Memory100k under jemalloc failed or timed out"
    [[ -s "$jj" ]] && vj="$(gb "$jj" BM_Memory100k rss_mb)"
  fi
  vg="$(gb "$jg" BM_Memory100k rss_mb)"
  v="$vg"
  if [[ -n "$vj" ]] && awk -v a="$vj" -v b="$vg" 'BEGIN { exit !(a > b) }'; then v="$vj"; fi
  local with_jemalloc="not measured (no libjemalloc.so.2)"
  [[ -n "$vj" ]] && with_jemalloc="$(fmt 0 "$vj") MB"
  echo "| BM_Memory100k | process RSS after a Broker tracks $(grouped "$(gb "$jg" BM_Memory100k tracked)") workloads (each with labels and a 600-byte annotation; snapshots included), in a process of its own: $(fmt 0 "$vg") MB with the system allocator ($(fmt 0 "$(gb "$jg" BM_Memory100k rss_after_trim_mb)") MB after malloc_trim), $with_jemalloc with jemalloc, which the binary ships with; the larger counts | $(fmt 0 "$v") MB | < 250 MB | $(verdict "$v" "<" 250) |" >>"$out"
  target "$out" "broker: 100k workloads < 250 MB RSS" "$(fmt 0 "$v") MB" "$(verdict "$v" "<" 250)"
  echo "| BM_KueueLargeScale | Kueue's large-scale shape (1,000 ClusterQueues, 50,000 workloads) on a simulated clock: wall $(fmt 1 "$(gb_ms "$j" BM_KueueLargeScale/100)" 0.001) s; simulated makespan $(fmt 1 "$(gb "$j" BM_KueueLargeScale/100 sim_makespan_s)") s, usage $(fmt 1 "$(gb "$j" BM_KueueLargeScale/100 cq_usage_pct)") %, mean wait small/medium/large $(fmt 0 "$(gb "$j" BM_KueueLargeScale/100 wait_small_ms)")/$(fmt 0 "$(gb "$j" BM_KueueLargeScale/100 wait_medium_ms)")/$(fmt 0 "$(gb "$j" BM_KueueLargeScale/100 wait_large_ms)") ms, $(gb "$j" BM_KueueLargeScale/100 preemptions | cut -d. -f1) preemptions | - | none here (Kueue's CI: 1,179 s wall); see Scheduling quality | - |" >>"$out"

  # --- store
  j="$(run_gbench gangkeeper_store_bench)"
  {
    echo
    echo "### Store (\`gangkeeper_store_bench\`)"
    echo
    echo "| benchmark | what it measures | figure | DESIGN §10 target | verdict |"
    echo "|---|---|---:|---|---|"
  } >>"$out"
  local w what
  for w in 1 8 64; do
    v="$(gb "$j" "BM_GroupCommit/$w" appends_per_s)"
    what="$w writer(s), $(fmt 1 "$(gb "$j" "BM_GroupCommit/$w" appends_per_fsync)") appends per fsync"
    if [[ "$w" == 1 ]]; then
      what="20,000 appends of 400 bytes (a registration's journal record) to the segmented log, each durable (fsynced) on return; $what"
    fi
    if [[ "$w" == 64 ]]; then
      echo "| BM_GroupCommit/64 | $what | $(grouped "$v") /s | >= 20,000 acknowledged changes/s with group commit | $(verdict "$v" '>=' 20000) |" >>"$out"
      target "$out" "store: >= 20,000 acknowledged changes/s (64 writers, group commit)" "$(grouped "$v") /s" "$(verdict "$v" '>=' 20000)"
    else
      echo "| BM_GroupCommit/$w | $what | $(grouped "$v") /s | (for reference) | - |" >>"$out"
    fi
  done
  echo "| BM_Snapshot100k | writing a snapshot of a broker tracking 100,000 workloads ($(fmt 1 "$(gb "$j" BM_Snapshot100k snapshot_mb)") MB) | $(fmt 0 "$(gb "$j" BM_Snapshot100k snapshot_ms)") ms | - | - |" >>"$out"
  v="$(gb "$j" BM_Restart100k/1 restart_ms)"
  v2="$(fmt 3 "$v" 0.001)"
  echo "| BM_Restart100k/1 | restart with 100,000 workloads from the newest snapshot plus the journal after it ($(gb "$j" BM_Restart100k/1 replayed_records | cut -d. -f1) records): open, replay, restore, first published snapshot | ${v2} s | < 2 s | $(verdict "$v2" '<' 2) |" >>"$out"
  target "$out" "store: restart of 100k workloads < 2 s (snapshot + journal)" "$v2 s" "$(verdict "$v2" '<' 2)"
  v="$(fmt 3 "$(gb "$j" BM_Restart100k/0 restart_ms)" 0.001)"
  echo "| BM_Restart100k/0 | the same from the journal alone ($(gb "$j" BM_Restart100k/0 replayed_records | cut -d. -f1) records, no snapshot) | ${v} s | (worst case, for reference) | - |" >>"$out"

  # --- audit
  j="$(run_gbench gangkeeper_audit_bench)"
  {
    echo
    echo "### Audit log (\`gangkeeper_audit_bench\`)"
    echo
    echo "No DESIGN §10 target; docs/internals.md states about 30,000 events/s with 64 writers and about 1 ms per"
    echo "page of 100 over a million indexed events."
    echo
    echo "| benchmark | what it measures | figure |"
    echo "|---|---|---:|"
  } >>"$out"
  for w in 1 8 64; do
    echo "| BM_AuditAppend/$w | durable audit events per second, $w concurrent appender(s) of one event each (shared fsyncs) | $(grouped "$(gb "$j" "BM_AuditAppend/$w" events_per_s)") /s |" >>"$out"
  done
  local q i qname
  for q in 0 1 2 3 4; do
    case "$q" in
      0) qname="one workload's history" ;; 1) qname="a team's admissions, newest hour" ;;
      2) qname="a team's admissions, oldest hour" ;; 3) qname="the newest page after a cursor" ;;
      4) qname="an action with no match" ;;
    esac
    for i in 1000000 250000 0; do
      echo "| BM_AuditQuery/$q/$i | one page (limit 100) over 1,000,000 events: $qname; index of $(grouped "$i") events | $(ms_or_us "$(gb_ms "$j" "BM_AuditQuery/$q/$i")") |" >>"$out"
    done
  done

  # --- webhook hot path
  j="$(run_gbench gangkeeper_webhook_bench)"
  {
    echo
    echo "### Webhook hot path (\`gangkeeper_webhook_bench\`, in process, no TLS)"
    echo
    echo "\"allocations\" are heap allocations per request on every thread (the bench interposes malloc);"
    echo "\"CPU\" is the process's CPU per request, the broker's thread included (steadier than wall time"
    echo "on shared cores)."
    echo
    echo "| benchmark | what it measures | figure | allocations / request | CPU / request |"
    echo "|---|---|---:|---:|---:|"
    echo "| BM_DecodeAndMutate | parse the 5 KB review + mutate, on one thread | $(fmt 1 "$(gb_ms "$j" BM_DecodeAndMutate)" 1000) µs |" \
      "$(fmt 0 "$(gb "$j" BM_DecodeAndMutate allocs/req)" 1) | $(fmt 1 "$(gb "$j" BM_DecodeAndMutate cpu_ns/req)" 0.001) µs |"
    echo "| BM_DecodeAndValidate | parse + validate + register (in-memory registry; the same uid again), on one thread | $(fmt 1 "$(gb_ms "$j" BM_DecodeAndValidate)" 1000) µs |" \
      "$(fmt 0 "$(gb "$j" BM_DecodeAndValidate allocs/req)" 1) | $(fmt 1 "$(gb "$j" BM_DecodeAndValidate cpu_ns/req)" 0.001) µs |"
    local n
    for n in 1 32; do
      echo "| BM_ValidateAsyncBroker/$n | ValidateAsync through a running broker's registry (as \`serve\`), $n in flight; per request | $(fmt 1 "$(gb_ms "$j" "BM_ValidateAsyncBroker/$n")" "$(awk -v n=$n 'BEGIN { print 1000 / n }')") µs |" \
        "$(fmt 0 "$(gb "$j" "BM_ValidateAsyncBroker/$n" allocs/req)" 1) | $(fmt 1 "$(gb "$j" "BM_ValidateAsyncBroker/$n" cpu_ns/req)" 0.001) µs |"
    done
  } >>"$out"

  # --- replica (plain program: seconds clients kills)
  local args
  read -r -a args <<<"$REPLICA_ARGS"
  log "running gangkeeper_replica_bench ${args[*]}"
  {
    echo
    echo "### Replicated store (\`gangkeeper_replica_bench ${args[*]}\`: seconds, clients, leader kills)"
    echo
    echo "Issue #10's figures on the real binary over TLS: distinct creates through /validate, each durable"
    echo "before its answer, into one replica on the file journal and into three replicas on one etcd; then"
    echo "SIGKILLs of the leader. No DESIGN §10 target."
    echo
  } >>"$out"
  if TMPDIR="$WORK/tmp" timeout $((${args[0]:-10} * 2 + ${args[2]:-5} * 20 + 300)) \
    "$BENCH_BIN/gangkeeper_replica_bench" "${args[@]}" >"$WORK/raw/replica.txt" 2>"$WORK/raw/replica.err"; then
    cat "$WORK/raw/replica.txt" >>"$out"
  else
    {
      echo "gangkeeper_replica_bench failed or timed out; its output:"
      echo
      echo '```'
      tail -n 20 "$WORK/raw/replica.txt" "$WORK/raw/replica.err"
      echo '```'
    } >>"$out"
  fi
}

# ================================================================ hooks

# Scheduling quality: `gangkeeper simulate` (src/sim, another part of issue
# #11) on Kueue's generator configurations. The report's schema belongs to
# simulate; everything that reads it is in sim_extract.

# sim_extract REPORT.json: "makespan_s usage_pct mean_large mean_medium mean_small"
# (seconds; "-" where absent). Adapt here when the report's format changes.
sim_extract() {
  jq -r '
    def num: if . == null then "-" else tostring end;
    def cls($c): ((.classes // {})[$c].time_to_admission_s.mean) | num;
    [ (.summary.makespan_s | num),
      (((.summary.utilization // {}).cpu) as $u | if $u == null then "-" else ($u * 100 | tostring) end),
      cls("large"), cls("medium"), cls("small") ] | join(" ")' "$1"
}

section_scheduling() {
  local out="$WORK/sections/scheduling.md" cfg gen rep vals makespan usage large medium small
  {
    echo "## Scheduling quality"
    echo
    stamp
  } >"$out"
  if [[ ! -x "$GK" ]] || ! timeout 30 "$GK" simulate --help >/dev/null 2>&1; then
    echo "not built yet (\`gangkeeper simulate\` is not in this build)." >>"$out"
    return 0
  fi
  {
    echo "\`gangkeeper simulate --workload test/bench/kueue/CONFIG/generator.yaml\` (simulated clock)."
    echo "Targets (issue #11) for Kueue's baseline: makespan under 80 s, usage above 90 %, every class's mean"
    echo "time to admission at most a quarter of Kueue's (Kueue's CI: 351 s wall, 55.9 % usage, large 16.5 s,"
    echo "medium 76.8 s, small 215.5 s)."
    echo
    echo "| configuration | wall s | makespan s | usage % | mean time to admission large / medium / small s |"
    echo "|---|---:|---:|---:|---|"
  } >>"$out"
  for cfg in baseline large-scale; do
    gen="$REPO/test/bench/kueue/$cfg/generator.yaml"
    rep="$WORK/raw/simulate-$cfg.json"
    if [[ ! -f "$gen" ]]; then
      echo "| $cfg | not built yet (no test/bench/kueue/$cfg/generator.yaml) | | | |" >>"$out"
      continue
    fi
    log "simulate $cfg"
    local t0 t1
    t0="$(date +%s.%N)"
    if ! timeout 3600 "$GK" simulate --workload "$gen" -o "$rep" >"$WORK/raw/simulate-$cfg.out" 2>&1; then
      echo "| $cfg | failed: $(tail -n1 "$WORK/raw/simulate-$cfg.out") | | | |" >>"$out"
      continue
    fi
    t1="$(date +%s.%N)"
    vals="$(sim_extract "$rep" || echo "- - - - -")"
    read -r makespan usage large medium small <<<"$vals"
    echo "| $cfg | $(fmt 1 "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')") | $(fmt 1 "$makespan") | $(fmt 1 "$usage") | $(fmt 1 "$large") / $(fmt 1 "$medium") / $(fmt 1 "$small") |" >>"$out"
    if [[ "$cfg" == baseline ]]; then
      target "$out" "simulate baseline: makespan < 80 s" "$(fmt 1 "$makespan") s" "$(verdict "$makespan" '<' 80)"
      target "$out" "simulate baseline: usage > 90 %" "$(fmt 1 "$usage") %" "$(verdict "$usage" '>' 90)"
      target "$out" "simulate baseline: mean time to admission large <= 4.125 s" "$(fmt 2 "$large") s" "$(verdict "$large" '<=' 4.125)"
      target "$out" "simulate baseline: mean time to admission medium <= 19.2 s" "$(fmt 2 "$medium") s" "$(verdict "$medium" '<=' 19.2)"
      target "$out" "simulate baseline: mean time to admission small <= 53.875 s" "$(fmt 2 "$small") s" "$(verdict "$small" '<=' 53.875)"
    fi
  done
}

# Real time, end to end: gangkeeper_e2e_bench (test/bench/e2e_bench.cc,
# issues #11 and #26), twice: Kueue's baseline shape (E2E_ARGS) and its
# large-scale shape (E2E_LARGE_ARGS). Each run's stdout (markdown) goes into
# RESULTS.md as it is; the targets come from its --json report, read in
# e2e_extract.

# e2e_extract REPORT.json: "makespan_s release_p99_ms scale cores" ("-" where absent).
# Adapt here when the report's format changes.
e2e_extract() {
  jq -r 'def num: if . == null then "-" else tostring end;
    [(.makespan_s | num), (.release_latency_ms.p99 | num), ((.scale // 1) | tostring),
     (.gangkeeper_cores | num)] | join(" ")' "$1"
}

# e2e_run NAME ARGS...: one run of the bench into $WORK/raw/e2e-NAME.{json,txt,err}
# and its text onto section file $out; false when it failed.
e2e_run() {
  local name=$1 bin="$BENCH_BIN/gangkeeper_e2e_bench" shown
  shift
  shown="$*"
  shown="${shown//$REPO\//}"  # paths as in the repository, not this machine's
  log "running gangkeeper_e2e_bench --json ... $shown"
  if ! TMPDIR="$WORK/tmp" timeout 3600 "$bin" --json "$WORK/raw/e2e-$name.json" "$@" \
    >"$WORK/raw/e2e-$name.txt" 2>"$WORK/raw/e2e-$name.err"; then
    {
      echo "\`gangkeeper_e2e_bench $shown\` failed or timed out; the end of its output:"
      echo
      echo '```'
      tail -n 20 "$WORK/raw/e2e-$name.txt" "$WORK/raw/e2e-$name.err"
      echo '```'
      echo
    } >>"$out"
    return 1
  fi
  # Its headings go one level down, under this section's.
  { echo "\`gangkeeper_e2e_bench $shown\`:"; echo; sed 's/^#/##/' "$WORK/raw/e2e-$name.txt"; } >>"$out"
}

section_e2e() {
  local out="$WORK/sections/e2e.md" ms p99 scale cores note
  {
    echo "## Real time, end to end"
    echo
    stamp
  } >"$out"
  if [[ ! -x "$BENCH_BIN/gangkeeper_e2e_bench" ]]; then
    echo "not built yet (\`gangkeeper_e2e_bench\` is not in this build${E2E_BUILD_NOTE:+: $E2E_BUILD_NOTE})." >>"$out"
    return 0
  fi
  # Kueue's baseline shape: 15,000 workloads, 30 ClusterQueues.
  # shellcheck disable=SC2086  # E2E_ARGS: the program's own arguments
  if e2e_run baseline $E2E_ARGS; then
    read -r ms p99 scale cores <<<"$(e2e_extract "$WORK/raw/e2e-baseline.json" 2>/dev/null || echo "- - 1 -")"
    # The targets are for the whole trace; a scaled-down run only shows the machinery works.
    note=""
    [[ "$scale" == 1 ]] || note=" (trace scaled to $scale)"
    local makespan_verdict="n/a (scaled)" cores_verdict="n/a (scaled)"
    if [[ -z "$note" ]]; then
      makespan_verdict="$(verdict "$ms" '<' 85)"
      cores_verdict="$(verdict "$cores" '<' 0.5)"
    fi
    target "$out" "end to end, baseline: makespan < 85 s$note" "$(fmt 1 "$ms") s" "$makespan_verdict"
    target "$out" "end to end, baseline: release latency p99 < 50 ms$note" "$(fmt 1 "$p99") ms" "$(verdict "$p99" '<' 50)"
    target "$out" "end to end, baseline: gangkeeper CPU < 0.5 core$note" "$(fmt 2 "$cores") cores" "$cores_verdict"
  fi
  # Kueue's large-scale shape: 50,000 workloads, 1,000 ClusterQueues. Its
  # makespan is reported against 300 s at whatever scale E2E_LARGE_ARGS sets.
  # shellcheck disable=SC2086  # E2E_LARGE_ARGS: the program's own arguments
  if e2e_run large-scale --trace "$BENCH_SRC/kueue/large-scale/generator.yaml" $E2E_LARGE_ARGS; then
    read -r ms p99 scale cores <<<"$(e2e_extract "$WORK/raw/e2e-large-scale.json" 2>/dev/null || echo "- - 1 -")"
    note=""
    [[ "$scale" == 1 ]] || note=" (trace scaled to $scale)"
    target "$out" "end to end, large-scale: makespan < 300 s$note" "$(fmt 1 "$ms") s, $(fmt 2 "$cores") cores" \
      "$(verdict "$ms" '<' 300)"
  fi
}

# ================================================================ RESULTS.md

section_title() {
  case "$1" in
    webhook) echo "Webhook throughput and latency" ;; micro) echo "Micro-benchmarks" ;;
    scheduling) echo "Scheduling quality" ;; e2e) echo "Real time, end to end" ;;
  esac
}

# old_section NAME: that section's text from the existing RESULTS.md.
old_section() {
  [[ -f "$RESULTS" ]] || return 0
  awk -v s="<!-- section:$1 -->" -v e="<!-- /section:$1 -->" '
    $0 == e { on = 0 } on { print } $0 == s { on = 1 }' "$RESULTS"
}

write_results() {
  local tmp="$WORK/RESULTS.md" s body kept=()
  for s in "${ALL_SECTIONS[@]}"; do
    if selected "$s"; then
      [[ ! -f "$WORK/sections/$s.targets" ]] || cat "$WORK/sections/$s.targets" >>"$WORK/sections/$s.md"
    else
      body="$(old_section "$s")"
      if [[ -n "$body" ]]; then
        printf '%s\n' "$body" >"$WORK/sections/$s.md"
        kept+=("$s")
      else
        printf '## %s\n\nnot run yet (%s).\n' "$(section_title "$s")" "\`test/bench/run.sh $s\`" >"$WORK/sections/$s.md"
      fi
    fi
  done
  {
    echo "# gangkeeper benchmark results"
    echo
    [[ -z "$NOTE" ]] || { echo "> **$NOTE**"; echo; }
    if [[ "$QUICK" == 1 ]]; then
      echo "> **Smoke run (\`--quick\`): ${DURATION} s per load point, one round. Not the figures of record.**"
      echo
    fi
    echo "Written by \`test/bench/run.sh ${ARGS_GIVEN}\` on $(date -u '+%Y-%m-%d %H:%M UTC'), $(source_line)."
    if [[ ${#kept[@]} -gt 0 ]]; then
      echo "Sections kept from an earlier run (see their own date line): ${kept[*]}."
    fi
    echo
    echo "## Machine"
    echo
    machine_table
    echo
    echo "## Targets"
    echo
    echo "| target | measured | verdict |"
    echo "|---|---:|---|"
    for s in "${ALL_SECTIONS[@]}"; do
      sed -n 's/^<!-- target|\(.*\)|\(.*\)|\(.*\) -->$/| \1 | \2 | \3 |/p' "$WORK/sections/$s.md"
    done
    for s in "${ALL_SECTIONS[@]}"; do
      echo
      echo "<!-- section:$s -->"
      cat "$WORK/sections/$s.md"
      echo "<!-- /section:$s -->"
    done
  } >"$tmp"
  mv "$tmp" "$RESULTS"
  log "wrote $RESULTS"
}

# ================================================================ main

main() {
  log "sections: ${SECTIONS[*]}; scratch: $WORK"
  install_deps
  build
  local s
  for s in "${ALL_SECTIONS[@]}"; do
    if selected "$s"; then
      log "=== $s"
      "section_$s"
    fi
  done
  write_results
}

main
