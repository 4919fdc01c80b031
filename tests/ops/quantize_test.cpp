// fake_quantize against values worked by hand: ties round to even, clamping at both ends, per
// channel scales and zero points along the last axis; the straight-through gradient; and the
// refusals that name what is wrong. (The op harness runs it on every backend and traced.)
#include <gtest/gtest.h>

#include "support/errors.h"
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

}  // namespace
}  // namespace tandem
