// train::find_max_batch: the search behind `tandem train --find-max-batch`.
#include <gtest/gtest.h>

#include <sstream>

#include "tandem/error.h"
#include "tandem/train.h"

namespace tandem::testing {
namespace {

// The search against a device that fits `limit` examples: from below, from above, capped.
TEST(FindMaxBatch, FindsTheLargestThatFits) {
  for (const std::int64_t limit : {1, 77, 100, 1000}) {
    for (const std::int64_t first : {1, 32, 200}) {
      int trials = 0;
      const auto fits = [&](std::int64_t batch) {
        ++trials;
        return batch <= limit;
      };
      EXPECT_EQ(train::find_max_batch(first, 5000, fits, nullptr), limit)
          << "limit " << limit << ", first " << first;
      EXPECT_LE(trials, 30);
    }
  }
  std::ostringstream log;
  EXPECT_EQ(train::find_max_batch(
                32, 50, [](std::int64_t) { return true; }, &log),
            50);
  EXPECT_NE(log.str().find("batch size 50: fits"), std::string::npos) << log.str();
  EXPECT_THROW(train::find_max_batch(
                   8, 100, [](std::int64_t) { return false; }, nullptr),
               Error);
}

}  // namespace
}  // namespace tandem::testing
