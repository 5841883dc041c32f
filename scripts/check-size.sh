#!/usr/bin/env bash
# Lists what is too big to read in one sitting (#21's acceptance): every
# source file (*.h, *.cc) in src/ and include/ over 900 lines, and every
# function over 120 lines.
#
# Functions are found by a heuristic, not a parser. Google style keeps a
# namespace's contents at column 0 and indents everything inside a
# function, so:
#   - a definition starts at a line beginning in column 0 that is not
#     blank, a comment (//, /*, *), preprocessor (#), `namespace`, `struct`,
#     `class`, `union`, `enum`, `template <...>` on its own line (the next
#     line decides), `using`, `typedef`, `extern`, `static_assert`, a
#     label/access specifier or a closing brace;
#   - if a `;` comes before any `{` it was a declaration: skipped;
#   - it ends at the next line beginning with `}` in column 0 (a body on
#     its start line that closes there is one line long);
#   - a head with `=` before its first `(` and `{` (and no `operator`) is
#     a variable: skipped to the `;` that ends it at brace depth 0; a block
#     that ends with `};` is a table or type, not a function: skipped;
#   - its length is the lines from its first line (the signature) to the
#     closing brace, both included.
# Member functions defined inside a class whose body opens at column 0
# (`struct Broker::Impl {` ... `};`) are found the same way two columns in
# and named Class::Function. Missed: classes nested deeper, and code not in
# this layout (a raw string with a `}` in column 0 ends a function early).
#
# It also counts the public methods of broker::Broker (a thin event loop:
# at most 10, #21): the lines at two spaces of indentation between
# `class Broker` and `private:` in include/gangkeeper/broker/broker.h that
# declare a function, constructors, the destructor and operator= aside.
#
# Usage: scripts/check-size.sh [--strict] [ROOT]
#   default: print what is over and exit 0; --strict: exit 1 when anything
#   is (2: bad usage). ROOT: the tree with src/ and include/ (default: this repository).
set -euo pipefail
strict=0
root=""
for a in "$@"; do
  case "$a" in
    --strict) strict=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check-size: unknown option $a" >&2; exit 2 ;;
    *) [[ -z "$root" ]] || { echo "check-size: one ROOT only" >&2; exit 2; }; root="$a" ;;
  esac
done
root="${root:-$(dirname "$0")/..}"
cd "$root" || { echo "check-size: no directory $root" >&2; exit 2; }
max_file=900
max_function=120

mapfile -t files < <(find src include -type f \( -name '*.h' -o -name '*.cc' \) 2>/dev/null | LC_ALL=C sort)
[[ ${#files[@]} -gt 0 ]] || { echo "check-size: no *.h or *.cc under $root/src or $root/include" >&2; exit 2; }

big_files=$(wc -l "${files[@]}" | awk -v max=$max_file '$2 != "total" && $1 > max { printf "  %-40s %5d lines\n", $2, $1 }')

big_functions=$(awk -v max=$max_function '
  function report(k, end,   len) {
    len = end - start[k] + 1
    if (len > max) printf "  %-40s %5d lines  %s\n", FILENAME ":" start[k], len, name[k]
  }
  function name_of(sig,   s, n, w) {
    s = sig; sub(/\(.*/, "", s); sub(/[ \t]+$/, "", s); n = split(s, w, /[ \t]+/)
    if (n > 0) sub(/^[*&]+/, "", w[n])
    return (n > 0 && w[n] != "") ? w[n] : "?"
  }
  # One step of the scanner k (0: the file at column 0; 1: a class body
  # with its two spaces of indentation taken off) over `line`.
  function step(k, line,   b, s, head, rest, opens, closes, t) {
    if (comment[k]) { if (line ~ /\*\//) comment[k] = 0; return }
    if (state[k] == "out") {
      if (line ~ /^\/\*/ && line !~ /\*\//) { comment[k] = 1; return }
      if (line !~ /^[^ \t]/) return
      if (line ~ /^(\/\/|\/\*|\*|#|}|namespace([ \t]|$)|(struct|class|union|enum)([ \t]|$)|template[ \t]*<.*>[ \t]*$|using[ \t]|typedef[ \t]|extern[ \t]|static_assert|friend[ \t]|[a-z_]+:[ \t]*$)/) return
      state[k] = "head"; start[k] = FNR; sig[k] = ""
    }
    if (state[k] == "head") {
      sig[k] = sig[k] " " line
      b = index(line, "{"); s = index(line, ";")
      if (s > 0 && (b == 0 || s < b)) { state[k] = "out"; return }
      if (b == 0) return
      head = sig[k]; sub(/[({].*/, "", head)
      if (head ~ /=/ && head !~ /operator/) { state[k] = "var"; depth[k] = 0 }
      else {
        name[k] = (k == 1 ? cls "::" : "") name_of(sig[k])
        rest = substr(line, b)
        opens = gsub(/{/, "{", rest); closes = gsub(/}/, "}", rest)
        if (opens == closes) { if (line !~ /};[ \t]*(\/\/.*)?$/) report(k, FNR); state[k] = "out"; return }
        state[k] = "body"; return
      }
    }
    if (state[k] == "var") {
      t = line; depth[k] += gsub(/{/, "{", t) - gsub(/}/, "}", t)
      if (depth[k] <= 0 && line ~ /;[ \t]*(\/\/.*)?$/) state[k] = "out"
      return
    }
    if (state[k] == "body" && line ~ /^}/) {
      if (line !~ /^};/) report(k, FNR)
      state[k] = "out"
    }
  }
  FNR == 1 { state[0] = state[1] = "out"; comment[0] = comment[1] = 0; inclass = 0 }
  {
    if (inclass && $0 ~ /^};/) { inclass = 0; state[1] = "out"; comment[1] = 0 }
    else if (inclass) { line = $0; if (line ~ /^  [^ \t]/) line = substr(line, 3); else if (line ~ /^[^ \t]/) line = " " line; step(1, line) }
    if (!inclass && state[0] == "out" && !comment[0] && $0 ~ /^(struct|class)[ \t][^;]*{[ \t]*$/) {
      inclass = 1; cls = $0; sub(/^(struct|class)[ \t]+/, "", cls); sub(/[ \t{].*/, "", cls)
    }
    step(0, $0)
  }
' "${files[@]}")

max_broker_methods=10
broker_methods=$(awk '
  /^class Broker[ \t]/ { in_class = 1; next }
  in_class && /^ private:/ { exit }
  in_class && /^  [^ \/]/ && /\(/ && !/^  (~?Broker\(|.*operator=)/ { n++ }
  END { print n + 0 }' include/gangkeeper/broker/broker.h 2>/dev/null || echo 0)

n_files=$(grep -c . <<< "$big_files" || true)
n_functions=$(grep -c . <<< "$big_functions" || true)
if [[ -n "$big_files" ]]; then
  echo "size: files over $max_file lines:"
  echo "$big_files"
fi
if [[ -n "$big_functions" ]]; then
  echo "size: functions over $max_function lines:"
  echo "$big_functions"
fi
echo "size: $n_files files over $max_file lines, $n_functions functions over $max_function lines"
echo "size: broker::Broker has $broker_methods public methods (at most $max_broker_methods)"
over_broker=$(( broker_methods > max_broker_methods ? 1 : 0 ))
if [[ $strict -eq 1 && $((n_files + n_functions + over_broker)) -gt 0 ]]; then
  exit 1
fi
exit 0
