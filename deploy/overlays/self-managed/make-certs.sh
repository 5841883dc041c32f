#!/usr/bin/env bash
# Makes or renews gangkeeper's certificates for the self-managed overlay,
# offline, with `gangkeeper certs`:
#   1. `gangkeeper certs --out CERT_DIR` keeps (or makes) the CA there and
#      issues a new serving certificate for gangkeeper.gangkeeper-system.svc;
#   2. tls.crt, tls.key and ca.crt are copied into tls/ next to this script
#      (the overlay's secretGenerator reads them; the CA key stays behind);
#   3. tls/mutating-ca.yaml and tls/validating-ca.yaml are written: JSON
#      patches that put the CA into the caBundle of every webhook;
#   4. CERT_DIR/apiserver/ gets the API server's side of ../client-auth
#      (optional, with openssl): a client certificate for the webhook from
#      the same CA, a kubeconfig naming it for the webhook's Service, and
#      the AdmissionConfiguration that points the API server at it.
# Then: kubectl apply -k deploy/overlays/self-managed (or ../client-auth)
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
#   APISERVER_DIR  where the files of step 4 will be on the control-plane
#                nodes (default /etc/kubernetes/gangkeeper): the kubeconfig
#                and the AdmissionConfiguration name their files there.
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

# 4. The API server's client certificate for the webhook (../client-auth):
# "client auth" only, from gangkeeper's CA, renewed with the serving one.
# The kubeconfig's user is chosen by the webhook's address, <service>.<namespace>.svc:443.
apiserver_dir="${APISERVER_DIR:-/etc/kubernetes/gangkeeper}"
out="$cert_dir/apiserver"
if command -v openssl >/dev/null 2>&1; then
  mkdir -p "$out"
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' > "$out/client.ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=kube-apiserver \
    -keyout "$out/webhook-client.key.tmp" -out "$out/webhook-client.csr" 2>/dev/null
  openssl x509 -req -in "$out/webhook-client.csr" -CA "$cert_dir/ca.crt" -CAkey "$cert_dir/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days "${CLIENT_DAYS:-365}" -extfile "$out/client.ext" \
    -out "$out/webhook-client.crt.tmp" 2>/dev/null
  mv -f "$out/webhook-client.key.tmp" "$out/webhook-client.key"
  mv -f "$out/webhook-client.crt.tmp" "$out/webhook-client.crt"
  rm -f "$out/webhook-client.csr" "$out/client.ext"
  cat > "$out/webhook-kubeconfig.yaml" <<KUBECONFIG
# Written by make-certs.sh: the credentials kube-apiserver presents to
# gangkeeper's webhook (chosen by the webhook's host:port).
apiVersion: v1
kind: Config
users:
- name: $service.$namespace.svc:443
  user:
    client-certificate: $apiserver_dir/webhook-client.crt
    client-key: $apiserver_dir/webhook-client.key
KUBECONFIG
  cat > "$out/admission-config.yaml" <<ADMISSION
# Written by make-certs.sh: kube-apiserver --admission-control-config-file.
# Already have one? Add these two plugins to its list.
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $apiserver_dir/webhook-kubeconfig.yaml
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $apiserver_dir/webhook-kubeconfig.yaml
ADMISSION
  echo "make-certs: the API server's files for ../client-auth in $out (to $apiserver_dir on every control-plane node)" >&2
else
  echo "make-certs: no openssl: skipped the API server's client certificate (../client-auth)" >&2
fi

echo "make-certs: certificates in $cert_dir, Secret files and caBundle patches in $here/tls" >&2
echo "make-certs: next: kubectl apply -k ${here#"$root"/}" >&2
