// The README's example report as a reader sees it: headless Chromium (Debian
// `chromium`, installed by scripts/deps.sh test) renders the HTML of
// `simulate --compare` offline; the screenshot has the window's size and
// coloured chart lines in both columns, and the rendered DOM has the charts
// with data in them. ctest label `browser` (about 5 s; Chromium is bounded
// by timeout(1) and RunCommand's own limit).
#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::RunCommand;
using ::gangkeeper::testing::TempDir;

constexpr char kChromium[] = "/usr/bin/chromium";
constexpr int kWidth = 1400;
constexpr int kHeight = 2000;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3]));
}

// An 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes), decoded.
struct Image {
  uint32_t width = 0;
  uint32_t height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;  // rows of width * channels bytes
  const uint8_t* At(uint32_t x, uint32_t y) const { return &pixels[(size_t{y} * width + x) * channels]; }
};

int Paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return pa <= pb && pa <= pc ? a : (pb <= pc ? b : c);
}

absl::StatusOr<Image> DecodePng(const std::string& png) {
  if (png.size() < 33 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) {
    return absl::InvalidArgumentError("not a PNG (signature)");
  }
  Image img;
  std::string idat;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t len = BigEndian32(png, at);
    const std::string type = png.substr(at + 4, 4);
    if (at + 12 + len > png.size()) return absl::InvalidArgumentError("truncated chunk " + type);
    if (type == "IHDR") {
      img.width = BigEndian32(png, at + 8);
      img.height = BigEndian32(png, at + 12);
      const int depth = static_cast<uint8_t>(png[at + 16]), color = static_cast<uint8_t>(png[at + 17]);
      const int interlace = static_cast<uint8_t>(png[at + 20]);
      if (depth != 8 || (color != 2 && color != 6) || interlace != 0) {
        return absl::UnimplementedError(absl::StrCat("PNG depth ", depth, " color type ", color, " interlace ",
                                                     interlace));
      }
      img.channels = color == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      idat += png.substr(at + 8, len);
    } else if (type == "IEND") {
      break;
    }
    at += 12 + len;
  }
  if (img.channels == 0 || img.width == 0 || img.height == 0 || img.width > 20000 || img.height > 20000) {
    return absl::InvalidArgumentError("no usable IHDR");
  }
  const size_t stride = size_t{img.width} * img.channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      raw_len != raw.size()) {
    return absl::InvalidArgumentError("IDAT does not inflate to the image's size");
  }
  img.pixels.resize(stride * img.height);
  const int bpp = img.channels;
  for (uint32_t y = 0; y < img.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* out = &img.pixels[y * stride];
    const uint8_t* up = y > 0 ? &img.pixels[(y - 1) * stride] : nullptr;
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(bpp) ? out[i - bpp] : 0;
      const int b = up != nullptr ? up[i] : 0;
      const int c = up != nullptr && i >= static_cast<size_t>(bpp) ? up[i - bpp] : 0;
      int v = in[i];
      switch (filter) {
        case 0: break;
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) / 2; break;
        case 4: v += Paeth(a, b, c); break;
        default: return absl::InvalidArgumentError(absl::StrCat("row ", y, ": filter ", filter));
      }
      out[i] = static_cast<uint8_t>(v);
    }
  }
  return img;
}

bool Near(const uint8_t* p, int r, int g, int b) {
  return std::abs(p[0] - r) <= 24 && std::abs(p[1] - g) <= 24 && std::abs(p[2] - b) <= 24;
}

class BrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st;
    if (::stat(kChromium, &st) != 0) {
      GTEST_SKIP() << kChromium << " is not installed: scripts/deps.sh test installs Debian's chromium";
    }
    // The README's example, before and after.
    const std::string ex = std::string(GK_SOURCE_DIR) + "/test/bench/traces/lend-gpus";
    html_ = dir_.File("compare.html");
    auto r = RunCommand({testing::GangkeeperBinary(), "simulate", "--policies", ex + "/before", "--workload",
                         ex + "/trace.csv", "--compare", ex + "/after", "--html", html_},
                        absl::Seconds(60));
    ASSERT_THAT(r, IsOk());
    ASSERT_EQ(r->exit_code, 0) << r->err;
  }

  // Chromium headless with a profile of its own, killed (with its children)
  // after 90 s.
  absl::StatusOr<testing::CommandResult> Chromium(std::vector<std::string> args) {
    std::vector<std::string> cmd = {"/usr/bin/timeout", "-k", "5", "90", kChromium, "--headless", "--no-sandbox",
                                    "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                                    "--user-data-dir=" + dir_.File("profile")};
    cmd.insert(cmd.end(), args.begin(), args.end());
    cmd.push_back("file://" + html_);
    return RunCommand(cmd, absl::Seconds(120), dir_.path());
  }

  TempDir dir_;
  std::string html_;
};

