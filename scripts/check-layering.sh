#!/usr/bin/env bash
# Checks the dependency rules of DESIGN §3 and STYLE §6.3 on src/ and include/:
#   module direction: every #include "gangkeeper/<m>/..." in src/<module>/ and
#     include/gangkeeper/<module>/ is an arrow the table in scripts/layering.txt
#     allows (a row, or a tolerated exception, counted in a note);
#   no module includes another module's private headers (src/<other>/...), and
#     no public header includes a private one;
#   RapidJSON only in admission/workload; cpp-httplib only in server (the
#     listeners) and httpc (the client layer under kube, store/etcd and cli);
#   clocks read only in src/base/clock.cc; no `throw`.
# A module is the first folder under src/ or include/gangkeeper/.
#
# Usage: scripts/check-layering.sh [ROOT]   (ROOT: a tree with src/, include/
# and scripts/layering.txt; default: this repository). Exit 0 clean, 1 on a
# violation, 2 when the table cannot be read.
set -euo pipefail
root="${1:-$(dirname "$0")/..}"
cd "$root" || { echo "layering: no directory $root" >&2; exit 2; }
table=scripts/layering.txt
fail=0
report() { echo "layering: $1"; echo "$2" | sed 's/^/  /'; fail=1; }
bad_table() { echo "layering: $table:$1: $2" >&2; exit 2; }

# --- the table -------------------------------------------------------------
declare -A row=()        # row[m]=1: m has a row
declare -A allowed=()    # allowed["m>t"]=1: a row allows m -> t
declare -A tolerated=()  # tolerated["m>t"]="reason": a tolerated exception
declare -A odd_module=() # odd_module[m]="reason": a module §3 does not list
declare -A used=()       # used["m>t"]=1: the code has the arrow
[[ -r "$table" ]] || { echo "layering: cannot read $table" >&2; exit 2; }
n=0
while IFS= read -r line || [[ -n "$line" ]]; do
  n=$((n + 1))
  line="${line%$'\r'}"
  [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
  if [[ "$line" =~ ^exception[[:space:]]+module[[:space:]]+([a-z0-9_]+)[[:space:]]+\(#[0-9]+\)[[:space:]]+[^[:space:]] ]]; then
    odd_module[${BASH_REMATCH[1]}]="$line"
  elif [[ "$line" =~ ^exception[[:space:]]+([a-z0-9_]+)[[:space:]]*-\>[[:space:]]*([a-z0-9_]+)[[:space:]]+\(#[0-9]+\)[[:space:]]+[^[:space:]] ]]; then
    tolerated["${BASH_REMATCH[1]}>${BASH_REMATCH[2]}"]="$line"
  elif [[ "$line" =~ ^exception ]]; then
    bad_table $n "an exception needs 'exception FROM -> TO (#ISSUE) REASON' or 'exception module M (#ISSUE) REASON'"
  elif [[ "$line" =~ ^([a-z0-9_]+):([a-z0-9_[:space:]]*)$ ]]; then
    m="${BASH_REMATCH[1]}"
    [[ -z "${row[$m]:-}" ]] || bad_table $n "a second row for $m"
    row[$m]=1
    for t in ${BASH_REMATCH[2]}; do allowed["$m>$t"]=1; done
  else
    bad_table $n "not a row ('MODULE: MODULE...') or an exception"
  fi
done < "$table"
for m in "${!odd_module[@]}"; do
  [[ -n "${row[$m]:-}" ]] || bad_table 0 "exception module $m has no row"
done

# --- module direction ------------------------------------------------------
modules=$(find src include/gangkeeper -mindepth 1 -maxdepth 1 -type d 2>/dev/null | awk -F/ '{print $NF}' | sort -u)
for m in $modules; do
  [[ -n "${row[$m]:-}" ]] || report "module $m has no row in $table" "src/$m or include/gangkeeper/$m"
done

# One line per include of another module: "from to kind file:line: text".
arrows=$(grep -rnE '^\s*#\s*include\s*[<"](gangkeeper|src)/[a-z0-9_]+/' src include 2>/dev/null \
  | awk '{
      split($0, p, ":"); file = p[1]
      n = split(file, d, "/"); from = (d[1] == "src") ? d[2] : d[3]
      if (d[1] == "src" && n < 3) next
      match($0, /[<"](gangkeeper|src)\/[a-z0-9_]+\//)
      inc = substr($0, RSTART + 1, RLENGTH - 2); split(inc, q, "/")
      kind = (q[1] == "src") ? "private" : "public"
      if (kind == "public" && q[2] == from) next
      if (kind == "private" && q[2] == from && d[1] == "src") next
      print from, q[2], kind, $0
    }' || true)

declare -A bad=()
declare -a bad_order=()
while read -r from to kind where; do
  [[ -n "${from:-}" ]] || continue
  if [[ "$kind" == private ]]; then
    if [[ "$to" == "$from" ]]; then
      key="public header includes a private header (src/$from/...)"
    else
      key="$from -> $to through a private header (src/$to/... is only for src/$to/)"
    fi
  elif [[ -n "${allowed["$from>$to"]:-}" ]]; then
    continue
  elif [[ -n "${tolerated["$from>$to"]:-}" ]]; then
    used["$from>$to"]=1
    continue
  else
    key="$from -> $to is not an allowed arrow ($table)"
  fi
  [[ -n "${bad[$key]:-}" ]] || bad_order+=("$key")
  bad[$key]+="$where"$'\n'
done <<< "$arrows"
for key in "${bad_order[@]}"; do report "$key" "${bad[$key]%$'\n'}"; done

# --- libraries, clocks, exceptions (STYLE §6.3) -------------------------------
hits=$(grep -rnE '#include\s*[<"]rapidjson' src include \
  | grep -vE '^src/(admission|workload)/|^include/gangkeeper/workload/extract\.h:' || true)
[[ -z "$hits" ]] || report "RapidJSON outside admission/workload" "$hits"

hits=$(grep -rnE '#include\s*[<"]httplib' src include | grep -vE '^src/(server|httpc)/' || true)
[[ -z "$hits" ]] || report "cpp-httplib outside server/httpc" "$hits"

hits=$(grep -rnE 'absl::Now\(|::now\(\)' src include | grep -v '^src/base/clock\.cc:' || true)
[[ -z "$hits" ]] || report "clock read outside src/base/clock.cc (use base::Clock)" "$hits"

hits=$(grep -rnwE 'throw' src include | grep -vE '^\S+:\s*//' || true)
[[ -z "$hits" ]] || report "throw in src/ or include/ (errors are absl::Status values)" "$hits"

# --- the debts, as notes ---------------------------------------------------
count=$(( ${#tolerated[@]} + ${#odd_module[@]} ))
echo "layering: note: $count tolerated exceptions in $table (${#tolerated[@]} arrows, ${#odd_module[@]} modules), issue #21"
for k in $(printf '%s\n' "${!tolerated[@]}" | sort); do
  [[ -n "${used[$k]:-}" ]] || echo "layering: note: exception ${k%>*} -> ${k#*>} matches no include; delete it unless its reason still holds: ${tolerated[$k]#*) }"
done
for m in $(printf '%s\n' "${!odd_module[@]}" | sort); do
  grep -qx "$m" <<< "$modules" || echo "layering: note: exception module $m is gone: delete it and its row from $table"
done

if [[ $fail -ne 0 ]]; then
  exit 1
fi
echo "layering: ok"
