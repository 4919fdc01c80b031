// Losses (values and gradients) and metrics (values, accumulation, reset) against hand
// computations.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/gradient_check.h"
#include "support/errors.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::expect_close;

Tensor f64(const std::vector<double>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape);
}

Tensor labels(const std::vector<std::int32_t>& values) {
  return Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())});
}

using testing::error_of;

// Rows [2, 1, 0] and [0, 0, 0] with labels 0 and 2.
const std::vector<double> kLogits{2, 1, 0, 0, 0, 0};
double logits_loss() {
  const double row0 = std::log(std::exp(2.0) + std::exp(1.0) + 1.0) - 2.0;
  const double row1 = std::log(3.0);
  return (row0 + row1) / 2;
}

TEST(SparseCategoricalCrossentropy, FromLogitsValueAndGradient) {
  Tensor logits = f64(kLogits, {2, 3});
  const train::SparseCategoricalCrossentropy loss_fn(/*from_logits=*/true);
  GradientTape tape;
  tape.watch(logits);
  const Tensor loss = loss_fn(labels({0, 2}), logits);
  EXPECT_NEAR(loss.item(), logits_loss(), 1e-12);
  // d mean / d logits = (softmax - one_hot) / N
  const double z = std::exp(2.0) + std::exp(1.0) + 1.0;
  const Tensor expected = f64({(std::exp(2.0) / z - 1) / 2, std::exp(1.0) / z / 2, 1 / z / 2,
                               1.0 / 6, 1.0 / 6, (1.0 / 3 - 1) / 2},
                              {2, 3});
  expect_close(tape.gradient(loss, {logits})[0], expected, 1e-12);
  // Labels may also come as (N, 1), i64.
  EXPECT_NEAR(loss_fn(Tensor::from_vector<std::int64_t>({0, 2}, {2, 1}), logits).item(),
              logits_loss(), 1e-12);
}

// Class ids of any integer type, as Keras takes them: uint8 labels (IDX files, Keras' datasets)
// give the same loss from logits and from probabilities as int32 ones.
TEST(SparseCategoricalCrossentropy, TakesNarrowIntegerClassIds) {
  const Tensor logits = f64(kLogits, {2, 3});
  const Tensor narrow = Tensor::from_vector<std::uint8_t>({0, 2}, {2});
  EXPECT_NEAR(train::SparseCategoricalCrossentropy(true)(narrow, logits).item(), logits_loss(),
              1e-12);
  const Tensor probabilities = f64({0.7, 0.2, 0.1, 0.1, 0.1, 0.8}, {2, 3});
  EXPECT_NEAR(train::SparseCategoricalCrossentropy()(narrow, probabilities).item(),
              -(std::log(0.7) + std::log(0.8)) / 2, 1e-12);
}

TEST(SparseCategoricalCrossentropy, FromProbabilities) {
  const Tensor probabilities = f64({0.7, 0.2, 0.1, 0.1, 0.1, 0.8}, {2, 3});
  const train::SparseCategoricalCrossentropy loss_fn;
  EXPECT_NEAR(loss_fn(labels({0, 2}), probabilities).item(), -(std::log(0.7) + std::log(0.8)) / 2,
              1e-12);
  // A zero probability is clipped to epsilon rather than giving infinity.
  const Tensor certain_wrong = f64({1, 0}, {1, 2});
  EXPECT_NEAR(loss_fn(labels({1}), certain_wrong).item(), -std::log(train::kProbabilityEpsilon),
              1e-6);
  // The gradient with respect to the probabilities flows (d -log p_label / d p_label = -1/p
  // through the normalisation: -1/p + 1/sum).
  Tensor p = f64({0.5, 0.5}, {1, 2});
  GradientTape tape;
  tape.watch(p);
  const Tensor loss = loss_fn(labels({0}), p);
  expect_close(tape.gradient(loss, {p})[0], f64({-1.0, 1.0}, {1, 2}), 1e-9);
}

TEST(CategoricalCrossentropy, OneHotTargetsMatchTheSparseLoss) {
  const Tensor logits = f64(kLogits, {2, 3});
  const Tensor one_hot = f64({1, 0, 0, 0, 0, 1}, {2, 3});
  EXPECT_NEAR(train::CategoricalCrossentropy(true)(one_hot, logits).item(), logits_loss(), 1e-12);
  const Tensor probabilities = f64({0.7, 0.2, 0.1, 0.1, 0.1, 0.8}, {2, 3});
  EXPECT_NEAR(train::CategoricalCrossentropy()(one_hot, probabilities).item(),
              -(std::log(0.7) + std::log(0.8)) / 2, 1e-12);
  // Soft targets weight the log-probabilities.
  const Tensor soft = f64({0.5, 0.5, 0, 0, 0, 1}, {2, 3});
  EXPECT_NEAR(train::CategoricalCrossentropy()(soft, probabilities).item(),
              -(0.5 * std::log(0.7) + 0.5 * std::log(0.2) + std::log(0.8)) / 2, 1e-12);
}

