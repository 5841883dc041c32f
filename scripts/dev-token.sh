#!/usr/bin/env bash
# Makes (or reuses) the development admin token that ./run.sh serves with:
#   DATA_DIR/dev-token         the token itself, mode 0600
#   DATA_DIR/dev-tokens.yaml   its SHA-256, for `gangkeeper serve --tokens`
# and prints the token and a command line to try. The gangkeeper CLI reads
# data/dev-token by itself when it talks to a server on this machine and no
# token is given (--token, --token-file, GANGKEEPER_TOKEN[_FILE]).
# Usage: scripts/dev-token.sh [DATA_DIR] [CLI]   (defaults: data, build/release/src/cli/gangkeeper)
set -euo pipefail
dir="${1:-data}"
cli="${2:-build/release/src/cli/gangkeeper}"
umask 077
mkdir -p "$dir"
token_file="$dir/dev-token"
tokens_file="$dir/dev-tokens.yaml"
if [[ ! -s "$token_file" ]]; then
  openssl rand -hex 24 > "$token_file"
fi
chmod 600 "$token_file"
token="$(tr -d '[:space:]' < "$token_file")"
sha="$(printf %s "$token" | sha256sum | cut -d' ' -f1)"
want="- {name: dev-admin, sha256: $sha, role: admin}"
if [[ ! -f "$tokens_file" ]] || [[ "$(cat "$tokens_file")" != "$want" ]]; then
  printf '%s\n' "$want" > "$tokens_file"
fi
echo "dev token (role admin): $token"
echo "  kept in $token_file; the server checks it against $tokens_file (serve --tokens)"
echo "  try: $cli get clusterqueues"
