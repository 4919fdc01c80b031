#include <gtest/gtest.h>

#include <cmath>

#include "ops/gradient_check.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::expect_gradients_match;
using testing::random_extent;
using testing::random_tensor;

// softmax([1, 2, 3]) = exp(x - 3) / sum: [0.09003057317038046, 0.24472847105479767,
// 0.6652409557748219]; log_softmax = x - log(e + e^2 + e^3) = x - 3.40760596444438.
TEST(Softmax, HandDerivedValues) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tolerance = dtype == DType::f64 ? 1e-15 : dtype == DType::f32 ? 1e-5 : 1e-2;
    const Tensor x = cast(Tensor::from_vector<double>({1, 2, 3}, {1, 3}), dtype);
    expect_close(softmax(x),
                 Tensor::from_vector<double>(
                     {0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, {1, 3}),
                 tolerance);
    expect_close(log_softmax(x),
                 Tensor::from_vector<double>(
                     {-2.40760596444438, -1.40760596444438, -0.40760596444438}, {1, 3}),
                 tolerance);
  }
}

// Large logits would overflow exp without the shift by the maximum.
TEST(Softmax, StableForLargeLogits) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor shifted =
        cast(Tensor::from_vector<double>({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3}), dtype);
    const Tensor base = cast(Tensor::from_vector<double>({0, 1, 2, 0, -1, -2}, {2, 3}), dtype);
    expect_close(softmax(shifted), softmax(base), 1e-6);
    expect_close(log_softmax(shifted), log_softmax(base), 1e-6);
  }
}

// Reference along any axis, written from the definition in double.
Tensor reference_softmax(const Tensor& x, std::int64_t axis, bool log_output) {
  const Shape& shape = x.shape();
  const std::vector<double> v = x.to_vector<double>();
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  for (std::size_t i = axis + 1; i < shape.size(); ++i)
    inner *= shape[i];
  const std::int64_t length = shape[axis];
  std::vector<double> out(v.size());
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t j = 0; j < inner; ++j) {
      const auto at = [&](std::int64_t l) { return (o * length + l) * inner + j; };
      double total = 0;
      for (std::int64_t l = 0; l < length; ++l)
        total += std::exp(v[at(l)]);
      for (std::int64_t l = 0; l < length; ++l) {
        out[at(l)] = log_output ? v[at(l)] - std::log(total) : std::exp(v[at(l)]) / total;
      }
    }
  }
  return Tensor::from_vector(out, shape);
}

TEST(Softmax, EveryAxisMatchesTheDefinition) {
  for (int trial = 0; trial < 3; ++trial) {
    const Shape shape{random_extent(1, 7), random_extent(1, 9), random_extent(1, 40)};
    const Tensor x = random_tensor(shape, -4, 4, 0);
    for (std::int64_t axis = 0; axis < 3; ++axis) {
      SCOPED_TRACE(shape_str(shape) + " axis " + std::to_string(axis));
      for (bool log_output : {false, true}) {
        const Tensor expected = reference_softmax(x, axis, log_output);
        const auto fn = log_output ? log_softmax : softmax;
        expect_close(fn(x, axis), expected, 1e-12, "f64");
        expect_close(fn(cast(x, DType::f32), axis), expected, 1e-5, "f32");
        expect_close(fn(cast(x, DType::f32), axis - 3), expected, 1e-5, "negative axis");
      }
    }
  }
}

// The backward kernels of oneDNN (f32) and the loops (f64) against dx written out in double.
TEST(Softmax, BackwardMatchesTheDefinition) {
  const Shape shape{random_extent(1, 6), random_extent(2, 30), random_extent(1, 5)};
  const Tensor x = random_tensor(shape, -3, 3, 0);
  const Tensor dy = random_tensor(shape, -1, 1, 0);
  for (std::int64_t axis : {1, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const Tensor y = softmax(x, axis);
    const Tensor log_y = log_softmax(x, axis);
    // softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - softmax sum(dy).
    const Tensor expected = y * (dy - sum(dy * y, {axis}, true));
    const Tensor expected_log = dy - y * sum(dy, {axis}, true);
    const auto f32 = [](const Tensor& t) { return cast(t, DType::f32); };
    expect_close(softmax_backward(dy, y, axis), expected, 1e-12, "f64");
    expect_close(softmax_backward(f32(dy), f32(y), axis), expected, 1e-5, "f32");
    expect_close(log_softmax_backward(dy, log_y, axis), expected_log, 1e-12, "log f64");
    expect_close(log_softmax_backward(f32(dy), f32(log_y), axis), expected_log, 1e-5, "log f32");
  }
}

TEST(Softmax, Gradients) {
  const Shape shape{random_extent(1, 3), random_extent(2, 4), random_extent(1, 3)};
  for (std::int64_t axis : {0, 1, -1}) {
    expect_gradients_match([axis](const auto& in) { return softmax(in[0], axis); },
                           {random_tensor(shape)}, {}, "softmax");
    expect_gradients_match([axis](const auto& in) { return log_softmax(in[0], axis); },
                           {random_tensor(shape)}, {}, "log_softmax");
  }
}

// The backward ops have gradient rules of their own (second-order gradients).
TEST(Softmax, BackwardGradients) {
  const Shape shape{random_extent(1, 3), random_extent(2, 5)};
  for (std::int64_t axis : {0, 1}) {
    const Tensor x = random_tensor(shape);
    expect_gradients_match([axis](const auto& in) { return softmax_backward(in[0], in[1], axis); },
                           {random_tensor(shape), softmax(x, axis)}, {}, "softmax_backward");
    expect_gradients_match(
        [axis](const auto& in) { return log_softmax_backward(in[0], in[1], axis); },
        {random_tensor(shape), log_softmax(x, axis)}, {}, "log_softmax_backward");
  }
  // Through the tape twice: the Hessian-vector product of sum(softmax(x) * w).
  const Tensor w = random_tensor(shape);
  expect_gradients_match(
      [w](const auto& in) {
        GradientTape tape;
        tape.watch(in[0]);
        const Tensor loss = sum(softmax(in[0]) * w);
        return tape.gradient(loss, {in[0]})[0];
      },
      {random_tensor(shape)}, {}, "second order");
}

TEST(Softmax, Errors) {
  EXPECT_THROW(softmax(Tensor::zeros({2, 3}), 2), InvalidArgument);
  EXPECT_THROW(log_softmax(Tensor::zeros({2, 3}), -3), InvalidArgument);
  EXPECT_THROW(softmax(Tensor::zeros({2, 3}, DType::i32)), InvalidArgument);
  EXPECT_THROW(softmax_backward(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})), InvalidArgument);
  EXPECT_THROW(softmax_backward(Tensor::zeros({2, 3}), Tensor::zeros({2, 3}, DType::f64)),
               InvalidArgument);
}

}  // namespace
}  // namespace tandem
