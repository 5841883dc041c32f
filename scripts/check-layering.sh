#!/usr/bin/env bash
# Checks the dependency rules of STYLE §6.3 on src/ and include/:
#   RapidJSON only in admission/workload; cpp-httplib only in server/kube/etcd;
#   clocks read only in src/base/clock.cc; no `throw`; no module includes
#   another module's private headers (src/<other>/...).
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
report() { echo "layering: $1"; echo "$2" | sed 's/^/  /'; fail=1; }

hits=$(grep -rnE '#include\s*[<"]rapidjson' src include \
  | grep -vE '^src/(admission|workload)/|^include/gangkeeper/workload/extract\.h:' || true)
[[ -z "$hits" ]] || report "RapidJSON outside admission/workload" "$hits"

hits=$(grep -rnE '#include\s*[<"]httplib' src include | grep -vE '^src/(server|kube|etcd)/' || true)
[[ -z "$hits" ]] || report "cpp-httplib outside server/kube/etcd" "$hits"

hits=$(grep -rnE 'absl::Now\(|::now\(\)' src include | grep -v '^src/base/clock\.cc:' || true)
[[ -z "$hits" ]] || report "clock read outside src/base/clock.cc (use base::Clock)" "$hits"

hits=$(grep -rnwE 'throw' src include | grep -vE '^\S+:\s*//' || true)
[[ -z "$hits" ]] || report "throw in src/ or include/ (errors are absl::Status values)" "$hits"

for dir in src/*/; do
  m=$(basename "$dir")
  hits=$(grep -rnE '#include\s*"src/' "$dir" | grep -vE "#include\s*\"src/$m/" || true)
  [[ -z "$hits" ]] || report "src/$m includes another module's private header" "$hits"
done

if [[ $fail -ne 0 ]]; then
  exit 1
fi
echo "layering: ok"
