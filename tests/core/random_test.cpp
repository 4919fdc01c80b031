#include <gtest/gtest.h>

#include <cmath>

#include "tandem/tandem.h"

namespace tandem {
namespace {

TEST(Philox, MatchesTheReferenceKnownAnswer) {
  // Known-answer vectors of Philox-4x32-10 from the Random123 distribution (kat_vectors).
  EXPECT_EQ(philox4x32(0, 0, 0), (std::array<std::uint32_t, 4>{0x6627e8d5, 0xe169c58d,
                                                                  0xbc57ac4c, 0x9b00dbd8}));
  const std::uint64_t ones = ~std::uint64_t{0};
  EXPECT_EQ(philox4x32(ones, ones, ones), (std::array<std::uint32_t, 4>{0x408f276d, 0x41c83b0e,
                                                                           0xa20bc7c6, 0x6d5451fd}));
}

TEST(Random, SameSeedSameValuesDifferentSeedDifferent) {
  Generator a(7), b(7), c(8);
  const auto x = random_uniform({1000}, 0, 1, DType::f32, a).to_vector<float>();
  const auto y = random_uniform({1000}, 0, 1, DType::f32, b).to_vector<float>();
  const auto z = random_uniform({1000}, 0, 1, DType::f32, c).to_vector<float>();
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  // Draws advance the stream: the next draw differs.
  EXPECT_NE(random_uniform({1000}, 0, 1, DType::f32, a).to_vector<float>(), x);
}

TEST(Random, DistributionsHaveTheRightMoments) {
  Generator generator(123);
  const auto uniform = random_uniform({200000}, -1, 3, DType::f64, generator).to_vector<double>();
  double sum = 0;
  for (double v : uniform) {
    ASSERT_GE(v, -1);
    ASSERT_LT(v, 3);
    sum += v;
  }
  EXPECT_NEAR(sum / uniform.size(), 1.0, 0.02);

  const auto normal = random_normal({200000}, 2, 0.5, DType::f64, generator).to_vector<double>();
  double mean = 0, variance = 0;
  for (double v : normal) mean += v;
  mean /= normal.size();
  for (double v : normal) variance += (v - mean) * (v - mean);
  variance /= normal.size();
  EXPECT_NEAR(mean, 2.0, 0.01);
  EXPECT_NEAR(std::sqrt(variance), 0.5, 0.01);

  const auto truncated = truncated_normal({50000}, 0, 1, DType::f64, generator).to_vector<double>();
  for (double v : truncated) ASSERT_LE(std::abs(v), 2.0);
}

TEST(Random, ManualSeedResetsTheDefaultGenerator) {
  manual_seed(99);
  const auto first = random_normal({16}, 0, 1).to_vector<float>();
  manual_seed(99);
  EXPECT_EQ(random_normal({16}, 0, 1).to_vector<float>(), first);
  EXPECT_THROW(random_uniform({2}, 0, 1, DType::i32), InvalidArgument);
}

}  // namespace
}  // namespace tandem
