#!/usr/bin/env bash
# Checks the container image's recipe without a Docker engine.
#
# 1. Copies the source tree (tracked files plus new ones git does not
#    ignore; never build/, data/ or certificates) into a clean temp dir.
# 2. Runs there the steps deploy/Dockerfile runs, through the same script:
#    docker-build.sh build-deps, build, check-runtime.
# 3. Starts the built binary on loopback the way deploy/common/deployment.yaml
#    runs it: certificates from `gangkeeper certs`, the example policies in
#    a ConfigMap volume's layout (read through ..data), a tokens file, a
#    fresh data dir; --kube=none, so nothing is sent anywhere.
# 4. Checks /healthz and /readyz on both listeners over verified TLS (with
#    the Service's DNS name, as the API server connects), sends the seed's
#    two-worker Job (deploy/examples/review-team-a-two-gpu-training.json) to
#    /mutate and /validate with curl, reads the workload back with
#    `gangkeeper describe workload`, then SIGTERMs the server and expects
#    exit 0.
# Every step has a time limit; only 127.0.0.1 is used. Exit 0 when all pass.
#
# Usage: deploy/build-check.sh
#   JOBS=N   build parallelism (default: all CPUs)
#   PREBUILT=PATH  use this gangkeeper binary (built from the same tree)
#            instead of compiling one (step 2's build); the test suite
#            passes its own optimised build
#   KEEP=1   keep the temp dir (its path is printed) for a look afterwards
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/gangkeeper-build-check.XXXXXX")"
server_pid=""
started_at=$SECONDS

cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [[ "${KEEP:-0}" == "1" ]]; then
    echo "build-check: kept $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

step() { echo "== build-check [$((SECONDS - started_at))s]: $*"; }
fail() {
  echo "build-check: FAILED: $*" >&2
  if [[ -f "$work/run/stderr" ]]; then
    echo "--- gangkeeper stderr (last 30 lines)" >&2
    tail -n 30 "$work/run/stderr" >&2
  fi
  exit 1
}

# --- 1. A clean copy of the tree ---------------------------------------------
step "copying the source tree to $work/src"
mkdir -p "$work/src"
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked and new, not ignored files; skip tracked files deleted in the
  # working tree (ls-files still lists them).
  git -C "$root" ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do
      if [[ -e "$root/$f" || -L "$root/$f" ]]; then printf '%s\0' "$f"; fi
    done |
    sort -zu |
    tar -C "$root" --null -T - -cf - | tar -C "$work/src" -xf -
else
  tar -C "$root" --exclude=./build --exclude=./data --exclude=./certs/dev --exclude=./certs/cluster \
    --exclude=./deploy/overlays/self-managed/tls -cf - . | tar -C "$work/src" -xf -
fi
for unwanted in build data certs/dev; do
  [[ ! -e "$work/src/$unwanted" ]] || fail "the copy holds $unwanted/"
done
src="$work/src"

# --- 2. The Dockerfile's steps -------------------------------------------------
step "docker-build.sh build-deps"
timeout 1200 "$src/deploy/docker-build.sh" build-deps || fail "build-deps"
if [[ -n "${PREBUILT:-}" ]]; then
  # The test suite's own optimised build of the same sources (ctest sets
  # this): compiling every source again here would only repeat it. Stripped
  # as docker-build.sh strips the image's binary.
  step "prebuilt $PREBUILT (the compile step: docker-build.sh build without PREBUILT)"
  [[ -x "$PREBUILT" ]] || fail "PREBUILT=$PREBUILT is not an executable"
  mkdir -p "$work/out"
  strip --strip-debug -o "$work/out/gangkeeper" "$PREBUILT" || fail "strip $PREBUILT"
  "$work/out/gangkeeper" version || fail "$PREBUILT version"
else
  step "docker-build.sh build (JOBS=${JOBS:-$(nproc)})"
  BUILD_DIR="$src/build/image" timeout 3600 "$src/deploy/docker-build.sh" build "$work/out" || fail "build"
