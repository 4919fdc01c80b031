// Optimizers against hand computations of Keras' update rules over several steps, lazily made
// slots, schedules driving the rate, clipping by global norm and gradient accumulation.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/gradient_check.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::expect_close;

Tensor variable(const std::vector<double>& values) {
  Tensor v = Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())});
  v.set_variable(true);
  return v;
}

Tensor grad(const std::vector<double>& values) {
  return Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())});
}

Tensor expected(const std::vector<double>& values) {
  return grad(values);
}

TEST(SGD, PlainStepsByHand) {
  train::SGD sgd(0.1);
  Tensor p = variable({1.0, -2.0});
  sgd.apply_gradients({grad({0.5, 1.0})}, {p});
  expect_close(p, expected({0.95, -2.1}), 1e-12);
  sgd.apply_gradients({grad({-1.0, 0.0})}, {p});
  expect_close(p, expected({1.05, -2.1}), 1e-12);
  EXPECT_EQ(sgd.iterations(), 2);
}

TEST(SGD, MomentumByHand) {
  // v = 0.9 v - 0.1 g; p += v
  train::SGD sgd(0.1, 0.9);
  Tensor p = variable({1.0});
  sgd.apply_gradients({grad({0.5})}, {p});  // v = -0.05, p = 0.95
  expect_close(p, expected({0.95}), 1e-12);
  sgd.apply_gradients({grad({0.5})}, {p});  // v = -0.045 - 0.05 = -0.095, p = 0.855
  expect_close(p, expected({0.855}), 1e-12);
  sgd.apply_gradients({grad({-1.0})}, {p});  // v = -0.0855 + 0.1 = 0.0145, p = 0.8695
  expect_close(p, expected({0.8695}), 1e-12);
}

TEST(SGD, NesterovByHand) {
  // v = 0.9 v - 0.1 g; p += 0.9 v - 0.1 g
  train::SGD sgd(0.1, 0.9, /*nesterov=*/true);
  Tensor p = variable({1.0});
  sgd.apply_gradients({grad({0.5})}, {p});  // v = -0.05; p = 1 - 0.045 - 0.05 = 0.905
  expect_close(p, expected({0.905}), 1e-12);
  sgd.apply_gradients({grad({0.5})}, {p});  // v = -0.095; p = 0.905 - 0.0855 - 0.05 = 0.7695
  expect_close(p, expected({0.7695}), 1e-12);
  sgd.apply_gradients({grad({-1.0})}, {p});  // v = 0.0145; p = 0.7695 + 0.01305 + 0.1 = 0.88255
  expect_close(p, expected({0.88255}), 1e-12);
}

// Keras' Adam in plain doubles: the reference the optimizer must match.
struct AdamReference {
  double lr, beta_1, beta_2, epsilon, weight_decay;
  double m = 0, v = 0;
  int t = 0;
  double step(double p, double g) {
    ++t;
    p -= lr * weight_decay * p;
    m = beta_1 * m + (1 - beta_1) * g;
    v = beta_2 * v + (1 - beta_2) * g * g;
    const double lr_t = lr * std::sqrt(1 - std::pow(beta_2, t)) / (1 - std::pow(beta_1, t));
    return p - lr_t * m / (std::sqrt(v) + epsilon);
  }
};

TEST(Adam, ThreeStepsMatchTheKerasFormula) {
  train::Adam adam(0.1);
  AdamReference reference{0.1, 0.9, 0.999, 1e-7, 0.0};
  Tensor p = variable({1.0});
  double expected_p = 1.0;
  for (double g : {0.5, -0.2, 0.3}) {
    adam.apply_gradients({grad({g})}, {p});
    expected_p = reference.step(expected_p, g);
    expect_close(p, expected({expected_p}), 1e-12);
  }
  // Sanity of the reference: the first step moves by about lr (m / sqrt(v) is 1 after bias
  // correction).
  AdamReference first{0.1, 0.9, 0.999, 1e-7, 0.0};
  EXPECT_NEAR(first.step(1.0, 0.5), 0.9, 1e-5);
}

TEST(AdamW, DecaysTheWeightsBeforeTheAdamStep) {
  train::AdamW adamw(0.01, /*weight_decay=*/0.1);
  AdamReference reference{0.01, 0.9, 0.999, 1e-7, 0.1};
  Tensor p = variable({2.0, -1.0});
  double p0 = 2.0;
  double p1 = -1.0;
  AdamReference reference_1 = reference;
  for (int step = 0; step < 3; ++step) {
    adamw.apply_gradients({grad({0.5, 0.25})}, {p});
    p0 = reference.step(p0, 0.5);
    p1 = reference_1.step(p1, 0.25);
    expect_close(p, expected({p0, p1}), 1e-12);
  }
}

TEST(Optimizer, SlotsArePerVariableAndUndefinedGradientsSkip) {
  train::SGD sgd(0.1, 0.5);
  Tensor a = variable({1.0});
  Tensor b = variable({1.0, 1.0});
  sgd.apply_gradients({grad({1.0}), Tensor()}, {a, b});
  expect_close(a, expected({0.9}), 1e-12);
  expect_close(b, expected({1.0, 1.0}), 0.0);
  // b's velocity starts now, from zero; a's carries on: v = 0.5 * -0.1 - 0.1 = -0.15.
  sgd.apply_gradients({grad({1.0}), grad({1.0, 1.0})}, {a, b});
  expect_close(a, expected({0.75}), 1e-12);
  expect_close(b, expected({0.9, 0.9}), 1e-12);
}

