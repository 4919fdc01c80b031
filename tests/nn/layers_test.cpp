// Layers against hand-derived values: Dense, Conv2D (one channel), pooling, BatchNormalization
// (training and inference math, moving averages), Dropout, Flatten, Add, activations, and the
// errors bad arguments raise.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/gradient_check.h"
#include "support/errors.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::expect_close;

Tensor values(const std::vector<double>& v, const Shape& shape, DType dtype = DType::f32) {
  return cast(Tensor::from_vector(v, shape), dtype);
}

using testing::error_of;

TEST(Dense, KnownWeightsGiveTheMatrixProductPlusBias) {
  nn::Dense dense(2);
  const Tensor x = values({1, 2, 3, -1, 0, 1}, {2, 3});  // (2, 3)
  dense(x);                                              // builds
  dense.set_weights({values({1, 0, 0, 1, 1, -1}, {3, 2}), values({0.5, -0.5}, {2})});
  // row 0: [1 + 3, 2 - 3] + b = [4.5, -1.5]; row 1: [-1 + 1, 0 - 1] + b = [0.5, -1.5]
  expect_close(dense(x), values({4.5, -1.5, 0.5, -1.5}, {2, 2}, DType::f64), 1e-6);
}

TEST(Dense, ActivationAndNoBias) {
  nn::Dense dense(2, "relu", /*use_bias=*/false);
  const Tensor x = values({1, 2, 3}, {1, 3});
  dense(x);
  ASSERT_EQ(dense.weights().size(), 1u);
  dense.set_weights({values({1, -1, 1, -1, 1, -1}, {3, 2})});
  // [6, -6] through relu
  expect_close(dense(x), values({6, 0}, {1, 2}, DType::f64), 1e-6);
}

TEST(Dense, WeightsAreNamedVariablesCreatedOnFirstCall) {
  nn::clear_session();
  nn::Dense dense(4);
  EXPECT_EQ(dense.name(), "dense");
  EXPECT_EQ(nn::Dense(3).name(), "dense_1");
  EXPECT_FALSE(dense.built());
  EXPECT_TRUE(dense.weights().empty());
  dense(Tensor::ones({5, 3}));
  ASSERT_TRUE(dense.built());
  const std::vector<Tensor> weights = dense.weights();
  ASSERT_EQ(weights.size(), 2u);
  EXPECT_EQ(weights[0].name(), "dense/kernel");
  EXPECT_EQ(weights[0].shape(), (Shape{3, 4}));
  EXPECT_EQ(weights[1].name(), "dense/bias");
  EXPECT_TRUE(weights[0].is_variable());
  EXPECT_TRUE(weights[1].is_variable());
  EXPECT_EQ(dense.count_params(), 3 * 4 + 4);
  // The bias starts at zero.
  expect_close(weights[1], Tensor::zeros({4}, DType::f64), 0.0);
}

TEST(Dense, GradientOfTheSumIsTheColumnSumsOfTheInput) {
  nn::Dense dense(2);
  const Tensor x = values({1, 2, 3, 4, 5, 6}, {2, 3});
  dense(x);
  GradientTape tape;
  const Tensor total = sum(dense(x, /*training=*/true));
  const std::vector<Tensor> grads = tape.gradient(total, dense.trainable_weights());
  // d sum / d kernel[i][j] = sum over rows of x[:, i]; d sum / d bias[j] = rows.
  expect_close(grads[0], values({5, 5, 7, 7, 9, 9}, {3, 2}, DType::f64), 1e-6);
  expect_close(grads[1], values({2, 2}, {2}, DType::f64), 1e-6);
}

TEST(Conv2D, OneChannelValidConvolutionByHand) {
  nn::Conv2D conv(1, 2);
  const Tensor x = values({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1});  // (1, 3, 3, 1)
  conv(x);
  conv.set_weights({values({1, 2, 3, 4}, {2, 2, 1, 1}), values({0.5}, {1})});
  // y[i][j] = x[i][j] + 2 x[i][j+1] + 3 x[i+1][j] + 4 x[i+1][j+1] + 0.5
  //   (0,0): 1 + 4 + 12 + 20 = 37   (0,1): 2 + 6 + 15 + 24 = 47
  //   (1,0): 4 + 10 + 21 + 32 = 67  (1,1): 5 + 12 + 24 + 36 = 77
  expect_close(conv(x), values({37.5, 47.5, 67.5, 77.5}, {1, 2, 2, 1}, DType::f64), 1e-5);
}

