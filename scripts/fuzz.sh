#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz) with clang 14 in build/fuzz and
# runs each for SECONDS (default 300), seeded from the fixtures.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: build/fuzz/fuzz_targets.txt)
# Per target: corpus in build/fuzz/corpus/<target> (grown across runs), crash,
# leak and timeout inputs in build/fuzz/crashes/<target>/, log in
# build/fuzz/logs/<target>.log. Exits 1 if any target failed, 2 on usage
# errors. Every step is bounded in time; FUZZ_JOBS sets the build's -j
# (default 1: the CI machines have 2 cores), FUZZ_MAX_LEN the largest input
# libFuzzer generates (default 16384 bytes).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-300}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
  exit 2
fi
shift $(( $# > 0 ? 1 : 0 ))
build=build/fuzz
jobs="${FUZZ_JOBS:-1}"

# clang 14 and its runtimes (libFuzzer, ASan, UBSan) on top of the usual deps.
scripts/deps.sh build
missing=()
for p in clang-14 libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "fuzz: installing ${missing[*]}" >&2
  SUDO=""
  [[ "$(id -u)" -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 $SUDO apt-get update -qq
  timeout 1200 $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "== fuzz: build ($build, clang-14, -j$jobs)"
timeout 600 cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGK_BUILD_TESTS=OFF -DGANGKEEPER_FUZZ=ON >/dev/null
timeout 7200 cmake --build "$build" --target gangkeeper_fuzz -j "$jobs"

# "name seed-set" per line, written by test/fuzz/CMakeLists.txt.
declare -A seed_set=()
while read -r name set; do
  [[ -n "$name" ]] && seed_set["$name"]="$set"
done <"$build/fuzz_targets.txt"
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(cut -d' ' -f1 "$build/fuzz_targets.txt")
fi
for t in "${targets[@]}"; do
  if [[ -z "${seed_set[$t]:-}" ]]; then
    echo "fuzz: unknown target '$t' (known: ${!seed_set[*]})" >&2
    exit 2
  fi
done

failed=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  crashes="$build/crashes/$t"
  log="$build/logs/$t.log"
  mkdir -p "$corpus" "$crashes" "$build/logs"
  timeout 120 "$build/test/fuzz/gangkeeper_fuzz_seed_tool" "${seed_set[$t]}" "$PWD" "$corpus"
  # -max_len: above every seed, and fixed, so that a large regression input
  # (replayed below) does not make every generated input that large.
  args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len="${FUZZ_MAX_LEN:-16384}"
        -print_final_stats=1 -artifact_prefix="$crashes/")
  [[ -f "test/fuzz/dicts/$t.dict" ]] && args+=(-dict="test/fuzz/dicts/$t.dict")
  # Known crashers are replayed as extra (read-only) corpus.
  extra=()
  [[ -d "test/fuzz/regressions/$t" ]] && extra+=("test/fuzz/regressions/$t")
  stamp="$build/logs/$t.start"
  touch "$stamp"
  echo "== fuzz: $t for ${seconds}s (corpus $corpus, crashes $crashes, log $log)"
  rc=0
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
    timeout --kill-after=30 $(( seconds + 300 )) \
    "$build/test/fuzz/gangkeeper_fuzz_$t" "${args[@]}" "$corpus" "${extra[@]}" >"$log" 2>&1 || rc=$?
  grep -E '^#[0-9]+[[:space:]]+DONE' "$log" || true
  grep -E '^stat::(average_exec_per_sec|peak_rss_mb)' "$log" || true
  new=$(find "$crashes" -type f -newer "$stamp")
  if [[ $rc -ne 0 || -n "$new" ]]; then
    echo "fuzz: $t FAILED (exit $rc); new inputs:" >&2
    echo "${new:-  (none written)}" >&2
    failed+=("$t")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ok (${targets[*]}), ${seconds}s each"
