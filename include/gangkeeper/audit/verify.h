// gangkeeper audit: checking an audit log offline (`gangkeeper audit
// verify DATA_DIR`), from its files alone, without changing them.
//
// Reads <data-dir>/audit as src/audit/FORMAT.md specifies it: segment
// headers, every record's length, CRC-32C and seq (gapless across
// segments), the hash chain of the sealed records (version 2) from BASE on,
// their HMACs when a key is given, and HEAD against the newest record.
// Stops at the first bad record and names it; problems that are not a bad
// record (a cut-off tail HEAD reveals, a torn last write) are warnings.
// Records written before version 2 carry no seal: they are counted as
// unchained, not reported as tampering. Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gangkeeper/store/file_system.h"

namespace gangkeeper::audit {

struct VerifyOptions {
  std::string dir;                  // <data-dir>/audit
  store::FileSystem* fs = nullptr;  // nullptr: POSIX
  std::string hmac_key;             // "": HMACs are not checked
};

// One finding: where (a segment file's name or HEAD/BASE, and a record)
// and what is wrong.
struct VerifyProblem {
  std::string file;
  uint64_t seq = 0;  // 0 when about no single record
  std::string what;
};

struct VerifyReport {
  uint64_t segments = 0;
  uint64_t records = 0;
  uint64_t first_seq = 0, last_seq = 0;  // the records read (0, 0 when none)
  uint64_t unchained = 0;                // written before version 2: no seal
  uint64_t unchained_first = 0, unchained_last = 0;
  uint64_t chained = 0;
  uint64_t hmac_checked = 0;  // records whose HMAC the key confirmed
  uint64_t without_hmac = 0;  // sealed records written without a key
  uint64_t missing_tail = 0;  // records HEAD says were written that the log lacks
  std::optional<VerifyProblem> error;  // the first bad record; reading stopped there
  std::vector<VerifyProblem> warnings;
  std::vector<std::string> notes;
};

// Checks the log in options.dir. NotFound when there is no such directory;
// other errors when a file cannot be read. A bad log is a report with an
// error, not an error status.
[[nodiscard]] absl::StatusOr<VerifyReport> VerifyAuditLog(const VerifyOptions& options);

}  // namespace gangkeeper::audit
