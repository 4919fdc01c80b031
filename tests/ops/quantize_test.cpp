// fake_quantize against values worked by hand: ties round to even, clamping at both ends, per
// channel scales and zero points along the last axis; the straight-through gradient; and the
// refusals that name what is wrong. quantized_conv2d and quantized_matmul against fake_quantize's
// simulation of them, and their refusals. (The op harness runs them on every backend and traced.)
#include <gtest/gtest.h>

#include <cmath>

#include "support/errors.h"
#include "support/thread_count.h"
#include "tandem/autodiff.h"
#include "tandem/ops.h"

namespace tandem {
namespace {

using testing::error_of;

Tensor scalar_f32(float value) {
  return Tensor::from_vector<float>({value}, {});
}

TEST(FakeQuantize, RoundsTiesToEvenAndClampsToTheIntegerRange) {
  // scale 0.5: x / scale = 0.5, 1.5, 2.5, -0.5, -1.5 round to 0, 2, 2, -0, -2; 300 and -300 clamp.
  const Tensor x =
      Tensor::from_vector<float>({0.25f, 0.75f, 1.25f, -0.25f, -0.75f, 150.0f, -150.0f}, {7});
  const FakeQuantizeResult r = fake_quantize(x, scalar_f32(0.5f), scalar_f32(0.0f), -128, 127);
  EXPECT_EQ(r.y.to_vector<float>(),
            (std::vector<float>{0.0f, 1.0f, 1.0f, -0.0f, -1.0f, 63.5f, -64.0f}));
  EXPECT_EQ(r.in_range.to_vector<float>(), (std::vector<float>{1, 1, 1, 1, 1, 0, 0}));
}

TEST(FakeQuantize, PerChannelScalesAndZeroPointsFollowTheLastAxis) {
  // Two channels: scale 0.1 zero point 0 (range [0, 255]) and scale 1 zero point 10.
  const Tensor x = Tensor::from_vector<float>({0.34f, -12.0f, -0.2f, 3.6f, 30.0f, 250.0f}, {3, 2});
  const FakeQuantizeResult r =
      fake_quantize(x, Tensor::from_vector<float>({0.1f, 1.0f}, {2}),
                    Tensor::from_vector<float>({0.0f, 10.0f}, {2}), 0, 255);
  // 0.34 -> 3 -> 0.3 (in f32: 3 * 0.1f); -12 -> -2, clamped to 0 -> -10; -0.2 -> -2 -> 0;
  // 3.6 -> 14 -> 4; 30 -> 300 -> 255 -> 25.5; 250 -> 260, clamped to 255 -> 245.
  EXPECT_EQ(r.y.to_vector<float>(),
            (std::vector<float>{3 * 0.1f, -10.0f, 0.0f, 4.0f, 255 * 0.1f, 245.0f}));
  EXPECT_EQ(r.in_range.to_vector<float>(), (std::vector<float>{1, 0, 0, 1, 0, 0}));
}

TEST(FakeQuantize, TheGradientPassesStraightThroughWhereXWasInRange) {
  const Tensor x = Tensor::from_vector<float>({-3.0f, -0.4f, 0.0f, 0.9f, 2.0f}, {5});
  GradientTape tape;
  tape.watch(x);
  const FakeQuantizeResult r = fake_quantize(x, scalar_f32(0.25f), scalar_f32(0.0f), -4, 3);
  const Tensor weights = Tensor::from_vector<float>({1, 2, 3, 4, 5}, {5});
  const Tensor dx = tape.gradient(sum(r.y * weights), {x})[0];
  // x / 0.25 = -12, -1.6, 0, 3.6, 8 -> in range [-4, 3]: no, yes, yes, no (4), no.
  EXPECT_EQ(dx.to_vector<float>(), (std::vector<float>{0, 2, 3, 0, 0}));
}

TEST(FakeQuantize, MistakesAreNamed) {
  const Tensor x = Tensor::zeros({2, 3});
  EXPECT_NE(error_of([&] {
              fake_quantize(x, Tensor::ones({2}), Tensor::zeros({2}), -128, 127);
            }).find("one scale per element of x's last axis"),
            std::string::npos);
  const std::string zero_point_shape =
      error_of([&] { fake_quantize(x, Tensor::ones({3}), Tensor::zeros({}), -128, 127); });
  EXPECT_NE(zero_point_shape.find("zero_point () must have scale's shape (3,)"), std::string::npos)
      << zero_point_shape;
  EXPECT_NE(error_of([&] {
              fake_quantize(x, scalar_f32(1), scalar_f32(0), 5, 5);
            }).find("the integer range [5, 5] is empty"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              fake_quantize(x, Tensor::from_vector<double>({1.0}, {}), scalar_f32(0), 0, 255);
            }).find("scale is f64; quantisation parameters are f32"),
            std::string::npos);
}

// The integer products compute conv2d / matmul on the simulated values: x through fake_quantize
// with the input's scale, the weights as int8 times their channel's scale, plus the bias. Both
// sum the same exact products in f32, in different orders: close, not bit-equal.
struct IntegerOperands {
  Tensor x;             // f32
  Tensor weights;       // i8
  Tensor weight_scale;  // (C_out,)
  Tensor bias;          // (C_out,)
  Tensor simulated_weights;
};

IntegerOperands integer_operands(const Shape& x_shape, const Shape& weights_shape, double low) {
  Generator generator(11);
  const std::int64_t channels = weights_shape.back();
  std::vector<std::int8_t> values;
  for (const float value :
       random_uniform(weights_shape, -127.0, 127.0, DType::f32, generator).to_vector<float>())
    values.push_back(static_cast<std::int8_t>(std::nearbyint(value)));
  const Tensor weights = Tensor::from_vector(values, weights_shape);
  std::vector<float> scales;
  for (std::int64_t c = 0; c < channels; ++c)
    scales.push_back(0.01f / static_cast<float>(1 + c % 3));
  const Tensor weight_scale = Tensor::from_vector(scales, {channels});
  return {random_uniform(x_shape, low, 3.0, DType::f32, generator), weights, weight_scale,
          random_uniform({channels}, -1.0, 1.0, DType::f32, generator),
          cast(weights, DType::f32) * weight_scale};
}

TEST(QuantizedProducts, ComputeWhatTheSimulationDoes) {
  for (const bool is_unsigned : {true, false}) {
    const Tensor input_scale = scalar_f32(1.0f / 50);  // x up to 3 clamps at 127 (int8)
    const auto simulated_input = [&](const Tensor& x) {
      return fake_quantize(x, input_scale, scalar_f32(0.0f), is_unsigned ? 0 : -128,
                           is_unsigned ? 255 : 127)
          .y;
    };
    const double low = is_unsigned ? 0.0 : -3.0;
    const Conv2DOptions options{{2, 1}, Padding::same, {1, 1}};
    const IntegerOperands conv = integer_operands({2, 9, 7, 16}, {3, 3, 16, 24}, low);
    const Tensor expected_conv =
        conv2d(simulated_input(conv.x), conv.simulated_weights, conv.bias, options);
    const Tensor got_conv = quantized_conv2d(conv.x, {input_scale, is_unsigned}, conv.weights,
                                             conv.weight_scale, conv.bias, options);
    EXPECT_EQ(got_conv.shape(), expected_conv.shape());
    EXPECT_LE(reduce_max(abs(got_conv - expected_conv)).item(), 1e-4) << is_unsigned;

    const IntegerOperands dense = integer_operands({5, 3, 40}, {40, 12}, low);
    const Tensor expected_dense =
        matmul(simulated_input(dense.x), dense.simulated_weights, dense.bias);
    const Tensor got_dense = quantized_matmul(dense.x, {input_scale, is_unsigned}, dense.weights,
                                              dense.weight_scale, dense.bias);
    EXPECT_EQ(got_dense.shape(), (Shape{5, 3, 12}));
    EXPECT_LE(reduce_max(abs(got_dense - expected_dense)).item(), 1e-4) << is_unsigned;
  }
}

// Summed lengths at the edge of oneDNN's 64- and 128-element int8 blocks, on 8 threads whatever
// the CPU has: its AMX int8 product got K = 125-127 wrong, or ran an illegal instruction, from
// two threads on; onednn_matmul_extents pads K to a multiple of 64 there (bench/RESULTS.md,
// 2026-12-04 evening).
TEST(QuantizedProducts, SummedLengthsAtTheBlockEdgesComputeWhatTheSimulationDoes) {
  const testing::ScopedThreadCount eight_threads(8);
  const Tensor input_scale = scalar_f32(1.0f / 50);
  for (const std::int64_t rows : {38, 150, 259}) {
    for (const std::int64_t k : {64, 125, 126, 127, 128}) {
      for (const std::int64_t n : {47, 85, 198}) {
        const IntegerOperands dense = integer_operands({rows, k}, {k, n}, 0.0);
        const Tensor expected =
            matmul(fake_quantize(dense.x, input_scale, scalar_f32(0.0f), 0, 255).y,
                   dense.simulated_weights, dense.bias);
        const Tensor got = quantized_matmul(dense.x, {input_scale, true}, dense.weights,
                                            dense.weight_scale, dense.bias);
        EXPECT_LE(reduce_max(abs(got - expected)).item(), 1e-3)
            << "rows " << rows << ", K " << k << ", N " << n;
      }
    }
  }
}

TEST(QuantizedProducts, MistakesAreNamed) {
  const IntegerOperands conv = integer_operands({1, 5, 5, 4}, {3, 3, 4, 8}, 0.0);
  const QuantizedInput input{scalar_f32(0.1f), true};
  EXPECT_NE(error_of([&] {
              quantized_conv2d(conv.x, input, cast(conv.weights, DType::f32), conv.weight_scale,
                               conv.bias);
            }).find("give int8 weights"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              quantized_conv2d(conv.x, {Tensor::from_vector<float>({0.1f, 0.2f}, {2}), true},
                               conv.weights, conv.weight_scale, conv.bias);
            }).find("give one f32 scale (a scalar)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              quantized_conv2d(conv.x, input, conv.weights, conv.weight_scale, Tensor::zeros({7}));
            }).find("bias is f32 (7,); give f32 values, one per output channel: (8,)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              quantized_matmul(Tensor::zeros({2, 5}), input, cast(Tensor::zeros({4, 8}), DType::i8),
                               conv.weight_scale, conv.bias);
            }).find("do not multiply"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
