#!/usr/bin/env bash
# The main job: install what is missing, build, and run gangkeeper in the
# foreground with development certificates (made in certs/dev/ if missing),
# the example policies and a development admin token (made in data/ if
# missing: data/dev-token, checked against data/dev-tokens.yaml). It prints
# the token and a `gangkeeper get clusterqueues` line to try from another
# terminal. Extra arguments go to `gangkeeper serve` (a later --tokens
# replaces the development one).
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh build
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/release --target gangkeeper -j "$(nproc)"
scripts/dev-token.sh data build/release/src/cli/gangkeeper
exec build/release/src/cli/gangkeeper serve --dev --policies policies/ --tokens data/dev-tokens.yaml "$@"
