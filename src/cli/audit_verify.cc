// gangkeeper CLI: `gangkeeper audit verify DATA_DIR [--audit-hmac-key FILE]`,
// the offline check of an audit log (src/audit/FORMAT.md §7). Reads the
// files only; needs no server and changes nothing.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/audit/verify.h"
#include "src/cli/commands.h"
#include "src/cli/flags.h"

namespace gangkeeper::cli {
namespace {

// Exit codes (also in --help).
constexpr int kIntact = 0;
constexpr int kBadRecord = 1;
constexpr int kExitUsage = 2;
constexpr int kWarnings = 3;

std::string Where(const audit::VerifyProblem& p) {
  std::string out = p.file;
  if (p.seq != 0) absl::StrAppend(&out, out.empty() ? "" : ": ", "record ", p.seq);
  return out.empty() ? out : absl::StrCat(out, ": ");
}

}  // namespace

int RunAuditVerify(const std::vector<std::string>& args) {
  std::string key_file;
  FlagSet flags("audit verify",
                "Checks an audit log offline: segment headers, every record's CRC and seq (no gaps), the hash chain,\n"
                "the HMACs (with --audit-hmac-key) and HEAD (a cut-off tail). Names the first bad record.");
  flags.Synopsis("gangkeeper audit verify DATA_DIR [--audit-hmac-key FILE]");
  flags.ExitCodes("0 intact; 1 a bad record (changed, removed or corrupt: named); 2 usage, or files that\n"
                  "cannot be read; 3 warnings only (a truncated tail, with the count of missing records; a torn last\n"
                  "write; no HEAD)");
  flags.Examples("  gangkeeper audit verify data/ --audit-hmac-key /etc/gangkeeper/audit-hmac");
  flags.String("audit-hmac-key", &key_file, "the key file gangkeeper serve --audit-hmac-key was given");
  std::vector<std::string> rest;
  if (std::optional<int> done = flags.ParseOrExit(args, &rest)) return *done;
  if (rest.size() != 1) {
    std::fprintf(stderr, "gangkeeper: usage: gangkeeper audit verify DATA_DIR [--audit-hmac-key FILE]\n");
    return kExitUsage;
  }
  audit::VerifyOptions o;
  o.dir = rest[0] + "/audit";
  if (!key_file.empty()) {
    absl::StatusOr<std::string> key = audit::LoadHmacKey(key_file);
    if (!key.ok()) {
      std::fprintf(stderr, "gangkeeper: --audit-hmac-key: %s\n", std::string(key.status().message()).c_str());
      return kExitUsage;
    }
    o.hmac_key = *std::move(key);
  }
  absl::StatusOr<audit::VerifyReport> r = audit::VerifyAuditLog(o);
  if (!r.ok()) {
    std::fprintf(stderr, "gangkeeper: audit verify: %s\n", std::string(r.status().message()).c_str());
    return kExitUsage;
  }
  std::printf("audit log %s: %llu segment(s), %llu record(s)", o.dir.c_str(),
              static_cast<unsigned long long>(r->segments), static_cast<unsigned long long>(r->records));
  if (r->records > 0) {
    std::printf(", %llu to %llu", static_cast<unsigned long long>(r->first_seq),
                static_cast<unsigned long long>(r->last_seq));
  }
  std::printf("\n");
  if (r->unchained > 0) {
    std::printf("  records %llu to %llu: unchained (written before version 2)\n",
                static_cast<unsigned long long>(r->unchained_first), static_cast<unsigned long long>(r->unchained_last));
  }
  if (!r->error.has_value() && r->chained > 0) {
    std::printf("  %llu sealed record(s): hash chain intact; HMAC %s\n", static_cast<unsigned long long>(r->chained),
                o.hmac_key.empty() ? "not checked (no --audit-hmac-key)"
                                   : absl::StrCat("confirmed on ", r->hmac_checked, ", absent on ", r->without_hmac)
                                         .c_str());
  }
  for (const std::string& note : r->notes) std::printf("  note: %s\n", note.c_str());
  for (const audit::VerifyProblem& w : r->warnings) {
    std::printf("WARNING: %s%s\n", Where(w).c_str(), w.what.c_str());
  }
  if (r->error.has_value()) {
    std::printf("ERROR: %s%s\n", Where(*r->error).c_str(), r->error->what.c_str());
    return kBadRecord;
  }
  return r->warnings.empty() ? kIntact : kWarnings;
}

}  // namespace gangkeeper::cli