fi
step "docker-build.sh check-runtime"
timeout 120 "$src/deploy/docker-build.sh" check-runtime "$work/out/gangkeeper" || fail "check-runtime"
gk="$work/out/gangkeeper"

# --- 3. Start it the way the Deployment does ----------------------------------
run="$work/run"
mkdir -p "$run"
step "certificates, policies, tokens"
timeout 60 "$gk" certs --out "$run/certs" --service gangkeeper --namespace gangkeeper-system \
  >"$run/ca-bundle" 2>/dev/null || fail "gangkeeper certs"
[[ "$(tr -d '\n' <"$run/ca-bundle")" == "$(base64 -w0 <"$run/certs/ca.crt")" ]] ||
  fail "gangkeeper certs did not print the base64 of ca.crt"

# A ConfigMap volume: the files in a timestamped directory, ..data pointing
# at it, and a symlink per file. The Deployment reads --policies from ..data.
stamp="..2025_01_01_00_00_00.000000001"
mkdir -p "$run/policies/$stamp"
cp "$src"/policies/*.yaml "$run/policies/$stamp/"
ln -s "$stamp" "$run/policies/..data"
for f in "$run/policies/$stamp"/*.yaml; do
  ln -s "..data/$(basename "$f")" "$run/policies/$(basename "$f")"
done

token="$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
mkdir -p "$run/tokens"
printf -- '- name: build-check\n  sha256: %s\n  role: admin\n' \
  "$(printf %s "$token" | sha256sum | cut -d' ' -f1)" >"$run/tokens/tokens.yaml"

step "gangkeeper serve on 127.0.0.1"
(
  cd "$run"
  exec "$gk" serve --webhook-addr=127.0.0.1:0 --api-addr=127.0.0.1:0 \
    --tls-cert=certs/tls.crt --tls-key=certs/tls.key \
    --policies=policies/..data --tokens=tokens/tokens.yaml --data-dir=data \
    --kube=none --log-format=json --drain-delay=1s --shutdown-grace=10s \
    >stdout 2>stderr </dev/null
) &
server_pid=$!

# The banner names the two ports (port 0 picked free ones).
webhook_port="" api_port=""
for _ in $(seq 1 300); do
  kill -0 "$server_pid" 2>/dev/null || fail "gangkeeper serve exited at start"
  webhook_port="$(sed -n 's|^  webhook: https://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$run/stdout")"
  api_port="$(sed -n 's|^  api: *https://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$run/stdout")"
  [[ -n "$webhook_port" && -n "$api_port" ]] && break
  sleep 0.1
done
[[ -n "$webhook_port" && -n "$api_port" ]] || fail "no banner with the listener ports within 30 s"
echo "   webhook :$webhook_port, api :$api_port"

# --- 4. What the API server and a platform engineer would do -------------------
svc="gangkeeper.gangkeeper-system.svc"
# HTTPS to 127.0.0.1:PORT under the Service's DNS name, verified against the
# CA, with a bearer token when one is given. Writes the body to $run/body;
# prints the HTTP status.
call() {
  local method="$1" port="$2" path="$3" data="${4:-}" bearer="${5:-}"
  local args=(-sS --max-time 5 --cacert "$run/certs/ca.crt" --resolve "$svc:$port:127.0.0.1"
    -o "$run/body" -w '%{http_code}' -X "$method")
  if [[ -n "$data" ]]; then
    args+=(-H 'Content-Type: application/json' --data-binary "@$data")
  fi
  if [[ -n "$bearer" ]]; then
    args+=(-H "Authorization: Bearer $bearer")
  fi
  curl "${args[@]}" "https://$svc:$port$path" || echo "000"
}

step "/healthz and /readyz over TLS"
for port in "$webhook_port" "$api_port"; do
  [[ "$(call GET "$port" /healthz)" == 200 ]] || fail "/healthz on :$port: $(cat "$run/body")"
  ready=""
  for _ in $(seq 1 100); do
    if [[ "$(call GET "$port" /readyz)" == 200 ]]; then ready=1; break; fi
    sleep 0.1
  done
  [[ -n "$ready" ]] || fail "/readyz on :$port not 200 within 10 s: $(cat "$run/body")"
done

review="$src/deploy/examples/review-team-a-two-gpu-training.json"
uid='"uid":"0b1e9a52-3c4d-4e5f-8a6b-7c8d9e0f1a2b"'

step "POST /mutate (the seed's two-worker Job)"
# The seed's Job comes suspended already: allowed, nothing to patch.
[[ "$(call POST "$webhook_port" /mutate "$review")" == 200 ]] || fail "/mutate: $(cat "$run/body")"
body="$(tr -d ' \n' <"$run/body")"
[[ "$body" == *'"kind":"AdmissionReview"'* && "$body" == *"$uid"* ]] || fail "/mutate answer: $body"
[[ "$body" == *'"allowed":true'* ]] || fail "/mutate did not allow the Job: $body"
[[ "$body" != *'"patch"'* ]] || fail "/mutate patched a Job that is suspended already: $body"
# The same Job created unsuspended is suspended by a JSON patch.
sed 's/"suspend": true/"suspend": false/' "$review" >"$run/review-unsuspended.json"
grep -q '"suspend": false' "$run/review-unsuspended.json" || fail "could not unsuspend the example review"
[[ "$(call POST "$webhook_port" /mutate "$run/review-unsuspended.json")" == 200 ]] || fail "/mutate: $(cat "$run/body")"
body="$(tr -d ' \n' <"$run/body")"
[[ "$body" == *'"allowed":true'* && "$body" == *'"patchType":"JSONPatch"'* ]] || fail "/mutate sent no patch: $body"
patch="$(sed -n 's/.*"patch":"\([^"]*\)".*/\1/p' <<<"$body" | base64 -d)"
[[ "$patch" == *'"path":"/spec/suspend","value":true'* ]] || fail "/mutate's patch does not suspend the Job: $patch"
echo "   patch for the unsuspended Job: $patch"

