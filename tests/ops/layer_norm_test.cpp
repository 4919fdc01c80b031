#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/gradient_check.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::random_extent;
using testing::random_tensor;

// Row [1, 2, 3, 6]: mean 3, variance 3.5.
TEST(LayerNorm, HandDerivedRow) {
  const Tensor x = Tensor::from_vector<double>({1, 2, 3, 6}, {1, 4});
  const Tensor gamma = Tensor::from_vector<double>({1, 2, 1, 1}, {4});
  const Tensor beta = Tensor::from_vector<double>({0, 0, 1, 0}, {4});
  const LayerNormResult result = layer_norm(x, gamma, beta, 1e-3);
  const double rstd = 1.0 / std::sqrt(3.5 + 1e-3);
  expect_close(result.y, Tensor::from_vector<double>({-2 * rstd, -2 * rstd, 1, 3 * rstd}, {1, 4}),
               1e-12);
  expect_close(result.mean, Tensor::from_vector<double>({3}, {1}), 1e-12);
  expect_close(result.rstd, Tensor::from_vector<double>({rstd}, {1}), 1e-12);
}

// Every dtype against the definition computed in double, over the last axis of a rank-3 x.
TEST(LayerNorm, MatchesTheDefinition) {
  const Shape shape{random_extent(1, 3), random_extent(1, 5), random_extent(2, 40)};
  const std::int64_t features = shape.back();
  const Tensor x = random_tensor(shape, -3, 3, 0);
  const Tensor gamma = random_tensor({features});
  const Tensor beta = random_tensor({features});
  const Tensor centered = x - mean(x, {-1}, true);
  const Tensor expected =
      centered * rsqrt(mean(square(centered), {-1}, true) + 1e-5) * gamma + beta;
  for (DType dtype : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dtype));
    // Half-precision x keeps f32 parameters, as a mixed-precision layer does.
    const DType param_dtype = dtype == DType::f64 ? DType::f64 : DType::f32;
    const LayerNormResult result =
        layer_norm(cast(x, dtype), cast(gamma, param_dtype), cast(beta, param_dtype), 1e-5);
    EXPECT_EQ(result.y.dtype(), dtype);
    EXPECT_EQ(result.mean.dtype(), param_dtype);
    EXPECT_EQ(result.mean.shape(), (Shape{shape[0], shape[1]}));
    const double tolerance = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-5 : 5e-2;
    expect_close(result.y, expected, tolerance);
  }
}

TEST(LayerNorm, BackwardMatchesTheGradientOfItsDefinition) {
  const std::int64_t features = random_extent(2, 9);
  const Tensor x = random_tensor({random_extent(1, 6), features});
  const Tensor gamma = random_tensor({features});
  const Tensor beta = random_tensor({features});
  const Tensor dy = random_tensor(x.shape());
  const LayerNormResult forward = layer_norm(x, gamma, beta, 1e-3);
  const std::vector<Tensor> grads = layer_norm_backward(dy, x, gamma, forward.mean, forward.rstd);
  std::vector<Tensor> expected;
  {
    GradientTape tape;
    tape.watch(x);
    tape.watch(gamma);
    tape.watch(beta);
    const Tensor centered = x - mean(x, {-1}, true);
    const Tensor y = centered * rsqrt(mean(square(centered), {-1}, true) + 1e-3) * gamma + beta;
    expected = tape.gradient(sum(y * dy), {x, gamma, beta});
  }
  for (std::size_t i = 0; i < 3; ++i)
    expect_close(grads[i], expected[i], 1e-10);
}

TEST(LayerNorm, RejectsMismatchedParameters) {
  const Tensor x = Tensor::zeros({2, 4});
  EXPECT_THROW(layer_norm(x, Tensor::ones({3}), Tensor::zeros({4}), 1e-3), InvalidArgument);
  EXPECT_THROW(layer_norm(x, Tensor::ones({4}), Tensor::zeros({4}, DType::f64), 1e-3),
               InvalidArgument);
  EXPECT_THROW(layer_norm(x, Tensor::ones({4}), Tensor::zeros({4}), 0.0), InvalidArgument);
  EXPECT_THROW(
      layer_norm(Tensor::zeros({2, 4}, DType::i32), Tensor::ones({4}), Tensor::zeros({4}), 1e-3),
      InvalidArgument);
  // f32 parameters are fine for bf16 x, but not f64 ones.
  EXPECT_NO_THROW(layer_norm(cast(x, DType::bf16), Tensor::ones({4}), Tensor::zeros({4}), 1e-3));
  EXPECT_THROW(layer_norm(cast(x, DType::bf16), Tensor::ones({4}, DType::f64),
                          Tensor::zeros({4}, DType::f64), 1e-3),
               InvalidArgument);
}

}  // namespace
}  // namespace tandem
