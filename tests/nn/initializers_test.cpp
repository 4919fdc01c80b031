// Initializers: bounds and variances against Keras' formulas, fans, reproducibility under
// manual_seed, and unknown names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tandem/tandem.h"

namespace tandem {
namespace {

struct Moments {
  double mean = 0;
  double variance = 0;
  double max_abs = 0;
};

Moments moments_of(const Tensor& tensor) {
  const std::vector<double> values = tensor.to_vector<double>();
  Moments m;
  for (double v : values)
    m.mean += v;
  m.mean /= static_cast<double>(values.size());
  for (double v : values) {
    m.variance += (v - m.mean) * (v - m.mean);
    m.max_abs = std::max(m.max_abs, std::abs(v));
  }
  m.variance /= static_cast<double>(values.size());
  return m;
}

// (200, 300): fan_in 200, fan_out 300; 60000 draws put the sample variance within ~1% of the
// truth, so 5% bounds leave room without letting a wrong formula (off by 2x or more) pass.
const Shape kShape{200, 300};
constexpr double kFanIn = 200;
constexpr double kFanOut = 300;

TEST(Initializers, GlorotUniformHasKerasLimitAndVariance) {
  const double limit = std::sqrt(6.0 / (kFanIn + kFanOut));
  const Moments m = moments_of(nn::initialize(nn::Initializer::glorot_uniform, kShape));
  EXPECT_LE(m.max_abs, limit);
  EXPECT_GT(m.max_abs, 0.98 * limit);
  EXPECT_NEAR(m.mean, 0.0, 0.01 * limit);
  EXPECT_NEAR(m.variance, 2.0 / (kFanIn + kFanOut), 0.05 * 2.0 / (kFanIn + kFanOut));
}

TEST(Initializers, GlorotNormalIsTruncatedWithKerasVariance) {
  const double variance = 2.0 / (kFanIn + kFanOut);
  const Moments m = moments_of(nn::initialize(nn::Initializer::glorot_normal, kShape));
  EXPECT_NEAR(m.variance, variance, 0.05 * variance);
  // Truncated at two standard deviations of the underlying (widened) normal.
  EXPECT_LE(m.max_abs, 2.0 * std::sqrt(variance) / 0.87962566103423978 + 1e-6);
}

TEST(Initializers, HeNormalAndHeUniformUseFanIn) {
  const double variance = 2.0 / kFanIn;
  const Moments normal = moments_of(nn::initialize(nn::Initializer::he_normal, kShape));
  EXPECT_NEAR(normal.variance, variance, 0.05 * variance);
  EXPECT_LE(normal.max_abs, 2.0 * std::sqrt(variance) / 0.87962566103423978 + 1e-6);
  const Moments uniform = moments_of(nn::initialize(nn::Initializer::he_uniform, kShape));
  EXPECT_NEAR(uniform.variance, variance, 0.05 * variance);
  EXPECT_LE(uniform.max_abs, std::sqrt(6.0 / kFanIn));
}

TEST(Initializers, ZerosOnesAndDtype) {
  const Tensor zeros = nn::initialize(nn::Initializer::zeros, {3}, DType::f64);
  EXPECT_EQ(zeros.dtype(), DType::f64);
  EXPECT_EQ(zeros.to_vector<double>(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(nn::initialize(nn::Initializer::ones, {2}).to_vector<float>(),
            (std::vector<float>{1, 1}));
}

TEST(Initializers, FansOfMatricesAndConvolutionKernels) {
  EXPECT_EQ(nn::compute_fans({3, 5}).fan_in, 3);
  EXPECT_EQ(nn::compute_fans({3, 5}).fan_out, 5);
  // (KH, KW, C_in, C_out) = (3, 3, 16, 32): receptive field 9.
  EXPECT_EQ(nn::compute_fans({3, 3, 16, 32}).fan_in, 144);
  EXPECT_EQ(nn::compute_fans({3, 3, 16, 32}).fan_out, 288);
  EXPECT_EQ(nn::compute_fans({7}).fan_in, 7);
}

TEST(Initializers, ManualSeedReproducesLayerWeights) {
  auto build = [] {
    nn::Dense dense(4);
    dense(Tensor::ones({1, 3}));
    return dense.weights()[0].to_vector<float>();
  };
  manual_seed(1234);
  const std::vector<float> first = build();
  const std::vector<float> second = build();
  manual_seed(1234);
  EXPECT_EQ(build(), first);
  EXPECT_NE(second, first);
}

TEST(Initializers, NamesRoundTripAndUnknownNamesAreListed) {
  for (const char* name :
       {"glorot_uniform", "glorot_normal", "he_normal", "he_uniform", "zeros", "ones"}) {
    EXPECT_STREQ(nn::initializer_name(nn::parse_initializer(name)), name);
  }
  try {
    nn::parse_initializer("orthogonal");
    FAIL() << "no error";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("'orthogonal'"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("he_normal"), std::string::npos);
  }
}

}  // namespace
}  // namespace tandem
