// gangkeeper: the long run of the generative invariant check
// (test/broker/invariant_run.h): many seeds, long streams. Prints what it
// covered; a failing seed prints its shrunk reproduction and exits 1.
//
//   gangkeeper_invariants_bench [--seeds=N] [--ops=N] [--from=SEED] [--guard=on|off]
//   gangkeeper_invariants_bench --repro=SEED [--ops=N] [--guard=on|off]
//     (with GK_INVARIANT_TRACE=1: every state change of the shrunk run)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "gangkeeper/base/clock.h"
#include "test/broker/invariant_run.h"

namespace {

using namespace gangkeeper::broker::invariants;  // NOLINT

bool Flag(const std::string& arg, const char* name, uint64_t* out) {
  const std::string prefix = std::string("--") + name + "=";
  if (!absl::StartsWith(arg, prefix)) return false;
  if (!absl::SimpleAtoi(arg.substr(prefix.size()), out)) {
    std::fprintf(stderr, "invariants_bench: %s wants a number\n", arg.c_str());
    std::exit(2);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seeds = 2000, ops = 1000, from = 1, repro = 0;
  bool guard = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (Flag(a, "seeds", &seeds) || Flag(a, "ops", &ops) || Flag(a, "from", &from) || Flag(a, "repro", &repro)) continue;
    if (a == "--guard=on" || a == "--guard=off") {
      guard = a == "--guard=on";
      continue;
    }
    std::fprintf(stderr,
                 "usage: gangkeeper_invariants_bench [--seeds=N] [--ops=N] [--from=SEED] [--guard=on|off] "
                 "[--repro=SEED]\n");
    return 2;
  }
  if (repro != 0) {
    const World world = MakeWorld(repro);
    std::vector<Op> shrunk = Shrink(world, MakeOps(repro, static_cast<int>(ops)), guard, absl::Seconds(60));
    SetTrace(std::getenv("GK_INVARIANT_TRACE") != nullptr);
    const Result r = Run(world, shrunk, guard);
    SetTrace(false);
    std::printf("%s\n%s\n", r.failure.c_str(), Reproduce(world, shrunk, guard, absl::Seconds(1)).c_str());
    return 0;
  }
  Figures all;
  const gangkeeper::base::Stopwatch watch;
  for (uint64_t seed = from; seed < from + seeds; ++seed) {
    const World world = MakeWorld(seed);
    const std::vector<Op> stream = MakeOps(seed, static_cast<int>(ops));
    const Result r = Run(world, stream, guard);
    all.Add(r.figures);
    if (!r.ok) {
      std::printf("seed %llu: %s\n%s\n", static_cast<unsigned long long>(seed), r.failure.c_str(),
                  Reproduce(world, stream, guard, absl::Seconds(60)).c_str());
      return 1;
    }
  }
  std::printf("%llu seeds x %llu operations, anti-churn rule %s, %.1f s: %s\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(ops), guard ? "on" : "off",
              absl::ToDoubleSeconds(watch.Elapsed()), all.ToString().c_str());
  return 0;
}
