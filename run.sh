#!/usr/bin/env bash
# The main job: install what is missing, build, and run gangkeeper in the
# foreground with development certificates (made in certs/dev/ if missing),
# the example policies and a development admin token (made in data/ if
# missing: data/dev-token, checked against data/dev-tokens.yaml). It prints
# the token and a `gangkeeper get clusterqueues` line to try from another
# terminal. Extra arguments go to `gangkeeper serve` (a later --tokens
# replaces the development one).
#
# GANGKEEPER_BIN=PATH uses that gangkeeper binary (built from this tree)
# instead: no packages are installed and nothing is built, and the printed
# command lines name PATH (the quick-start test runs a fresh copy this way).
set -euo pipefail
cd "$(dirname "$0")"
if [[ -n "${GANGKEEPER_BIN:-}" ]]; then
  gangkeeper="$GANGKEEPER_BIN"
  [[ -x "$gangkeeper" ]] || { echo "run.sh: GANGKEEPER_BIN=$gangkeeper is not an executable" >&2; exit 1; }
else
  scripts/deps.sh build
  cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build/release --target gangkeeper -j "$(nproc)"
  gangkeeper=build/release/src/cli/gangkeeper
fi
scripts/dev-token.sh data "$gangkeeper"
exec "$gangkeeper" serve --dev --policies policies/ --tokens data/dev-tokens.yaml "$@"
