#!/usr/bin/env bash
# Proves scripts/check-layering.sh catches what it claims to: run on a copy of
# src/, include/ and scripts/ it passes; a forbidden arrow (model -> api) or
# another module's private header planted in the copy makes it exit 1 and
# name the arrow and the file:line; dropping a tolerated exception from the
# table makes today's code fail on that arrow.
# Usage: layering_test.sh SOURCE_DIR
set -euo pipefail
src="$(cd "${1:?usage: layering_test.sh SOURCE_DIR}" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$src/src" "$src/include" "$src/scripts" "$tmp/"
failures=0
out=""
rc=0

# check [ROOT-ARG...]: runs the checker (bounded), sets $out and $rc.
check() {
  rc=0
  out="$(timeout 60 "$@" 2>&1)" || rc=$?
}
expect() {  # expect NAME WANT_RC [TEXT...]: the last run exited WANT_RC and printed each TEXT
  local name="$1" want="$2"; shift 2
  local ok=1
  [[ "$rc" == "$want" ]] || { echo "FAIL $name: exit $rc, want $want"; ok=0; }
  for text in "$@"; do
    grep -qF -- "$text" <<< "$out" || { echo "FAIL $name: output lacks '$text'"; ok=0; }
  done
  if [[ $ok == 1 ]]; then echo "ok   $name"; else echo "$out" | sed 's/^/     | /'; failures=$((failures + 1)); fi
}

# (a) the copy as it is: clean, with the debts counted. Once with the root
# argument, once with the default root (the copy's own scripts/..).
check "$src/scripts/check-layering.sh" "$tmp"
expect "clean tree (root argument)" 0 "layering: ok" "tolerated exceptions"
check "$tmp/scripts/check-layering.sh"
expect "clean tree (default root)" 0 "layering: ok"

# (b) model -> api: model sits below api, DESIGN §3 has no such arrow.
victim=src/model/encode.cc
cp "$tmp/$victim" "$tmp/saved"
echo '#include "gangkeeper/api/api.h"' >> "$tmp/$victim"
line=$(wc -l < "$tmp/$victim")
check "$src/scripts/check-layering.sh" "$tmp"
expect "model includes api" 1 "model -> api" "$victim:$line:"
mv "$tmp/saved" "$tmp/$victim"

# (c) another module's private header, in a .cc and in a public header.
victim=src/admission/mutate.cc
cp "$tmp/$victim" "$tmp/saved"
echo '#include "src/broker/resource_tree.h"' >> "$tmp/$victim"
line=$(wc -l < "$tmp/$victim")
check "$src/scripts/check-layering.sh" "$tmp"
expect "private header of another module" 1 "admission -> broker through a private header" "$victim:$line:"
mv "$tmp/saved" "$tmp/$victim"
victim=include/gangkeeper/model/objects.h
cp "$tmp/$victim" "$tmp/saved"
echo '#include "src/model/reader.h"' >> "$tmp/$victim"
line=$(wc -l < "$tmp/$victim")
check "$src/scripts/check-layering.sh" "$tmp"
expect "public header includes a private one" 1 "public header includes a private header" "$victim:$line:"
mv "$tmp/saved" "$tmp/$victim"

# (d) a tolerated exception is what lets today's api -> server through.
cp "$tmp/scripts/layering.txt" "$tmp/saved"
grep -v '^exception api -> server ' "$tmp/saved" > "$tmp/scripts/layering.txt"
check "$src/scripts/check-layering.sh" "$tmp"
expect "without its exception, api -> server fails" 1 "api -> server is not an allowed arrow" "include/gangkeeper/api/api.h:"
mv "$tmp/saved" "$tmp/scripts/layering.txt"

# (e) a new module needs a row; an exception needs an issue and a reason.
mkdir "$tmp/src/newmod"
check "$src/scripts/check-layering.sh" "$tmp"
expect "a module without a row" 1 "module newmod has no row"
rmdir "$tmp/src/newmod"
echo 'exception model -> api because' >> "$tmp/scripts/layering.txt"
check "$src/scripts/check-layering.sh" "$tmp"
expect "an exception without an issue" 2 "an exception needs"

# (f) scripts/check-size.sh --strict: today's tree passes; a Broker with an
# eleventh public method, or a file over 900 lines, fails it.
check "$src/scripts/check-size.sh" --strict "$src"
expect "size: the tree as it is" 0 "0 files over 900 lines" "public methods (at most 10)"
cp "$src/include/gangkeeper/broker/broker.h" "$tmp/saved"
broker_h="$tmp/include/gangkeeper/broker/broker.h"
methods=$(sed -n 's/.*Broker has \([0-9]*\) public methods.*/\1/p' <<< "$out")
for i in $(seq "$methods" 10); do
  sed -i "/^class Broker[ \t]/a\  void Extra$i();" "$broker_h"
done
check "$src/scripts/check-size.sh" --strict "$tmp"
expect "size: a Broker of 11 methods" 1 "public methods (at most 10)"
cp "$tmp/saved" "$broker_h"
seq 1 901 | sed 's|^|// line |' > "$tmp/src/model/long.cc"
check "$src/scripts/check-size.sh" --strict "$tmp"
expect "size: a file over 900 lines" 1 "src/model/long.cc" "1 files over 900 lines"
rm "$tmp/src/model/long.cc"

[[ $failures -eq 0 ]] || { echo "$failures failed"; exit 1; }
echo "all passed"
