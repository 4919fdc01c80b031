#include <gtest/gtest.h>

#include <cmath>

#include "ops/gradient_check.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::expect_gradients_match;
using testing::random_extent;
using testing::random_tensor;

// Reference statistics and normalisation written from the definition, in double: x (M, C) rows.
struct Reference {
  std::vector<double> mean, variance, y;
};

Reference reference_batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                               double epsilon) {
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<double> g = gamma.to_vector<double>();
  const std::vector<double> b = beta.to_vector<double>();
  const std::size_t channels = g.size();
  const std::size_t rows = xv.size() / channels;
  Reference r{std::vector<double>(channels), std::vector<double>(channels), xv};
  for (std::size_t c = 0; c < channels; ++c) {
    double total = 0;
    for (std::size_t i = 0; i < rows; ++i)
      total += xv[i * channels + c];
    r.mean[c] = total / static_cast<double>(rows);
    double squares = 0;
    for (std::size_t i = 0; i < rows; ++i)
      squares += std::pow(xv[i * channels + c] - r.mean[c], 2);
    r.variance[c] = squares / static_cast<double>(rows);
    for (std::size_t i = 0; i < rows; ++i) {
      r.y[i * channels + c] =
          g[c] * (xv[i * channels + c] - r.mean[c]) / std::sqrt(r.variance[c] + epsilon) + b[c];
    }
  }
  return r;
}

Shape random_nhwc(std::int64_t channels) {
  return {random_extent(1, 4), random_extent(1, 5), random_extent(1, 5), channels};
}

TEST(BatchNorm, HandDerivedValues) {
  // One channel, x = [1, 3]: mean 2, biased variance 1, so y = gamma (x - 2) / sqrt(1 + eps) +
  // beta.
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = cast(Tensor::from_vector<double>({1, 3}, {2, 1}), dtype);
    const Tensor gamma = cast(Tensor::from_vector<double>({2}, {1}), dtype);
    const Tensor beta = cast(Tensor::from_vector<double>({0.5}, {1}), dtype);
    const double epsilon = 1e-3;
    const auto result = batch_norm_training(x, gamma, beta, epsilon);
    const double scale = 2 / std::sqrt(1 + epsilon);
    expect_close(result.y, Tensor::from_vector<double>({0.5 - scale, 0.5 + scale}, {2, 1}), 1e-6);
    expect_close(result.mean, Tensor::from_vector<double>({2}, {1}), 1e-7);
    expect_close(result.variance, Tensor::from_vector<double>({1}, {1}), 1e-7);
    // Inference with given statistics mean 1, variance 4: y = 2 (x - 1) / sqrt(4 + eps) + 0.5.
    const Tensor y =
        batch_norm_inference(x, gamma, beta, cast(Tensor::from_vector<double>({1}, {1}), dtype),
                             cast(Tensor::from_vector<double>({4}, {1}), dtype), epsilon);
    expect_close(y, Tensor::from_vector<double>({0.5, 0.5 + 4 / std::sqrt(4 + epsilon)}, {2, 1}),
                 1e-6);
  }
}

// oneDNN (f32) and the loops (f64) against the definition, in training and in inference.
TEST(BatchNorm, ForwardMatchesTheDefinition) {
  for (int trial = 0; trial < 4; ++trial) {
    const std::int64_t channels = random_extent(1, 40);
    const Shape shape = trial % 2 ? random_nhwc(channels) : Shape{random_extent(1, 200), channels};
    SCOPED_TRACE(shape_str(shape));
    const Tensor x = random_tensor(shape, -3, 5, 0);
    const Tensor gamma = random_tensor({channels}, 0.5, 2);
    const Tensor beta = random_tensor({channels});
    const double epsilon = 1e-3;
    const Reference r = reference_batch_norm(x, gamma, beta, epsilon);
    for (DType dtype : {DType::f64, DType::f32}) {
      const auto result =
          batch_norm_training(cast(x, dtype), cast(gamma, dtype), cast(beta, dtype), epsilon);
      const double tolerance = dtype == DType::f64 ? 1e-12 : 2e-5;
      expect_close(result.y, Tensor::from_vector(r.y, shape), tolerance, "y");
      expect_close(result.mean, Tensor::from_vector(r.mean, {channels}), tolerance, "mean");
      expect_close(result.variance, Tensor::from_vector(r.variance, {channels}), tolerance,
                   "variance");
      // Inference with the batch's own statistics reproduces the training output.
      const Tensor y = batch_norm_inference(cast(x, dtype), cast(gamma, dtype), cast(beta, dtype),
                                            result.mean, result.variance, epsilon);
      expect_close(y, result.y, tolerance, "inference");
    }
  }
}

// The backward kernels of both paths agree, and the f64 path agrees with finite differences
// (below).
TEST(BatchNorm, BackwardOneDnnMatchesLoops) {
  for (bool training : {true, false}) {
    const std::int64_t channels = random_extent(1, 33);
    const Shape shape = random_nhwc(channels);
    SCOPED_TRACE(shape_str(shape) + (training ? " training" : " inference"));
    const Tensor dy = random_tensor(shape, -1, 1, 0);
    const Tensor x = random_tensor(shape, -2, 3, 0);
    const Tensor gamma = random_tensor({channels}, 0.5, 2);
    const Tensor mean = random_tensor({channels}, -0.5, 0.5, 0);
    const Tensor variance = random_tensor({channels}, 0.5, 2);
    const auto reference = batch_norm_backward(dy, x, gamma, mean, variance, 1e-3, training);
    const auto f32 = [](const Tensor& t) { return cast(t, DType::f32); };
    const auto result =
        batch_norm_backward(f32(dy), f32(x), f32(gamma), f32(mean), f32(variance), 1e-3, training);
    expect_close(result[0], reference[0], 1e-4, "dx");
    expect_close(result[1], reference[1], 1e-4, "d_gamma");
    expect_close(result[2], reference[2], 1e-4, "d_beta");
  }
}

