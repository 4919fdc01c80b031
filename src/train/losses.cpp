// Losses (keras.losses): cross-entropies from logits or probabilities and mean squared error,
// each averaged over the batch.
#include <algorithm>

#include "core/text.h"
#include "tandem/ops.h"
#include "tandem/train.h"

namespace tandem::train {
namespace {

void require_scores(const char* loss, const Tensor& y_pred) {
  if (y_pred.rank() < 2 || !is_floating(y_pred.dtype())) {
    throw InvalidArgument(std::string(loss) +
                          ": y_pred must be floating scores (batch, ..., "
                          "classes), got " +
                          dtype_name(y_pred.dtype()) + " " + shape_str(y_pred.shape()));
  }
}

// Probabilities rescaled to sum to 1 over the classes and clipped away from 0 and 1 before the
// log, as Keras does for from_logits=false.
Tensor log_probabilities(const Tensor& probabilities) {
  const Tensor normalized = div(probabilities, sum(probabilities, {-1}, /*keepdims=*/true));
  const Tensor clipped = minimum(maximum(normalized, scalar_like(normalized, kProbabilityEpsilon)),
                                 scalar_like(normalized, 1.0 - kProbabilityEpsilon));
  return log(clipped);
}

// Losses compute in float32 when the model's outputs are bf16/f16 (mixed precision), as Keras'
// do: the log and the mean over the batch need float32's precision and range.
Tensor in_float32(const Tensor& y_pred) {
  const bool half = y_pred.dtype() == DType::bf16 || y_pred.dtype() == DType::f16;
  return half ? cast(y_pred, DType::f32) : y_pred;
}

Tensor as_dtype(const Tensor& x, DType dtype) {
  return x.dtype() == dtype ? x : cast(x, dtype);
}

// (M, C) with M = every position of y_pred but the class axis.
Tensor as_rows(const Tensor& y_pred) {
  return reshape(y_pred, {-1, y_pred.dim(-1)});
}

}  // namespace

std::shared_ptr<Loss> Loss::from_name(const std::string& name) {
  const std::string key = lower(name);
  if (key == "sparse_categorical_crossentropy") {
    return std::make_shared<SparseCategoricalCrossentropy>();
  }
  if (key == "categorical_crossentropy") return std::make_shared<CategoricalCrossentropy>();
  if (key == "mean_squared_error" || key == "mse") return std::make_shared<MeanSquaredError>();
  throw InvalidArgument("unknown loss '" + name +
                        "'; choose sparse_categorical_crossentropy, categorical_crossentropy or "
                        "mean_squared_error (mse), or pass a train::Loss object");
}

Tensor SparseCategoricalCrossentropy::operator()(const Tensor& y_true,
                                                 const Tensor& predictions) const {
  const Tensor y_pred = in_float32(predictions);
  constexpr const char* kName = "SparseCategoricalCrossentropy";
  require_scores(kName, y_pred);
  const Shape& scores = y_pred.shape();
  const Shape positions(scores.begin(), scores.end() - 1);
  Shape positions_with_one = positions;
  positions_with_one.push_back(1);
  if (y_true.shape() != positions && y_true.shape() != positions_with_one) {
    throw InvalidArgument(std::string(kName) + ": y_true " + shape_str(y_true.shape()) +
                          " must hold one class id per row of y_pred " + shape_str(scores) +
                          ", i.e. shape " + shape_str(positions) +
                          "; for one-hot targets use CategoricalCrossentropy");
  }
  // Class ids as the kernels take them (i32 or i64): narrower integers (uint8 from IDX files) are
  // widened and float ids truncated, as Keras accepts both.
  const DType id_dtype = y_true.dtype() == DType::i32 || y_true.dtype() == DType::i64
                             ? y_true.dtype()
                             : (is_floating(y_true.dtype()) ? DType::i64 : DType::i32);
  const Tensor labels =
      reshape(y_true.dtype() == id_dtype ? y_true : cast(y_true, id_dtype), {-1});  // (M,)
  const Tensor rows = as_rows(y_pred);                                              // (M, C)
  if (from_logits_) return mean(sparse_softmax_cross_entropy_with_logits(rows, labels).loss);

  // -log p[label]: pick the label's column with a one-hot mask built by comparing the labels
  // against the class indices.
  const std::int64_t classes = rows.dim(1);
  std::vector<std::int64_t> class_ids(static_cast<std::size_t>(classes));
  for (std::int64_t c = 0; c < classes; ++c)
    class_ids[static_cast<std::size_t>(c)] = c;
  const Tensor class_row =
      as_dtype(Tensor::from_vector(class_ids, {1, classes}, labels.device()), labels.dtype());
  const Tensor one_hot = cast(equal(reshape(labels, {-1, 1}), class_row), rows.dtype());  // (M, C)
  return neg(mean(sum(mul(one_hot, log_probabilities(rows)), {-1})));
}

Tensor CategoricalCrossentropy::operator()(const Tensor& y_true, const Tensor& predictions) const {
  const Tensor y_pred = in_float32(predictions);
  constexpr const char* kName = "CategoricalCrossentropy";
  require_scores(kName, y_pred);
  if (y_true.shape() != y_pred.shape()) {
    throw InvalidArgument(std::string(kName) + ": y_true " + shape_str(y_true.shape()) +
                          " must match y_pred " + shape_str(y_pred.shape()) +
                          " (one-hot or soft targets); for class ids use "
                          "SparseCategoricalCrossentropy");
  }
  const Tensor targets = as_rows(as_dtype(y_true, y_pred.dtype()));  // (M, C)
  const Tensor log_p =
      from_logits_ ? log_softmax(as_rows(y_pred), -1) : log_probabilities(as_rows(y_pred));
  return neg(mean(sum(mul(targets, log_p), {-1})));
}

Tensor MeanSquaredError::operator()(const Tensor& y_true, const Tensor& predictions) const {
  const Tensor y_pred = in_float32(predictions);
  if (y_true.shape() != y_pred.shape()) {
    throw InvalidArgument("MeanSquaredError: y_true " + shape_str(y_true.shape()) +
                          " must match y_pred " + shape_str(y_pred.shape()));
  }
  if (!is_floating(y_pred.dtype())) {
    throw InvalidArgument(std::string("MeanSquaredError: y_pred must be floating, got ") +
                          dtype_name(y_pred.dtype()));
  }
  const Tensor targets = as_dtype(y_true, y_pred.dtype());
  return mean(square(sub(y_pred, targets)));
}

}  // namespace tandem::train
