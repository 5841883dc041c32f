// gangkeeper httpc: the framing of a streamed watch answer. The Kubernetes
// API and etcd's gateway both send one JSON object per line ('\n') over a
// chunked response that never ends by itself; chunks split lines anywhere.
// LineReader puts the chunks back into lines and bounds the bytes it keeps
// for a line not yet complete.
//
// Thread-compatible (one per stream).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"

namespace gangkeeper::httpc {

class LineReader {
 public:
  enum class Result {
    kMore,     // every whole line was taken; feed the next chunk
    kStopped,  // on_line returned false: end the stream
    kTooLong,  // an unfinished line is over max_line_bytes: end the stream
  };

  explicit LineReader(size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

  // Appends `chunk` and passes each line it completes to `on_line`, without
  // the '\n' and surrounding whitespace; blank lines are skipped.
  Result Feed(absl::string_view chunk, const std::function<bool(absl::string_view line)>& on_line);

  // Bytes of an unfinished line kept.
  size_t buffered() const { return buffer_.size(); }
  size_t max_line_bytes() const { return max_line_bytes_; }

 private:
  const size_t max_line_bytes_;
  std::string buffer_;
};

}  // namespace gangkeeper::httpc
