// gangkeeper fuzzing: the journal reader.
//
// Input: the first byte picks what the rest is (byte % 3):
//   0  a journal segment file: SegmentedLog::Open recovers it (a torn tail
//      is cut; corruption in the middle is DataLoss) and Read replays it,
//      decoding every record with ApplyBatch;
//   1  one journal record payload: ApplyBatch folds it into a state;
//   2  a snapshot payload: DecodeState.
// Every refusal must be DataLoss (or InvalidArgument for a foreign log)
// with a message; a state that decoded must encode again without trouble.
// The segment goes through the real POSIX file system in a directory under
// $TMPDIR, rewritten for every input.
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/store/file_system.h"
#include "gangkeeper/store/log.h"
#include "gangkeeper/store/state_codec.h"
#include "test/fuzz/fuzz_target.h"

namespace gangkeeper::fuzz {
namespace {

const std::string& Dir() {
  static const std::string* const dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/gangkeeper-fuzz-XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    return new std::string(made != nullptr ? made : "/tmp");
  }();
  return *dir;
}

absl::Status Refusal(const absl::Status& s, absl::string_view what) {
  if (s.ok()) return s;
  if ((absl::IsDataLoss(s) || absl::IsInvalidArgument(s)) && !s.message().empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": not a clean refusal: ", s.ToString()));
}

absl::Status Segment(absl::string_view bytes) {
  const std::string dir = Dir() + "/journal";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/" + store::SegmentFileName(1);
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  for (bool truncate : {false, true}) {
    store::LogOptions o;
    o.kind = "journal";
    o.truncate_corruption = truncate;
    store::LogRecovery rec;
    absl::StatusOr<std::unique_ptr<store::SegmentedLog>> log =
        store::SegmentedLog::Open(store::DefaultFileSystem(), dir, o, &rec);
    if (!log.ok()) {
      if (absl::Status r = Refusal(log.status(), "SegmentedLog::Open"); !r.ok()) return r;
      continue;
    }
    broker::DurableState state;
    absl::Status read = (*log)->Read(1, [&](uint64_t seq, absl::string_view payload) {
      absl::Status applied = store::ApplyBatch(payload, seq, &state);
      return applied.ok() || absl::IsDataLoss(applied) ? absl::OkStatus() : applied;
    });
    if (absl::Status r = Refusal(read, "SegmentedLog::Read"); !r.ok()) return r;
    // What was recovered takes appends again.
    if ((*log)->health().ok()) {
      absl::StatusOr<uint64_t> seq = (*log)->Append("after recovery");
      if (!seq.ok()) return absl::InternalError(absl::StrCat("append after recovery: ", seq.status().ToString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FuzzOneInput(absl::string_view data) {
  if (data.empty()) return absl::OkStatus();
  const int mode = static_cast<unsigned char>(data[0]) % 3;
  data.remove_prefix(1);
  if (mode == 0) return Segment(data);
  if (mode == 1) {
    broker::DurableState state;
    absl::Status s = store::ApplyBatch(data, 7, &state);
    if (absl::Status r = Refusal(s, "ApplyBatch"); !r.ok()) return r;
    if (s.ok()) (void)store::EncodeState(state);
    return absl::OkStatus();
  }
  absl::StatusOr<broker::DurableState> state = store::DecodeState(data, 9);
  if (!state.ok()) return Refusal(state.status(), "DecodeState");
  const std::string again = store::EncodeState(*state);
  absl::StatusOr<broker::DurableState> twice = store::DecodeState(again, 9);
  if (!twice.ok()) return absl::InternalError(absl::StrCat("a decoded state does not decode again: ", twice.status().ToString()));
  return Expect(store::EncodeState(*twice) == again, "DecodeState", "encode(decode(encode(s))) != encode(s)");
}

}  // namespace gangkeeper::fuzz
