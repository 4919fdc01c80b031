// GradientTape's on_ready hook: every source reported once, as soon as the reverse pass has
// finished it, with the gradient gradient() returns.
#include <gtest/gtest.h>

#include "tandem/autodiff.h"
#include "tandem/ops.h"

namespace tandem::testing {
namespace {

TEST(GradientReady, ReportsEachSourceOnceAsSoonAsItIsFinal) {
  Tensor w1 = Tensor::from_vector<float>({0.5f, -1.0f, 2.0f, 0.25f}, {2, 2});
  Tensor w2 = Tensor::from_vector<float>({1.0f, 3.0f}, {2, 1});
  Tensor unused = Tensor::ones({2});
  for (Tensor* w : {&w1, &w2, &unused})
    w->set_variable(true);
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});

  GradientTape tape;
  const Tensor hidden = relu(matmul(x, w1));  // (2, 2)
  const Tensor loss = sum(matmul(hidden, w2) * 2.0);
  std::vector<std::size_t> order;
  std::vector<Tensor> reported(3);
  const std::vector<Tensor> gradients = tape.gradient(
      loss, {w1, w2, unused}, {}, false, [&](std::size_t index, const Tensor& gradient) {
        order.push_back(index);
        reported[index] = gradient;
      });
  // w2 is read by a later op than w1, so the reverse pass finishes it first (before it has
  // computed w1's gradient); the source no op reads comes last, without a gradient.
  EXPECT_EQ(order, (std::vector<std::size_t>{1, 0, 2}));
  EXPECT_EQ(reported[0].raw_data(), gradients[0].raw_data());
  EXPECT_EQ(reported[1].raw_data(), gradients[1].raw_data());
  EXPECT_FALSE(reported[2].defined());
  EXPECT_FALSE(gradients[2].defined());
  // hidden = relu(x @ w1) = [[4.5, 0], [9.5, 0]]; d loss / d w2 = 2 * column sums of hidden.
  EXPECT_EQ(gradients[1].to_vector<float>(), (std::vector<float>{28, 0}));
}

TEST(GradientReady, UnconnectedZeroSourcesAreReportedAsZeros) {
  Tensor w = Tensor::ones({3});
  Tensor other = Tensor::ones({2});
  w.set_variable(true);
  other.set_variable(true);
  GradientTape tape;
  const Tensor loss = sum(w * w);
  std::vector<Tensor> reported(2);
  tape.gradient(loss, {w, other}, {}, /*unconnected_zero=*/true,
                [&](std::size_t index, const Tensor& gradient) { reported[index] = gradient; });
  EXPECT_EQ(reported[0].to_vector<float>(), (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(reported[1].to_vector<float>(), (std::vector<float>{0, 0}));
}

}  // namespace
}  // namespace tandem::testing