TEST(MeanSquaredError, ValueAndGradient) {
  Tensor prediction = f64({1, 2, 3}, {3, 1});
  const Tensor target = f64({1, 1, 5}, {3, 1});
  GradientTape tape;
  tape.watch(prediction);
  const Tensor loss = train::MeanSquaredError()(target, prediction);
  EXPECT_NEAR(loss.item(), 5.0 / 3, 1e-12);
  // 2 (prediction - target) / N
  expect_close(tape.gradient(loss, {prediction})[0], f64({0, 2.0 / 3, -4.0 / 3}, {3, 1}), 1e-12);
}

TEST(Losses, ShapeErrorsAndNames) {
  const Tensor logits = f64(kLogits, {2, 3});
  const std::string sparse = error_of([&] {
    train::SparseCategoricalCrossentropy(true)(f64({1, 0, 0, 0, 0, 1}, {2, 3}), logits);
  });
  EXPECT_NE(sparse.find("CategoricalCrossentropy"), std::string::npos) << sparse;
  EXPECT_NE(sparse.find("(2,)"), std::string::npos) << sparse;
  EXPECT_THROW(train::CategoricalCrossentropy()(labels({0, 2}), logits), InvalidArgument);
  EXPECT_THROW(train::MeanSquaredError()(f64({1, 2}, {2}), f64({1, 2, 3}, {3})), InvalidArgument);
  EXPECT_EQ(train::Loss::from_name("mse")->name(), "mean_squared_error");
  EXPECT_EQ(train::Loss::from_name("sparse_categorical_crossentropy")->name(),
            "sparse_categorical_crossentropy");
  EXPECT_NE(error_of([] { train::Loss::from_name("hinge"); }).find("'hinge'"), std::string::npos);
}

TEST(Metrics, SparseCategoricalAccuracyAccumulatesAndResets) {
  train::SparseCategoricalAccuracy accuracy;
  const Tensor scores = f64({0.1, 0.9, 0.8, 0.2, 0.3, 0.7}, {3, 2});  // predicts 1, 0, 1
  accuracy.update_state(labels({1, 1, 1}), scores);
  EXPECT_DOUBLE_EQ(accuracy.result(), 2.0 / 3);
  accuracy.update_state(labels({0}), f64({5, 1}, {1, 2}));
  EXPECT_DOUBLE_EQ(accuracy.result(), 3.0 / 4);
  accuracy.reset_state();
  EXPECT_DOUBLE_EQ(accuracy.result(), 0.0);
  EXPECT_EQ(accuracy.name(), "sparse_categorical_accuracy");
  EXPECT_THROW(accuracy.update_state(labels({1, 1}), scores), InvalidArgument);
}

TEST(Metrics, AccuracyAdaptsToTheTargets) {
  const Tensor scores = f64({0.1, 0.9, 0.8, 0.2}, {2, 2});  // predicts 1, 0
  train::Accuracy ids;
  ids.update_state(labels({1, 1}), scores);
  EXPECT_DOUBLE_EQ(ids.result(), 0.5);
  train::Accuracy one_hot;
  one_hot.update_state(f64({0, 1, 1, 0}, {2, 2}), scores);
  EXPECT_DOUBLE_EQ(one_hot.result(), 1.0);
  train::Accuracy exact;
  exact.update_state(labels({3, 4, 5}), labels({3, 0, 5}));
  EXPECT_DOUBLE_EQ(exact.result(), 2.0 / 3);
  EXPECT_THROW(exact.update_state(labels({1}), f64({1, 2, 3, 4, 5, 6}, {2, 3})), InvalidArgument);
  train::CategoricalAccuracy categorical;
  categorical.update_state(f64({0, 1, 0, 1}, {2, 2}), scores);
  EXPECT_DOUBLE_EQ(categorical.result(), 0.5);
  EXPECT_EQ(train::Metric::from_name("accuracy")->name(), "accuracy");
  EXPECT_THROW(train::Metric::from_name("auc"), InvalidArgument);
}

TEST(Metrics, MeanIsARunningWeightedMean) {
  train::Mean mean("loss");
  mean.update_state(f64({1, 2, 3}, {3}));
  EXPECT_DOUBLE_EQ(mean.result(), 2.0);
  mean.update_state(6.0, /*weight=*/3.0);
  EXPECT_DOUBLE_EQ(mean.result(), 4.0);
  mean.reset_state();
  EXPECT_DOUBLE_EQ(mean.result(), 0.0);
  EXPECT_EQ(mean.name(), "loss");
}

}  // namespace
}  // namespace tandem
