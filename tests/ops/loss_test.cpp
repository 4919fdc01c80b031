#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/gradient_check.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::expect_gradients_match;
using testing::random_extent;
using testing::random_tensor;

// logits [1, 2, 3]: log(e + e^2 + e^3) = 3.40760596444438, so label 2 costs 0.40760596444438 and
// label 0 costs 2.40760596444438; backprop = softmax - one_hot.
TEST(SparseSoftmaxCrossEntropy, HandDerivedValues) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    for (DType label_dtype : {DType::i32, DType::i64}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + dtype_name(label_dtype));
      const double tolerance = dtype == DType::bf16 ? 1e-2 : 1e-6;
      const Tensor logits = cast(Tensor::from_vector<double>({1, 2, 3, 1, 2, 3}, {2, 3}), dtype);
      const Tensor labels = cast(Tensor::from_vector<std::int64_t>({2, 0}, {2}), label_dtype);
      const auto result = sparse_softmax_cross_entropy_with_logits(logits, labels);
      EXPECT_EQ(result.loss.dtype(), dtype);
      expect_close(result.loss,
                   Tensor::from_vector<double>({0.40760596444438, 2.40760596444438}, {2}),
                   tolerance);
      const double p0 = 0.09003057317038046, p1 = 0.24472847105479767, p2 = 0.6652409557748219;
      expect_close(result.backprop,
                   Tensor::from_vector<double>({p0, p1, p2 - 1, p0 - 1, p1, p2}, {2, 3}),
                   tolerance);
    }
  }
}

TEST(SparseSoftmaxCrossEntropy, StableForLargeLogits) {
  const Tensor labels = Tensor::from_vector<std::int32_t>({1}, {1});
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto large = sparse_softmax_cross_entropy_with_logits(
        cast(Tensor::from_vector<double>({1000, 1002, 999}, {1, 3}), dtype), labels);
    const auto small = sparse_softmax_cross_entropy_with_logits(
        cast(Tensor::from_vector<double>({1, 3, 0}, {1, 3}), dtype), labels);
    expect_close(large.loss, small.loss, 1e-6);
    expect_close(large.backprop, small.backprop, 1e-6);
    // A confidently wrong example: the loss is the logit gap, not inf.
    const auto wrong = sparse_softmax_cross_entropy_with_logits(
        cast(Tensor::from_vector<double>({0, 200}, {1, 2}), dtype),
        Tensor::from_vector<std::int32_t>({0}, {1}));
    expect_close(wrong.loss, Tensor::from_vector<double>({200}, {1}), 1e-6);
  }
}

// f32 against the definition (log-sum-exp minus the labelled logit) in double.
TEST(SparseSoftmaxCrossEntropy, MatchesTheDefinition) {
  const std::int64_t batch = random_extent(1, 130), classes = random_extent(2, 12);
  const Tensor logits = random_tensor({batch, classes}, -5, 5, 0);
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < batch; ++i)
    labels.push_back(random_extent(0, classes - 1));
  const std::vector<double> v = logits.to_vector<double>();
  std::vector<double> loss, backprop;
  for (std::int64_t i = 0; i < batch; ++i) {
    double total = 0;
    for (std::int64_t k = 0; k < classes; ++k)
      total += std::exp(v[i * classes + k]);
    loss.push_back(std::log(total) - v[i * classes + labels[i]]);
    for (std::int64_t k = 0; k < classes; ++k) {
      backprop.push_back(std::exp(v[i * classes + k]) / total - (k == labels[i] ? 1 : 0));
    }
  }
  const Tensor label_tensor = Tensor::from_vector(labels, {batch});
  for (DType dtype : {DType::f64, DType::f32}) {
    const auto result = sparse_softmax_cross_entropy_with_logits(cast(logits, dtype), label_tensor);
    const double tolerance = dtype == DType::f64 ? 1e-12 : 1e-5;
    expect_close(result.loss, Tensor::from_vector(loss, {batch}), tolerance);
    expect_close(result.backprop, Tensor::from_vector(backprop, {batch, classes}), tolerance);
  }
}

TEST(SparseSoftmaxCrossEntropy, Gradients) {
  const std::int64_t batch = random_extent(1, 5), classes = random_extent(2, 6);
  std::vector<std::int32_t> labels;
  for (std::int64_t i = 0; i < batch; ++i) {
    labels.push_back(static_cast<std::int32_t>(random_extent(0, classes - 1)));
  }
  const Tensor label_tensor = Tensor::from_vector(labels, {batch});
  expect_gradients_match(
      [&](const auto& in) {
        return sparse_softmax_cross_entropy_with_logits(in[0], label_tensor).loss;
      },
      {random_tensor({batch, classes})}, {}, "loss");
  // Differentiating the backprop output is a second-order gradient of the loss.
  expect_gradients_match(
      [&](const auto& in) {
        return sparse_softmax_cross_entropy_with_logits(in[0], label_tensor).backprop;
      },
      {random_tensor({batch, classes})}, {}, "backprop");
  // The labels get no gradient.
  const Tensor logits = random_tensor({batch, classes});
  GradientTape tape;
  tape.watch(logits);
  const Tensor loss = sum(sparse_softmax_cross_entropy_with_logits(logits, label_tensor).loss);
  const std::vector<Tensor> grads = tape.gradient(loss, {logits, label_tensor});
  EXPECT_TRUE(grads[0].defined());
  EXPECT_FALSE(grads[1].defined());
}

TEST(SparseSoftmaxCrossEntropy, LabelOutOfRangeNamesTheExample) {
  const Tensor logits = Tensor::zeros({3, 4});
  for (std::int32_t bad : {4, -1}) {
    try {
      sparse_softmax_cross_entropy_with_logits(logits,
                                               Tensor::from_vector<std::int32_t>({0, bad, 1}, {3}));
      ADD_FAILURE() << "label " << bad << " was accepted";
    } catch (const InvalidArgument& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("example 1"), std::string::npos) << message;
      EXPECT_NE(message.find("label " + std::to_string(bad)), std::string::npos) << message;
      EXPECT_NE(message.find("4"), std::string::npos) << message;
    }
  }
}

TEST(SparseSoftmaxCrossEntropy, ShapeAndTypeErrors) {
  const Tensor labels = Tensor::zeros({3}, DType::i32);
  EXPECT_THROW(sparse_softmax_cross_entropy_with_logits(Tensor::zeros({3, 4}), Tensor::zeros({3})),
               InvalidArgument);
  EXPECT_THROW(sparse_softmax_cross_entropy_with_logits(Tensor::zeros({2, 4}), labels),
               InvalidArgument);
  EXPECT_THROW(sparse_softmax_cross_entropy_with_logits(Tensor::zeros({3, 4, 1}), labels),
               InvalidArgument);
  EXPECT_THROW(sparse_softmax_cross_entropy_with_logits(Tensor::zeros({3, 4}, DType::i32), labels),
               InvalidArgument);
  EXPECT_THROW(sparse_softmax_cross_entropy_with_logits(Tensor::zeros({3, 0}), labels),
               InvalidArgument);
}

}  // namespace
}  // namespace tandem
