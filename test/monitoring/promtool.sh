#!/usr/bin/env bash
# promtool (Debian's `prometheus` package) on the shipped alert rules:
# `check rules` on the plain file and the PrometheusRule's spec, and
# `test rules` with the synthetic series of alerts-test.yaml. Exits 77
# (ctest: skipped) when promtool is missing; scripts/deps.sh test installs it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rules="$here/../../deploy/overlays/monitoring/gangkeeper-rules.yaml"
promtool="${PROMTOOL:-$(command -v promtool || true)}"
if [[ -z "$promtool" ]]; then
  echo "SKIP: promtool is missing: install Debian's prometheus package (scripts/deps.sh test)" >&2
  exit 77
fi
"$promtool" check rules "$rules"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The PrometheusRule's spec is a rules file of its own.
sed -n '/^spec:/,$p' "$here/../../deploy/overlays/monitoring/prometheusrule.yaml" | tail -n +2 | sed 's/^  //' \
  > "$tmp/operator-rules.yaml"
"$promtool" check rules "$tmp/operator-rules.yaml"
cd "$here"
"$promtool" test rules alerts-test.yaml