step "POST /validate"
[[ "$(call POST "$webhook_port" /validate "$review")" == 200 ]] || fail "/validate: $(cat "$run/body")"
body="$(cat "$run/body")"
[[ "$(tr -d ' \n' <<<"$body")" == *'"allowed":true'* ]] || fail "/validate did not allow the Job: $body"
[[ "$body" == *"LocalQueue gpu-queue"* ]] || fail "/validate's warnings do not name the queue: $body"

step "gangkeeper describe workload team-a/team-a-two-gpu-training"
timeout 30 "$gk" describe workload team-a/team-a-two-gpu-training --server "https://127.0.0.1:$api_port" \
  --ca "$run/certs/ca.crt" --token "$token" >"$run/describe" 2>&1 || fail "describe: $(cat "$run/describe")"
grep -q 'team-a-two-gpu-training' "$run/describe" || fail "describe does not show the Job: $(cat "$run/describe")"
grep -q 'team-a-gpu' "$run/describe" || fail "describe does not name the ClusterQueue: $(cat "$run/describe")"
sed 's/^/   /' "$run/describe"

step "GET /metrics (with the token; without one it is 401)"
[[ "$(call GET "$api_port" /metrics)" == 401 ]] || fail "/metrics without a token: $(cat "$run/body")"
[[ "$(call GET "$api_port" /metrics "" "$token")" == 200 ]] || fail "/metrics: $(cat "$run/body")"
grep -q '^gangkeeper_webhook_reviews_total{' "$run/body" || fail "/metrics has no gangkeeper_webhook_reviews_total"

step "SIGTERM"
kill -TERM "$server_pid"
for _ in $(seq 1 300); do
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$server_pid" 2>/dev/null && fail "still running 30 s after SIGTERM (--shutdown-grace=10s)"
code=0
wait "$server_pid" || code=$?
server_pid=""
[[ "$code" == 0 ]] || fail "exit code $code after SIGTERM"
grep -q 'stopped cleanly' "$run/stderr" || fail "no 'stopped cleanly' in the log"

step "passed"
