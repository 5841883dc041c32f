#!/usr/bin/env bash
# Checks the dependency rules of STYLE §6.3 on src/ and include/:
#   RapidJSON only in admission/workload; cpp-httplib only in server/kube/etcd;
#   clocks read only in src/base/clock.cc; no `throw`; no module includes
#   another module's private headers (src/<other>/...); sim depends only on
#   broker/workload/model/quantity/base and only cli uses it.
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

# sim (DESIGN §3) sits on the broker: it may use broker, workload, model,
# quantity and base (plus its own headers); only cli uses sim.
hits=$(grep -rnE '#include\s*"gangkeeper/[a-z_]+/' src/sim include/gangkeeper/sim \
  | grep -vE '#include\s*"gangkeeper/(sim|broker|workload|model|quantity|base)/' || true)
[[ -z "$hits" ]] || report "sim includes a module it may not depend on (allowed: broker, workload, model, quantity, base)" "$hits"
hits=$(grep -rnE '#include\s*"gangkeeper/sim/' src include | grep -vE '^(src/(sim|cli)|include/gangkeeper/sim)/' || true)
[[ -z "$hits" ]] || report "gangkeeper/sim used outside src/cli" "$hits"

if [[ $fail -ne 0 ]]; then
  exit 1
fi
echo "layering: ok"
