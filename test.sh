#!/usr/bin/env bash
# Runs every test: installs what is missing, checks the layering rules,
# then builds and runs the whole suite twice, as an optimised build and as
# a Debug build with AddressSanitizer and UndefinedBehaviorSanitizer.
# TEST_BUILDS="release" (or "asan") runs one of the two. With both, the
# sanitizer build compiles (at the lowest priority) while the release
# tests run; GK_OVERLAP=0 runs everything one after the other.
set -euo pipefail
cd "$(dirname "$0")"
phase_start=$SECONDS
phase() {  # prints how long the previous phase took, then the next one's name
  echo "== ($(( SECONDS - phase_start )) s) $1"
  phase_start=$SECONDS
}
phase "deps"
scripts/deps.sh test
scripts/check-layering.sh
scripts/check-size.sh --strict

jobs="$(nproc)"
builds="${TEST_BUILDS:-release asan}"
unity=(-DCMAKE_UNITY_BUILD="${GK_UNITY:-ON}" -DCMAKE_UNITY_BUILD_BATCH_SIZE=8)
settings() {  # settings BUILD: sets `flags` (cmake) and `skip` (tests that build does not run)
  case "$1" in
    release) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"); skip=() ;;
    asan)    flags=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g1" -DGK_SANITIZE=ON)
             skip=(-LE "tls-scan|scale" -E "^CrashTest\.EveryAcknowledgedChangeSurvivesTwentyKills$") ;;
    *) echo "test.sh: unknown build '$1' (release, asan)" >&2; exit 2 ;;
  esac
}
configure() {  # configure BUILD
  settings "$1"
  cmake -S . -B "build/$1" -G Ninja -DGK_BUILD_TESTS=ON "${unity[@]}" "${flags[@]}" >/dev/null
}
run_tests() {  # run_tests BUILD: its ctest, then its slowest tests
  settings "$1"
  phase "test: $1"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "build/$1" -j "$jobs" --output-on-failure --no-tests=error --timeout 300 "${skip[@]}" \
    | tee "build/$1/ctest.log"
  echo "slowest tests ($1):"
  grep -E '^ *[0-9]+/[0-9]+ Test +#' "build/$1/ctest.log" | sed -E 's/.* (Test +#[0-9]+: [^ ]+) .* ([0-9.]+) sec$/\2 \1/' \
    | sort -rn | head -15 | sed 's/^/  /' || true
}
for b in $builds; do settings "$b"; done  # an unknown name fails before anything is built

# Both builds: the release tests spend much of their time waiting (on
# child processes, etcd, sockets), so the sanitizer build compiles beside
# them at the lowest CPU priority: the tests keep the cores they ask for,
# the compiler takes what they leave (GK_OVERLAP=0: one after the other).
if [[ "$builds" == "release asan" && "${GK_OVERLAP:-1}" == 1 ]]; then
  phase "build: release"
  configure release
  cmake --build build/release -j "$jobs"
  configure asan
  # Its own process group, so that a failing release run stops all of it.
  setsid nice -n 19 cmake --build build/asan -j "$jobs" > build/asan/overlapped-build.log 2>&1 &
  asan_build=$!
  trap 'kill -- "-$asan_build" 2>/dev/null || true' EXIT
  run_tests release
  phase "build: asan (the rest of it; it started with the release tests)"
  rc=0
  wait "$asan_build" || rc=$?
  trap - EXIT
  cat build/asan/overlapped-build.log
  [[ $rc -eq 0 ]] || { echo "test.sh: the asan build failed (exit $rc)" >&2; exit "$rc"; }
  run_tests asan
else
  for b in $builds; do
    phase "build: $b"
    configure "$b"
    cmake --build "build/$b" -j "$jobs"
    run_tests "$b"
  done
fi
phase "done"
