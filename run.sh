#!/usr/bin/env bash
# The main job: install what is missing, build, and run gangkeeper in the
# foreground with development certificates (made in certs/dev/ if missing)
# and the example policies. Extra arguments go to `gangkeeper serve`.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh build
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/release --target gangkeeper -j "$(nproc)"
exec build/release/src/cli/gangkeeper serve --dev --policies policies/ "$@"
