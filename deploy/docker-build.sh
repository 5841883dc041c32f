#!/usr/bin/env bash
# The container image's install and build steps, kept in one place:
# deploy/Dockerfile runs them, and deploy/build-check.sh runs the same ones
# in a clean copy of the tree (there is no Docker engine in CI).
#
# Usage (from anywhere; paths are found from this script's location):
#   deploy/docker-build.sh build-deps            the build packages: scripts/deps.sh build
#   deploy/docker-build.sh build OUT_DIR         configure and build only the gangkeeper binary
#                                                (no tests), copy it without debug info to OUT_DIR/gangkeeper
#   deploy/docker-build.sh check-runtime BINARY  every shared library BINARY needs comes from a package
#                                                of runtime-packages.txt, and every package there is needed
#   deploy/docker-build.sh runtime-deps          install runtime-packages.txt (the runtime image)
# Environment: JOBS (build parallelism, default: all CPUs), BUILD_DIR
# (default: build/image in the tree).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
packages_file="$here/runtime-packages.txt"

die() {
  echo "docker-build: $*" >&2
  exit 1
}

# The package names of runtime-packages.txt, one per line (comments and
# blank lines dropped).
runtime_packages() {
  sed -e 's/#.*//' -e 's/[[:space:]]//g' "$packages_file" | grep -v '^$'
}

# The package that installed shared library $1 (a path from ldd). Debian 12
# is usr-merged: dpkg may know a file as /lib/... or as /usr/lib/...
package_of() {
  local lib="$1" real candidate owner
  real="$(readlink -f "$lib")"
  for candidate in "$real" "$lib" "${real#/usr}" "/usr$lib"; do
    if owner="$(dpkg -S "$candidate" 2>/dev/null)"; then
      # "libssl3:amd64: /usr/lib/...": the package, without the architecture.
      owner="${owner%%: *}"
      echo "${owner%%:*}"
      return 0
    fi
  done
  return 1
}

cmd="${1:-}"
case "$cmd" in
  build-deps)
    # Exactly the packages the README installs for building.
    "$root/scripts/deps.sh" build
    ;;

  build)
    out="${2:?usage: docker-build.sh build OUT_DIR}"
    build_dir="${BUILD_DIR:-$root/build/image}"
    jobs="${JOBS:-$(nproc)}"
    # The optimisation of ./run.sh without debug info (the image would strip
    # it anyway, and it is a quarter of the compile time); tests and
    # benchmarks are not built.
    cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
      -DGK_BUILD_TESTS=OFF -DGK_BUILD_BENCH=OFF
    cmake --build "$build_dir" --target gangkeeper -j "$jobs"
    mkdir -p "$out"
    # Debug info is most of the binary's size; the image does not need it.
    strip --strip-debug -o "$out/gangkeeper" "$build_dir/src/cli/gangkeeper"
    "$out/gangkeeper" version
    ;;

  check-runtime)
    binary="${2:?usage: docker-build.sh check-runtime BINARY}"
    [[ -x "$binary" ]] || die "$binary is not an executable"
    ldd_out="$(ldd "$binary")" || die "ldd $binary failed"
    if grep -q 'not found' <<<"$ldd_out"; then
      die "$binary needs libraries that are not installed: $(grep 'not found' <<<"$ldd_out")"
    fi
    needed=()
    # Lines look like "libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x...)"
    # or "/lib64/ld-linux-x86-64.so.2 (0x...)"; linux-vdso has no file.
    while read -r lib; do
      pkg="$(package_of "$lib")" || die "no Debian package owns $lib"
      needed+=("$pkg")
    done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$ldd_out")
    want="$(printf '%s\n' "${needed[@]}" | sort -u)"
    have="$(runtime_packages | sort -u)"
    if [[ "$want" != "$have" ]]; then
      echo "docker-build: $packages_file does not match what $binary links:" >&2
      diff <(echo "$have") <(echo "$want") | sed -n 's/^</  listed but not needed:/p; s/^>/  needed but not listed:/p' >&2
      exit 1
    fi
    echo "docker-build: runtime packages match $binary: $(echo "$have" | tr '\n' ' ')"
    ;;

  runtime-deps)
    mapfile -t pkgs < <(runtime_packages)
    [[ ${#pkgs[@]} -gt 0 ]] || die "no packages in $packages_file"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
    rm -rf /var/lib/apt/lists/*
    ;;

  *)
    echo "usage: docker-build.sh build-deps | build OUT_DIR | check-runtime BINARY | runtime-deps" >&2
    exit 2
    ;;
esac
