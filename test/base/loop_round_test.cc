// gangkeeper: base::LoopRound — a thread's round is the one installed last
// and only while its ScopedRound lives.
#include "gangkeeper/base/loop_round.h"

#include <thread>

#include "gtest/gtest.h"

namespace gangkeeper::base {
namespace {

class CountingRound final : public LoopRound {
 public:
  void AtEnd(absl::AnyInvocable<void() &&> fn) override {
    std::move(fn)();
  }
};

TEST(LoopRoundTest, AThreadHasTheRoundItInstalledLastAndOnlyWhileItIsInstalled) {
  EXPECT_EQ(LoopRound::Current(), nullptr);
  CountingRound outer;
  CountingRound inner;
  {
    const ScopedRound a(&outer);
    EXPECT_EQ(LoopRound::Current(), &outer);
    {
      const ScopedRound b(&inner);
      EXPECT_EQ(LoopRound::Current(), &inner);
      LoopRound* elsewhere = &outer;
      std::thread([&] { elsewhere = LoopRound::Current(); }).join();
      EXPECT_EQ(elsewhere, nullptr);  // per thread
    }
    EXPECT_EQ(LoopRound::Current(), &outer);
  }
  EXPECT_EQ(LoopRound::Current(), nullptr);
}

}  // namespace
}  // namespace gangkeeper::base