TEST(Conv2D, OutputShapesFollowPaddingStridesAndDilation) {
  const Tensor x = Tensor::ones({2, 9, 9, 3});
  EXPECT_EQ(nn::Conv2D(4, 3)(x).shape(), (Shape{2, 7, 7, 4}));
  nn::Conv2DConfig same;
  same.padding = "same";
  EXPECT_EQ(nn::Conv2D(4, 3, same)(x).shape(), (Shape{2, 9, 9, 4}));
  same.strides = 2;
  EXPECT_EQ(nn::Conv2D(4, 3, same)(x).shape(), (Shape{2, 5, 5, 4}));
  EXPECT_EQ(nn::Conv2D(4, {3, 1}, 1, "valid", 2)(x).shape(), (Shape{2, 5, 9, 4}));
  nn::Conv2D conv(8, 3, "relu");
  EXPECT_EQ(conv(x).shape(), (Shape{2, 7, 7, 8}));
  EXPECT_EQ(conv.weights()[0].name().substr(0, 6), "conv2d");
  EXPECT_EQ(conv.weights()[0].shape(), (Shape{3, 3, 3, 8}));
  for (float value : conv(x).to_vector<float>())
    EXPECT_GE(value, 0.0f);
}

TEST(Pooling, MaxAverageAndGlobalAverageByHand) {
  const Tensor x = values({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
                          {1, 4, 4, 1});  // (1, 4, 4, 1)
  expect_close(nn::MaxPool2D()(x), values({6, 8, 14, 16}, {1, 2, 2, 1}, DType::f64), 0.0);
  expect_close(nn::AveragePooling2D()(x), values({3.5, 5.5, 11.5, 13.5}, {1, 2, 2, 1}, DType::f64),
               1e-6);
  EXPECT_EQ(nn::MaxPool2D(2, 1)(x).shape(), (Shape{1, 3, 3, 1}));
  EXPECT_EQ(nn::MaxPool2D(3, std::nullopt, "same")(x).shape(), (Shape{1, 2, 2, 1}));
  expect_close(nn::GlobalAveragePooling2D()(x), values({8.5}, {1, 1}, DType::f64), 1e-6);
}

// x: column 0 = [1, 2, 3, 4] (mean 2.5, biased variance 1.25), column 1 = [2, 4, 6, 8] (mean 5,
// variance 5).
Tensor batch_norm_input() {
  return values({1, 2, 2, 4, 3, 6, 4, 8}, {4, 2});
}

TEST(BatchNormalization, TrainingNormalisesWithBatchStatisticsAndMovesTheAverages) {
  const double epsilon = 1e-3;
  nn::BatchNormalization bn(0.9, epsilon);
  const Tensor x = batch_norm_input();
  bn(x);
  const std::vector<Tensor> weights = bn.weights();
  ASSERT_EQ(weights.size(), 4u);
  EXPECT_EQ(bn.trainable_weights().size(), 2u);  // gamma, beta
  ASSERT_EQ(bn.non_trainable_weights().size(), 2u);
  EXPECT_EQ(bn.non_trainable_weights()[0].name(), bn.name() + "/moving_mean");
  EXPECT_FALSE(bn.non_trainable_weights()[1].is_variable());
  bn.set_weights(
      {values({1, 2}, {2}), values({0, 1}, {2}), values({0, 0}, {2}), values({1, 1}, {2})});

  const Tensor y = bn(x, /*training=*/true);
  const double means[] = {2.5, 5.0};
  const double variances[] = {1.25, 5.0};
  const double gamma[] = {1, 2};
  const double beta[] = {0, 1};
  const std::vector<double> xs = x.to_vector<double>();
  std::vector<double> expected(8);
  for (int i = 0; i < 4; ++i) {
    for (int c = 0; c < 2; ++c) {
      expected[2 * i + c] =
          gamma[c] * (xs[2 * i + c] - means[c]) / std::sqrt(variances[c] + epsilon) + beta[c];
    }
  }
  expect_close(y, Tensor::from_vector(expected, {4, 2}), 1e-5);
  // moving = 0.9 moving + 0.1 batch
  expect_close(weights[2], values({0.25, 0.5}, {2}, DType::f64), 1e-6);
  expect_close(weights[3], values({0.9 + 0.125, 0.9 + 0.5}, {2}, DType::f64), 1e-6);

  // A second step moves them again: 0.9 * 0.25 + 0.1 * 2.5 = 0.475.
  bn(x, true);
  expect_close(weights[2], values({0.475, 0.95}, {2}, DType::f64), 1e-6);
}

TEST(BatchNormalization, InferenceUsesTheMovingStatistics) {
  const double epsilon = 1e-3;
  nn::BatchNormalization bn(0.99, epsilon);
  const Tensor x = batch_norm_input();
  bn(x);
  bn.set_weights(
      {values({1, 2}, {2}), values({0, 1}, {2}), values({1, 2}, {2}), values({4, 9}, {2})});
  const std::vector<double> xs = x.to_vector<double>();
  std::vector<double> expected(8);
  for (int i = 0; i < 4; ++i) {
    expected[2 * i] = (xs[2 * i] - 1) / std::sqrt(4 + epsilon);
    expected[2 * i + 1] = 2 * (xs[2 * i + 1] - 2) / std::sqrt(9 + epsilon) + 1;
  }
  expect_close(bn(x), Tensor::from_vector(expected, {4, 2}), 1e-5);
  // Inference leaves the moving statistics alone.
  expect_close(bn.weights()[2], values({1, 2}, {2}, DType::f64), 0.0);
}

TEST(BatchNormalization, FrozenLayerRunsInInferenceModeWhileTraining) {
  nn::BatchNormalization bn;
  const Tensor x = batch_norm_input();
  bn(x);
  bn.set_trainable(false);
  EXPECT_TRUE(bn.trainable_weights().empty());
  EXPECT_EQ(bn.non_trainable_weights().size(), 4u);
  EXPECT_FALSE(bn.weights()[0].is_variable());
  // Fresh statistics (mean 0, variance 1): y = x / sqrt(1 + eps), and nothing moves.
  expect_close(bn(x, /*training=*/true), x * (1.0 / std::sqrt(1.0 + 1e-3)), 1e-5);
  expect_close(bn.weights()[2], Tensor::zeros({2}), 0.0);
}

TEST(Dropout, ScalesKeptUnitsInTrainingAndIsTheIdentityInInference) {
  nn::Dropout dropout(0.25, /*seed=*/42);
  const Tensor x = Tensor::ones({100, 100});
  const std::vector<float> y = dropout(x, /*training=*/true).to_vector<float>();
  int zeros = 0;
  double total = 0;
  for (float value : y) {
    if (value == 0.0f) {
      ++zeros;
    } else {
      EXPECT_NEAR(value, 1.0 / 0.75, 1e-6);
    }
    total += value;
  }
  // 10000 draws with p = 0.25: the standard deviation of the count is about 43.
  EXPECT_NEAR(zeros, 2500, 250);
  EXPECT_NEAR(total / 10000.0, 1.0, 0.05);
  const Tensor inference = dropout(x);
  expect_close(inference, x, 0.0);
  // The same seed draws the same mask.
  nn::Dropout twin(0.25, 42);
  expect_close(twin(x, true), Tensor::from_vector(y, {100, 100}), 0.0);
}

TEST(Flatten, KeepsTheBatchAndMultipliesTheRest) {
  EXPECT_EQ(nn::Flatten()(Tensor::ones({2, 3, 4, 5})).shape(), (Shape{2, 60}));
  EXPECT_EQ(nn::Flatten()(Tensor::ones({7})).shape(), (Shape{7, 1}));
  const nn::SymbolicTensor flat = nn::Flatten()(nn::Input({3, 4, 5}));
  EXPECT_EQ(flat.shape(), (Shape{-1, 60}));
  const Tensor x = values({1, 2, 3, 4, 5, 6}, {1, 2, 3});
  expect_close(nn::Flatten()(x), values({1, 2, 3, 4, 5, 6}, {1, 6}, DType::f64), 0.0);
}

TEST(Add, SumsItsInputs) {
  nn::Add add;
  expect_close(add({values({1, 2}, {1, 2}), values({3, 4}, {1, 2}), values({5, 6}, {1, 2})}),
               values({9, 12}, {1, 2}, DType::f64), 0.0);
  EXPECT_NE(error_of([&] {
              add(values({1, 2}, {1, 2}));
            }).find("two or more inputs"),
            std::string::npos);
  const auto a = nn::Input({4});
  const auto b = nn::Input({5});
  EXPECT_NE(error_of([&] { nn::Add()({a, b}); }).find("(-1, 5)"), std::string::npos);
}

TEST(Activation, AppliesTheNamedFunction) {
  const Tensor x = values({-1, 0, 2}, {1, 3}, DType::f64);
  expect_close(nn::Activation("relu")(x), values({0, 0, 2}, {1, 3}, DType::f64), 0.0);
  EXPECT_STREQ(nn::activation_name(nn::parse_activation("gelu")), "gelu");
  EXPECT_EQ(nn::parse_activation(""), nn::ActivationFunction::linear);
  expect_close(nn::Activation("linear")(x), x, 0.0);
  expect_close(nn::Activation("sigmoid")(x),
               values({1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-2.0))}, {1, 3}, DType::f64),
               1e-12);
  expect_close(nn::Activation("tanh")(x),
               values({std::tanh(-1.0), 0, std::tanh(2.0)}, {1, 3}, DType::f64), 1e-12);
  const double norm = std::exp(-1.0) + 1 + std::exp(2.0);
  expect_close(nn::Activation("softmax")(x),
               values({std::exp(-1.0) / norm, 1 / norm, std::exp(2.0) / norm}, {1, 3}, DType::f64),
               1e-12);
  // Exact gelu: x * Phi(x).
  auto gelu = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  expect_close(nn::Activation("gelu")(x), values({gelu(-1), 0, gelu(2)}, {1, 3}, DType::f64), 1e-9);
}

