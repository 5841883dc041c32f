#!/usr/bin/env bash
# Writes the webhook configurations with the caBundle filled in from a
# certificate directory made by `gangkeeper certs` (default certs/dev), to
# stdout, ready for `kubectl apply -f -`.
# Usage: webhook/inject-ca.sh [CERT_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here/../certs/dev}"
ca="$dir/ca.crt"
if [[ ! -r "$ca" ]]; then
  echo "inject-ca: $ca not found; make it with: gangkeeper certs --out $dir" >&2
  exit 1
fi
bundle="$(base64 -w0 < "$ca")"
sed "s|caBundle: CA_BUNDLE|caBundle: $bundle|" "$here/mutating.yaml"
echo "---"
sed "s|caBundle: CA_BUNDLE|caBundle: $bundle|" "$here/validating.yaml"