TEST_F(BrowserTest, ScreenshotHasThePageSizeAndChartLinesInBothColumns) {
  const std::string shot = dir_.File("shot.png");
  auto r = Chromium({"--screenshot=" + shot, absl::StrCat("--window-size=", kWidth, ",", kHeight)});
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->exit_code, 0) << r->err;
  const std::string png = Slurp(shot);
  ASSERT_GT(png.size(), 24u) << r->err;
  // The header alone: the size asked for.
  ASSERT_EQ(png.substr(12, 4), "IHDR");
  EXPECT_EQ(BigEndian32(png, 16), static_cast<uint32_t>(kWidth));
  EXPECT_EQ(BigEndian32(png, 20), static_cast<uint32_t>(kHeight));
  absl::StatusOr<Image> img = DecodePng(png);
  ASSERT_THAT(img, IsOk());
  // Chart lines: team-a-gpu's blue and team-b-gpu's red, drawn in the
  // before (left) and the after (right) column.
  int64_t blue[2] = {0, 0}, red[2] = {0, 0}, white = 0;
  for (uint32_t y = 0; y < img->height; ++y) {
    for (uint32_t x = 0; x < img->width; ++x) {
      const uint8_t* p = img->At(x, y);
      const int half = x < img->width / 2 ? 0 : 1;
      if (Near(p, 0x1f, 0x77, 0xb4)) ++blue[half];
      if (Near(p, 0xd6, 0x27, 0x28)) ++red[half];
      if (p[0] > 245 && p[1] > 245 && p[2] > 245) ++white;
    }
  }
  for (int half = 0; half < 2; ++half) {
    EXPECT_GT(blue[half], 2000) << "team-a-gpu's line, column " << half;
    EXPECT_GT(red[half], 2000) << "team-b-gpu's line, column " << half;
  }
  // Not a blank page: text, tables and charts cover part of it.
  EXPECT_LT(white, int64_t{kWidth} * kHeight * 97 / 100);
  if (const char* keep = std::getenv("GK_KEEP_SCREENSHOT"); keep != nullptr && *keep != '\0') {
    std::ofstream(keep, std::ios::binary) << png;
  }
}

TEST_F(BrowserTest, RenderedDomHasEveryChartWithData) {
  auto r = Chromium({"--dump-dom"});
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->exit_code, 0) << r->err;
  const std::string& dom = r->out;
  ASSERT_THAT(dom, ::testing::HasSubstr("gangkeeper simulate: before and after"));
  // Two ClusterQueues x before/after, and the two wait distributions.
  const std::regex svg(R"re(<svg class="chart" width="(\d+)" height="(\d+)")re");
  int charts = 0;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), svg); it != std::sregex_iterator(); ++it) {
    ++charts;
    EXPECT_EQ((*it)[1], "660");
  }
  EXPECT_EQ(charts, 6);
  // Every line has points, and inside its chart.
  const std::regex line(R"re(<polyline class="series"[^>]* points="([^"]*)")re");
  int lines = 0;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), line); it != std::sregex_iterator(); ++it) {
    ++lines;
    std::istringstream pts((*it)[1].str());
    std::string pt;
    int n = 0;
    while (pts >> pt && n < 100000) {
      ++n;
      const double x = std::stod(pt.substr(0, pt.find(','))), y = std::stod(pt.substr(pt.find(',') + 1));
      EXPECT_GE(x, 0);
      EXPECT_LE(x, 660);
      EXPECT_GE(y, 0);
      EXPECT_LE(y, 300);
    }
    EXPECT_GE(n, 4);
  }
  EXPECT_EQ(lines, 4 + 2 * 4);  // 4 utilization lines, 4 classes in each distribution
  // The verdict is on the page.
  EXPECT_THAT(dom, ::testing::HasSubstr("mean wait drops from 18 min to 2.9 min"));
}

}  // namespace
}  // namespace gangkeeper
