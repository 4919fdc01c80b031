// Metrics (keras.metrics): accuracies counted on the host from arg-max indices (one small op and
// a copy of N integers per batch), and the running mean fit uses for the loss.
#include <algorithm>
#include <cmath>

#include "core/text.h"
#include "tandem/autodiff.h"
#include "tandem/ops.h"
#include "tandem/train.h"

namespace tandem::train {
namespace {

struct Matches {
  std::int64_t correct = 0;
  std::int64_t total = 0;
};

std::vector<std::int64_t> predicted_classes(const Tensor& scores) {
  NoGradGuard no_grad;
  return argmax(scores, -1).to_vector<std::int64_t>();
}

Matches compare(const std::vector<std::int64_t>& expected,
                const std::vector<std::int64_t>& actual) {
  Matches matches{0, static_cast<std::int64_t>(expected.size())};
  for (std::size_t i = 0; i < expected.size(); ++i)
    matches.correct += expected[i] == actual[i];
  return matches;
}

void require_scores(const std::string& metric, const Tensor& y_pred) {
  if (y_pred.rank() < 1 || y_pred.dim(-1) < 1) {
    throw InvalidArgument(metric +
                          ": y_pred must hold per-class scores (batch, ..., classes), got " +
                          shape_str(y_pred.shape()));
  }
}

// Class ids (N,) or (N, 1) against scores (N, C).
Matches sparse_matches(const std::string& metric, const Tensor& y_true, const Tensor& y_pred) {
  require_scores(metric, y_pred);
  const std::int64_t rows = y_pred.numel() / y_pred.dim(-1);
  if (y_true.numel() != rows) {
    throw InvalidArgument(metric + ": y_true " + shape_str(y_true.shape()) +
                          " must hold one class id per row of y_pred " + shape_str(y_pred.shape()));
  }
  return compare(y_true.to_vector<std::int64_t>(), predicted_classes(y_pred));
}

// One-hot (N, C) against scores (N, C).
Matches categorical_matches(const std::string& metric, const Tensor& y_true, const Tensor& y_pred) {
  require_scores(metric, y_pred);
  if (y_true.shape() != y_pred.shape()) {
    throw InvalidArgument(metric + ": y_true " + shape_str(y_true.shape()) + " must match y_pred " +
                          shape_str(y_pred.shape()) + " (one-hot targets)");
  }
  return compare(predicted_classes(y_true), predicted_classes(y_pred));
}

}  // namespace

std::shared_ptr<Metric> Metric::from_name(const std::string& name) {
  const std::string key = lower(name);
  if (key == "accuracy" || key == "acc") return std::make_shared<Accuracy>();
  if (key == "sparse_categorical_accuracy") return std::make_shared<SparseCategoricalAccuracy>();
  if (key == "categorical_accuracy") return std::make_shared<CategoricalAccuracy>();
  throw InvalidArgument("unknown metric '" + name +
                        "'; choose accuracy, sparse_categorical_accuracy or categorical_accuracy, "
                        "or pass a train::Metric object");
}

namespace {

void require_variable_count(const std::string& metric, const std::vector<double>& values,
                            std::size_t expected) {
  if (values.size() != expected) {
    throw InvalidArgument(metric + ".set_variables: expects " + std::to_string(expected) +
                          " values, got " + std::to_string(values.size()) +
                          "; pass what variables() returned");
  }
}

// A count kept as double in a checkpoint: a non-negative whole number.
std::int64_t whole_count(const std::string& metric, double value) {
  if (!(value >= 0.0 && value <= 9007199254740992.0 && value == std::floor(value))) {
    throw InvalidArgument(metric + ".set_variables: counts must be whole numbers >= 0, got " +
                          std::to_string(value));
  }
  return static_cast<std::int64_t>(value);
}

}  // namespace

void Metric::set_variables(const std::vector<double>& values) {
  require_variable_count(name(), values, 0);
}

std::vector<double> MatchRate::variables() const {
  return {static_cast<double>(correct_), static_cast<double>(total_)};
}

void MatchRate::set_variables(const std::vector<double>& values) {
  require_variable_count(name(), values, 2);
  const std::int64_t correct = whole_count(name(), values[0]);
  const std::int64_t total = whole_count(name(), values[1]);
  if (correct > total) {
    throw InvalidArgument(name() + ".set_variables: " + std::to_string(correct) + " correct of " +
                          std::to_string(total) + " is impossible");
  }
  correct_ = correct;
  total_ = total;
}

double MatchRate::result() const {
  return total_ > 0 ? static_cast<double>(correct_) / static_cast<double>(total_) : 0.0;
}

void MatchRate::reset_state() {
  correct_ = total_ = 0;
}

void MatchRate::add_matches(std::int64_t correct, std::int64_t total) {
  correct_ += correct;
  total_ += total;
}

void SparseCategoricalAccuracy::update_state(const Tensor& y_true, const Tensor& y_pred) {
  const Matches matches = sparse_matches("SparseCategoricalAccuracy", y_true, y_pred);
  add_matches(matches.correct, matches.total);
}

void CategoricalAccuracy::update_state(const Tensor& y_true, const Tensor& y_pred) {
  const Matches matches = categorical_matches("CategoricalAccuracy", y_true, y_pred);
  add_matches(matches.correct, matches.total);
}

void Accuracy::update_state(const Tensor& y_true, const Tensor& y_pred) {
  const Shape& truth = y_true.shape();
  const Shape& pred = y_pred.shape();
  const bool class_ids_against_scores =
      (truth.size() + 1 == pred.size() && std::equal(truth.begin(), truth.end(), pred.begin())) ||
      (truth.size() == pred.size() && !truth.empty() && truth.back() == 1 && pred.back() > 1 &&
       std::equal(truth.begin(), truth.end() - 1, pred.begin()));
  Matches matches;
  if (class_ids_against_scores) {
    matches = sparse_matches("Accuracy", y_true, y_pred);
  } else if (truth == pred && !truth.empty() && truth.back() > 1 && is_floating(y_pred.dtype())) {
    matches = categorical_matches("Accuracy", y_true, y_pred);
  } else if (truth == pred) {
    matches = compare(y_true.to_vector<std::int64_t>(), y_pred.to_vector<std::int64_t>());
  } else {
    throw InvalidArgument("Accuracy: y_true " + shape_str(truth) + " does not fit y_pred " +
                          shape_str(pred) +
                          "; give class ids (N,) with scores (N, C), or two tensors of one shape");
  }
  add_matches(matches.correct, matches.total);
}

void Mean::update_state(const Tensor& values) {
  for (double value : values.to_vector<double>())
    total_ += value;
  weight_ += static_cast<double>(values.numel());
}

void Mean::update_state(double value, double weight) {
  total_ += value * weight;
  weight_ += weight;
}

void Mean::reset_state() {
  total_ = weight_ = 0.0;
}

void Mean::set_variables(const std::vector<double>& values) {
  require_variable_count(name_, values, 2);
  total_ = values[0];
  weight_ = values[1];
}

}  // namespace tandem::train
