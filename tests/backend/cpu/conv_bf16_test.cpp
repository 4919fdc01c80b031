// bf16 convolution gradients on the shapes oneDNN 2.6's bf16 1x1 backward-data kernel
// (jit_bf16_1x1) got wrong on CPUs with native bf16 (odd C_out, 30 output positions summed at a
// time: build_backward_input_as_given in src/backend/cpu/conv.cpp), against the f64 loops on the
// same values. Other CPUs (AVX2: the loops; avx512_core: the same kernel on emulated bf16, which
// the fault spares) must agree all the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tandem/ops.h"
#include "tandem/random.h"

namespace tandem {
namespace {

Tensor random_bf16(const Shape& shape, std::uint64_t seed) {
  Generator generator(seed);
  return cast(random_uniform(shape, -1.0, 1.0, DType::f32, generator), DType::bf16);
}

// max |actual - expected| / max(1, max |expected|), as the op harness measures it.
double scaled_error(const Tensor& actual, const Tensor& expected) {
  const std::vector<double> a = cast(actual, DType::f64).to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  double error = 0;
  double scale = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    error = std::max(error, std::abs(a[i] - e[i]));
    scale = std::max(scale, std::abs(e[i]));
  }
  return error / scale;
}

struct InputGradientCase {
  Shape x_shape;
  Shape filter_shape;
  Shape dy_shape;
  Conv2DOptions options;
  const char* what;
};

// bf16 inputs are exact in f64, so the gap is the f32 sums and the bf16 rounding of the result
// (2^-8 relative); the kernel's fault gave errors of the order of the gradient itself.
TEST(Bf16Convolution, PointwiseInputGradientsWithAnOddOutputChannelCount) {
  Conv2DOptions stride2;
  stride2.strides = {2, 2};
  stride2.padding = Padding::same;
  const std::vector<InputGradientCase> cases{
      {{2, 19, 17, 9},
       {1, 1, 9, 17},
       {2, 10, 9, 17},
       stride2,
       "the op harness's pointwise_stride2_fused_add (TANDEM_TEST_SEED=1271166630): the packed "
       "positions, 10x9 per image"},
      {{2, 5, 6, 1}, {1, 1, 1, 13}, {2, 5, 6, 13}, {}, "30 positions per image, one input channel"},
      {{1, 9, 20, 14},
       {1, 1, 14, 49},
       {1, 9, 20, 49},
       {},
       "C_out past one 16-channel block, 180 positions"},
      {{1, 1, 59, 3},
       {1, 1, 3, 33},
       {1, 1, 59, 33},
       {},
       "a prime number of positions (59), blocked by 30"},
  };
  std::uint64_t seed = 1;
  for (const InputGradientCase& c : cases) {
    const Tensor filter = random_bf16(c.filter_shape, seed++);
    const Tensor dy = random_bf16(c.dy_shape, seed++);
    const Tensor dx = conv2d_backward_input(dy, filter, c.x_shape, c.options);
    const Tensor expected =
        conv2d_backward_input(cast(dy, DType::f64), cast(filter, DType::f64), c.x_shape, c.options);
    EXPECT_EQ(dx.dtype(), DType::bf16) << c.what;
    EXPECT_LE(scaled_error(dx, expected), 1e-2) << c.what;
  }
}

}  // namespace
}  // namespace tandem