TEST(Optimizer, ScheduleSetsTheRatePerUpdate) {
  train::SGD sgd(train::StepDecay(1.0, 2, 0.5));
  Tensor p = variable({0.0});
  double expected_p = 0.0;
  for (double rate : {1.0, 1.0, 0.5, 0.5, 0.25}) {
    EXPECT_DOUBLE_EQ(sgd.learning_rate(), rate);
    sgd.apply_gradients({grad({1.0})}, {p});
    expected_p -= rate;
    expect_close(p, expected({expected_p}), 1e-12);
  }
  sgd.set_learning_rate(0.01);
  EXPECT_DOUBLE_EQ(sgd.learning_rate(), 0.01);
}

TEST(Optimizer, ErrorsNameTheProblem) {
  train::SGD sgd;
  Tensor p = variable({1.0, 2.0});
  p.set_name("dense/kernel");
  try {
    sgd.apply_gradients({grad({1.0})}, {p});
    FAIL();
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("'dense/kernel'"), std::string::npos) << error.what();
  }
  EXPECT_THROW(sgd.apply_gradients({grad({1.0, 1.0}), grad({1.0})}, {p}), InvalidArgument);
  EXPECT_THROW(train::SGD(0.1, 1.5), InvalidArgument);
  EXPECT_THROW(train::Adam(0.1, 1.0), InvalidArgument);
  EXPECT_THROW(train::SGD(-0.1), InvalidArgument);
  EXPECT_THROW(train::SGD(0.1, 0.0, false, {.global_clipnorm = -1.0}), InvalidArgument);
  EXPECT_THROW(train::SGD(0.1, 0.0, false, {.gradient_accumulation_steps = 0}), InvalidArgument);
  EXPECT_THROW(train::Optimizer::from_name("rmsprop"), InvalidArgument);
  EXPECT_EQ(train::Optimizer::from_name("Adam")->name(), "Adam");
  EXPECT_EQ(train::Optimizer::from_name("adamw")->name(), "AdamW");
}

TEST(ClipByGlobalNorm, ScalesAllGradientsToTheLimit) {
  // Global norm of [3, 4] and [12] is 13.
  const train::ClippedGradients clipped =
      train::clip_by_global_norm({grad({3.0, 4.0}), Tensor(), grad({12.0})}, 6.5);
  EXPECT_DOUBLE_EQ(clipped.global_norm.item(), 13.0);
  ASSERT_EQ(clipped.gradients.size(), 3u);
  EXPECT_FALSE(clipped.gradients[1].defined());
  expect_close(clipped.gradients[0], expected({1.5, 2.0}), 1e-12);
  expect_close(clipped.gradients[2], expected({6.0}), 1e-12);
  const train::ClippedGradients again =
      train::clip_by_global_norm({clipped.gradients[0], clipped.gradients[2]}, 6.5);
  EXPECT_NEAR(again.global_norm.item(), 6.5, 1e-12);
  // Within the limit nothing changes.
  const train::ClippedGradients small = train::clip_by_global_norm({grad({3.0, 4.0})}, 10.0);
  expect_close(small.gradients[0], expected({3.0, 4.0}), 1e-12);
  EXPECT_THROW(train::clip_by_global_norm({grad({1.0})}, 0.0), InvalidArgument);
}

TEST(ClipByGlobalNorm, OptimizerOptionClipsBeforeTheUpdate) {
  train::SGD sgd(1.0, 0.0, false, {.global_clipnorm = 1.0});
  Tensor p = variable({0.0, 0.0});
  sgd.apply_gradients({grad({3.0, 4.0})}, {p});
  expect_close(p, expected({-0.6, -0.8}), 1e-12);
}

// A linear model y = x w + b with mean squared error: the gradients of two micro-batches of 16,
// accumulated and averaged, equal the gradient of the batch of 32, so one SGD update matches.
TEST(GradientAccumulation, TwoMicroBatchesOfSixteenEqualOneBatchOfThirtyTwo) {
  const Tensor x = testing::random_tensor({32, 3});
  const Tensor y = testing::random_tensor({32, 1});
  auto make_model = [] {
    manual_seed(5);
    nn::Sequential model({nn::Dense(1)});
    model.build({3}, DType::f64);
    return model;
  };
  const train::MeanSquaredError mse;
  auto gradients_of = [&](nn::Model& model, const Tensor& xs, const Tensor& ys) {
    GradientTape tape;
    const Tensor loss = mse(ys, model(xs, true));
    return tape.gradient(loss, model.trainable_weights());
  };

  nn::Model whole = make_model();
  train::SGD plain(0.1);
  plain.apply_gradients(gradients_of(whole, x, y), whole.trainable_weights());

  nn::Model split = make_model();
  train::SGD accumulating(0.1, 0.0, false, {.gradient_accumulation_steps = 2});
  const std::vector<Tensor> before = {split.weights()[0].clone(), split.weights()[1].clone()};
  const Tensor x_first = slice(x, {0, 0}, {16, -1});
  const Tensor y_first = slice(y, {0, 0}, {16, -1});
  accumulating.apply_gradients(gradients_of(split, x_first, y_first), split.trainable_weights());
  // The first micro-batch changes nothing yet.
  expect_close(split.weights()[0], before[0], 0.0);
  EXPECT_EQ(accumulating.iterations(), 0);
  accumulating.apply_gradients(
      gradients_of(split, slice(x, {16, 0}, {16, -1}), slice(y, {16, 0}, {16, -1})),
      split.trainable_weights());
  EXPECT_EQ(accumulating.iterations(), 1);
  for (std::size_t i = 0; i < 2; ++i) {
    expect_close(split.weights()[i], whole.weights()[i], 1e-12);
  }
  // And the update did move the weights.
  EXPECT_GT(std::abs(whole.weights()[1].item()), 1e-6);
}

}  // namespace
}  // namespace tandem
