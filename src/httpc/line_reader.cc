// gangkeeper httpc: a streamed answer back into lines (see line_reader.h).
#include "gangkeeper/httpc/line_reader.h"

#include "absl/strings/ascii.h"

namespace gangkeeper::httpc {

LineReader::Result LineReader::Feed(absl::string_view chunk,
                                    const std::function<bool(absl::string_view line)>& on_line) {
  buffer_.append(chunk.data(), chunk.size());
  size_t start = 0;
  for (size_t nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n', start)) {
    const absl::string_view line = absl::StripAsciiWhitespace(absl::string_view(buffer_).substr(start, nl - start));
    start = nl + 1;
    if (line.empty()) continue;
    if (!on_line(line)) {
      buffer_.erase(0, start);
      return Result::kStopped;
    }
  }
  buffer_.erase(0, start);
  return buffer_.size() > max_line_bytes_ ? Result::kTooLong : Result::kMore;
}

}  // namespace gangkeeper::httpc
