#include <gtest/gtest.h>

#include <cmath>

#include "ops/gradient_check.h"

namespace tandem {
namespace {

using testing::expect_gradients_match;
using testing::random_extent;
using testing::random_tensor;

TEST(Dropout, KeepFractionWithinStatisticalBounds) {
  const std::int64_t count = 200000;
  const Tensor x = Tensor::ones({count});
  Generator generator(7);
  for (double rate : {0.1, 0.5, 0.8}) {
    const auto result = dropout(x, rate, generator);
    const std::vector<float> mask = result.mask.to_vector<float>();
    const float kept_value = static_cast<float>(1.0 / (1.0 - rate));
    std::int64_t kept = 0;
    for (float value : mask) {
      ASSERT_TRUE(value == 0.0f || value == kept_value) << value;
      kept += value != 0.0f;
    }
    // Binomial(count, 1 - rate): 6 standard deviations fail a correct kernel ~1e-9 of the time.
    const double expected = static_cast<double>(count) * (1 - rate);
    const double sigma = std::sqrt(static_cast<double>(count) * rate * (1 - rate));
    EXPECT_NEAR(static_cast<double>(kept), expected, 6 * sigma) << "rate " << rate;
    // E[y] = x: the scaling keeps the expected sum.
    EXPECT_NEAR(sum(result.y).item(), static_cast<double>(count), 6 * sigma * kept_value);
  }
}

// Element i is kept iff uniform_from_bits(philox_word(seed, offset, i)) >= rate, with offset
// where the generator stood; y = x * mask.
TEST(Dropout, FollowsTheDocumentedStream) {
  const double rate = 0.3;
  const Shape shape{5, 37};
  const Tensor x = random_tensor(shape, -2, 2, 0.05, DType::f32);
  Generator generator(99);
  generator.set_state(99, 6);  // an offset inside a Philox block
  const auto result = dropout(x, rate, generator);
  EXPECT_EQ(generator.offset(), 6 + (185 + 3) / 4 * 4);
  const std::vector<float> xv = x.to_vector<float>();
  const std::vector<float> y = result.y.to_vector<float>();
  const std::vector<float> mask = result.mask.to_vector<float>();
  const auto scale = static_cast<float>(1 / (1 - rate));
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const bool keep = uniform_from_bits(philox_word(99, 6, i)) >= rate;
    ASSERT_EQ(mask[i], keep ? scale : 0.0f) << "element " << i;
    ASSERT_EQ(y[i], xv[i] * mask[i]) << "element " << i;
  }
}

TEST(Dropout, ReproducibleForEqualSeedsAndThreadCounts) {
  const Tensor x = random_tensor({300, 400}, -1, 1, 0.05, DType::f32);
  Generator first(5);
  Generator second(5);
  const auto a = dropout(x, 0.5, first);
  const auto b = dropout(x, 0.5, second);
  EXPECT_EQ(a.y.to_vector<float>(), b.y.to_vector<float>());
  // The next draw continues the stream, so it differs from the first one.
  const auto next = dropout(x, 0.5, first);
  EXPECT_NE(next.mask.to_vector<float>(), a.mask.to_vector<float>());
  // One thread or all of them: the same mask.
  const int threads = thread_setting();
  set_num_threads(1);
  Generator serial(5);
  const auto single = dropout(x, 0.5, serial);
  set_num_threads(threads);
  EXPECT_EQ(single.mask.to_vector<float>(), a.mask.to_vector<float>());
}

TEST(Dropout, RateZeroIsIdentity) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    const Tensor x = random_tensor({3, 50}, -3, 3, 0, dtype);
    const auto result = dropout(x, 0.0);
    EXPECT_EQ(result.y.to_vector<double>(), x.to_vector<double>()) << dtype_name(dtype);
    EXPECT_EQ(result.y.dtype(), dtype);
    EXPECT_EQ(result.mask.dtype(), dtype);
  }
}

TEST(Dropout, Gradient) {
  // A fresh generator per evaluation keeps the mask fixed across finite differences.
  expect_gradients_match(
      [](const auto& in) {
        Generator generator(1234);
        return dropout(in[0], 0.4, generator).y;
      },
      {random_tensor({random_extent(1, 4), random_extent(2, 9)})});
  // The gradient is dy * mask exactly.
  const Tensor x = random_tensor({4, 5});
  GradientTape tape;
  tape.watch(x);
  const auto result = dropout(x, 0.5);
  const Tensor dy = random_tensor({4, 5});
  EXPECT_EQ(tape.gradient(result.y, {x}, dy)[0].to_vector<double>(),
            (dy * result.mask).to_vector<double>());
}

TEST(Dropout, RateOutsideTheRangeIsAnErrorAndDrawsNothing) {
  Generator generator(3);
  for (double rate : {-0.1, 1.0, 1.5, std::nan("")}) {
    EXPECT_THROW(dropout(Tensor::ones({4}), rate, generator), InvalidArgument) << rate;
  }
  EXPECT_EQ(generator.offset(), 0u);
  EXPECT_THROW(dropout(Tensor::ones({4}, DType::i32), 0.5, generator), InvalidArgument);
}

}  // namespace
}  // namespace tandem
