#!/usr/bin/env bash
# Installs the Debian 12 packages gangkeeper builds and tests with, if any
# is missing. Needs root (or sudo) only when something must be installed.
# Usage: scripts/deps.sh [build|test|browser]
#   test adds the tools the tests run; browser is Chromium alone (the
#   simulate report's rendering test), which test.sh installs in the
#   background while the first build compiles.
set -euo pipefail

build_pkgs=(
  g++ cmake ninja-build pkg-config make
  libcpp-httplib-dev libssl-dev openssl libboost-dev
  libjemalloc-dev  # the gangkeeper binary's allocator (src/cli/CMakeLists.txt)
  nlohmann-json3-dev rapidjson-dev libabsl-dev libspdlog-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev  # test/sim's browser test decodes Chromium's PNG
  curl ca-certificates
)
test_pkgs=(
  testssl.sh etcd-server
  prometheus  # /usr/bin/prometheus and promtool for test/monitoring
)
browser_pkgs=(
  chromium    # headless, renders simulate's HTML report in test/sim (ctest -L browser)
)

case "${1:-build}" in
  build) want=("${build_pkgs[@]}") ;;
  test) want=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
  browser) want=("${browser_pkgs[@]}") ;;
  *) echo "deps.sh: unknown set '$1' (build, test, browser)" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# The tests check patches with kubectl (patch --local); Debian ships it as
# kubernetes-client. Any kubectl already on the PATH will do.
if [[ "${1:-build}" == "test" ]] && ! command -v kubectl >/dev/null 2>&1; then
  missing+=(kubernetes-client)
fi
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [[ "$(id -u)" -ne 0 ]]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