TEST(LayerErrors, BadArgumentsNameTheLayerAndTheArgument) {
  EXPECT_NE(error_of([] { nn::Dense(0); }).find("Dense: units must be positive, got 0"),
            std::string::npos);
  const std::string activation = error_of([] { nn::Dense(3, "relux"); });
  EXPECT_NE(activation.find("Dense"), std::string::npos) << activation;
  EXPECT_NE(activation.find("relux"), std::string::npos) << activation;
  EXPECT_NE(activation.find("gelu"), std::string::npos) << activation;
  EXPECT_NE(error_of([] { nn::Dense(3, "relu", true, "lecun"); }).find("glorot_uniform"),
            std::string::npos);
  EXPECT_NE(error_of([] { nn::Conv2D(8, 0); }).find("kernel_size"), std::string::npos);
  EXPECT_NE(error_of([] { nn::Conv2D(8, 3, 1, "full"); }).find("full"), std::string::npos);
  EXPECT_NE(error_of([] { nn::MaxPool2D(2, 0); }).find("strides"), std::string::npos);
  EXPECT_NE(error_of([] { nn::Dropout(1.0); }).find("rate"), std::string::npos);
  EXPECT_NE(error_of([] { nn::BatchNormalization(0.9, 0.0); }).find("epsilon"), std::string::npos);
  EXPECT_NE(error_of([] { nn::Activation("swishy"); }).find("swishy"), std::string::npos);

  // Shapes that do not fit: the message names the layer and the input shape.
  nn::Conv2D big(4, 5);
  const std::string too_small = error_of([&] { big(Tensor::ones({1, 3, 3, 1})); });
  EXPECT_NE(too_small.find("Conv2D '" + big.name() + "'"), std::string::npos) << too_small;
  EXPECT_NE(too_small.find("padding=same"), std::string::npos) << too_small;
  EXPECT_FALSE(big.built());
  nn::Dense dense(3);
  dense(Tensor::ones({2, 4}));
  const std::string features = error_of([&] { dense(nn::Input({5})); });
  EXPECT_NE(features.find("built for 4 input features"), std::string::npos) << features;
  EXPECT_NE(error_of([] { nn::Dense(3)(Tensor::ones({4})); }).find("Flatten()"), std::string::npos);
}

}  // namespace
}  // namespace tandem
