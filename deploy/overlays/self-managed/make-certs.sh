#!/usr/bin/env bash
# Makes or renews gangkeeper's certificates for the self-managed overlay,
# offline, with `gangkeeper certs`:
#   1. `gangkeeper certs --out CERT_DIR` keeps (or makes) the CA there and
#      issues a new serving certificate for gangkeeper.gangkeeper-system.svc;
#   2. tls.crt, tls.key and ca.crt are copied into tls/ next to this script
#      (the overlay's secretGenerator reads them; the CA key stays behind);
#   3. tls/mutating-ca.yaml and tls/validating-ca.yaml are written: JSON
#      patches that put the CA into the caBundle of every webhook.
# Then: kubectl apply -k deploy/overlays/self-managed
#
# Usage: deploy/overlays/self-managed/make-certs.sh [CERT_DIR]
#   CERT_DIR     where the CA lives (default: certs/cluster, git-ignored).
#                Keep it, and back it up: renewing with the same CA keeps
#                the caBundle the API server trusts.
#   GANGKEEPER   the gangkeeper binary (default: gangkeeper on the PATH, else
#                the one ./run.sh builds, build/release/src/cli/gangkeeper).
#   VALIDITY     lifetime of the serving certificate (default 8760h).
#   EXTRA_CA     a CA certificate file to trust as well, next to CERT_DIR's
#                (caBundle = both): the first step of replacing the CA
#                (certs/README.md, "Replacing the CA").
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cert_dir="${1:-$root/certs/cluster}"
validity="${VALIDITY:-8760h}"
# The names the base uses (deploy/common/service.yaml, namespace.yaml).
service=gangkeeper
namespace=gangkeeper-system

gk="${GANGKEEPER:-}"
if [[ -z "$gk" ]]; then
  if command -v gangkeeper >/dev/null 2>&1; then
    gk="$(command -v gangkeeper)"
  elif [[ -x "$root/build/release/src/cli/gangkeeper" ]]; then
    gk="$root/build/release/src/cli/gangkeeper"
  else
    echo "make-certs: no gangkeeper binary: build it (./run.sh does) or set GANGKEEPER" >&2
    exit 1
  fi
fi

# 1. The CA is reused when CERT_DIR has a valid one; stdout is the caBundle.
bundle="$("$gk" certs --out "$cert_dir" --service "$service" --namespace "$namespace" --validity "$validity")"
if [[ -z "$bundle" ]]; then
  echo "make-certs: gangkeeper certs printed no caBundle" >&2
  exit 1
fi
if [[ -n "${EXTRA_CA:-}" ]]; then
  grep -q -- '-----BEGIN CERTIFICATE-----' "$EXTRA_CA" || {
    echo "make-certs: EXTRA_CA=$EXTRA_CA is not a PEM certificate" >&2
    exit 1
  }
  bundle="$(cat "$cert_dir/ca.crt" "$EXTRA_CA" | base64 -w0)"
fi

# 2. Only what the pod needs goes into the Secret.
umask 077
mkdir -p "$here/tls"
for f in tls.crt tls.key ca.crt; do
  cp "$cert_dir/$f" "$here/tls/$f.tmp"
  mv -f "$here/tls/$f.tmp" "$here/tls/$f"
done

# 3. One "replace caBundle" per webhook of each configuration. The webhooks
# are the top-level "- name:" entries of webhook/*.yaml (the style those
# files keep; test/deploy checks every rendered webhook has this caBundle).
write_patch() {
  local config="$1" out="$2" count i
  count="$(grep -c '^- name:' "$root/webhook/$config")"
  if [[ "$count" -lt 1 ]]; then
    echo "make-certs: no webhooks found in webhook/$config" >&2
    exit 1
  fi
  {
    echo "# Written by make-certs.sh from $cert_dir/ca.crt${EXTRA_CA:+ and $EXTRA_CA}; do not edit."
    for ((i = 0; i < count; i++)); do
      echo "- op: replace"
      echo "  path: /webhooks/$i/clientConfig/caBundle"
      echo "  value: $bundle"
    done
  } > "$out.tmp"
  mv -f "$out.tmp" "$out"
}
write_patch mutating.yaml "$here/tls/mutating-ca.yaml"
write_patch validating.yaml "$here/tls/validating-ca.yaml"

echo "make-certs: certificates in $cert_dir, Secret files and caBundle patches in $here/tls" >&2
echo "make-certs: next: kubectl apply -k ${here#"$root"/}" >&2