// bf16 activations with f32 parameters (Keras' mixed_bfloat16), and all-bf16, against f32.
TEST(BatchNorm, MixedPrecision) {
  const std::int64_t channels = 8;
  const Shape shape{16, 3, 3, channels};
  const Tensor x = random_tensor(shape, -2, 2, 0, DType::f32);
  const Tensor gamma = random_tensor({channels}, 0.5, 2, 0.05, DType::f32);
  const Tensor beta = random_tensor({channels}, -1, 1, 0.05, DType::f32);
  const auto expected = batch_norm_training(x, gamma, beta, 1e-3);
  const Tensor x_bf16 = cast(x, DType::bf16);
  for (bool bf16_parameters : {false, true}) {
    const DType parameter_dtype = bf16_parameters ? DType::bf16 : DType::f32;
    const auto result = batch_norm_training(x_bf16, cast(gamma, parameter_dtype),
                                            cast(beta, parameter_dtype), 1e-3);
    EXPECT_EQ(result.y.dtype(), DType::bf16);
    EXPECT_EQ(result.mean.dtype(), parameter_dtype);
    expect_close(result.y, expected.y, 5e-2, "y");
    expect_close(result.mean, expected.mean, 2e-2, "mean");
    const auto grads = batch_norm_backward(x_bf16, x_bf16, cast(gamma, parameter_dtype),
                                           result.mean, result.variance, 1e-3, true);
    EXPECT_EQ(grads[1].dtype(), parameter_dtype);
    const auto expected_grads =
        batch_norm_backward(x, x, gamma, expected.mean, expected.variance, 1e-3, true);
    expect_close(grads[2], expected_grads[2], 0.5, "d_beta");
  }
  const Tensor f16_y = batch_norm_training(cast(x, DType::f16), gamma, beta, 1e-3).y;
  expect_close(f16_y, expected.y, 1e-2, "f16");
}

TEST(BatchNorm, TrainingGradients) {
  const std::int64_t channels = random_extent(1, 4);
  const Shape shape = random_nhwc(channels);
  const std::vector<Tensor> inputs{random_tensor(shape), random_tensor({channels}),
                                   random_tensor({channels})};
  expect_gradients_match(
      [](const auto& in) { return batch_norm_training(in[0], in[1], in[2], 1e-3).y; }, inputs,
      {1e-6, 1e-5, {}}, "y");
  // The batch statistics are differentiable outputs as well.
  expect_gradients_match(
      [](const auto& in) { return batch_norm_training(in[0], in[1], in[2], 1e-3).mean; }, inputs,
      {1e-6, 1e-6, {true, false, false}}, "mean");
  expect_gradients_match(
      [](const auto& in) { return batch_norm_training(in[0], in[1], in[2], 1e-3).variance; },
      inputs, {1e-6, 1e-6, {true, false, false}}, "variance");
  expect_gradients_match(
      [](const auto& in) {
        const auto result = batch_norm_training(in[0], in[1], in[2], 1e-3);
        return result.y * result.mean * result.variance;
      },
      inputs, {1e-6, 1e-5, {}}, "all outputs");
}

TEST(BatchNorm, InferenceGradientsIncludeTheStatistics) {
  const std::int64_t channels = random_extent(1, 4);
  const Shape shape{random_extent(1, 6), channels};
  expect_gradients_match(
      [](const auto& in) { return batch_norm_inference(in[0], in[1], in[2], in[3], in[4], 1e-3); },
      {random_tensor(shape), random_tensor({channels}), random_tensor({channels}),
       random_tensor({channels}), random_tensor({channels}, 0.5, 2)});
}

TEST(BatchNorm, Errors) {
  const Tensor x = Tensor::zeros({4, 3});
  const Tensor c3 = Tensor::ones({3});
  EXPECT_THROW(batch_norm_training(x, Tensor::ones({4}), c3, 1e-3), InvalidArgument);
  EXPECT_THROW(batch_norm_training(x, c3, c3, 0.0), InvalidArgument);
  EXPECT_THROW(batch_norm_training(Tensor::zeros({3}), c3, c3, 1e-3), InvalidArgument);
  EXPECT_THROW(batch_norm_training(Tensor::zeros({0, 3}), c3, c3, 1e-3), InvalidArgument);
  EXPECT_THROW(batch_norm_training(Tensor::zeros({4, 3}, DType::i32), c3, c3, 1e-3),
               InvalidArgument);
  EXPECT_THROW(batch_norm_training(x, Tensor::ones({3}, DType::f64), c3, 1e-3), InvalidArgument);
  EXPECT_THROW(batch_norm_training(cast(x, DType::bf16), c3, cast(c3, DType::bf16), 1e-3),
               InvalidArgument);
  EXPECT_THROW(call_op(OpKind::batch_norm, {x, c3, c3, c3}, {{"epsilon", 1e-3}}), InvalidArgument);
  EXPECT_THROW(batch_norm_inference(x, c3, c3, c3, Tensor::ones({2}), 1e-3), InvalidArgument);
  EXPECT_THROW(batch_norm_backward(Tensor::zeros({4, 2}), x, c3, c3, c3, 1e-3, true),
               InvalidArgument);
}

}  // namespace
}  // namespace tandem
