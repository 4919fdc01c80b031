// Sparse softmax cross-entropy: per-example loss and its gradient with respect to the logits in
// one fused op (like tf.nn.sparse_softmax_cross_entropy_with_logits), with its gradient rule.
#include <limits>
#include <string>
#include <utility>

#include "ops/op_table.h"

namespace tandem {
namespace {

// logits (N, C) float, labels (N,) i32/i64 -> loss (N,), backprop (N, C). Label values are
// checked by the kernel, which reads them.
std::vector<TensorMeta> infer_sparse_softmax_cross_entropy(const char* op,
                                                           std::span<const TensorMeta> in,
                                                           const Attrs&) {
  const TensorMeta& logits = in[0];
  const TensorMeta& labels = in[1];
  require_floating(op, logits);
  require_rank(op, "logits", logits, 2);
  if (labels.dtype != DType::i32 && labels.dtype != DType::i64) {
    throw InvalidArgument(std::string(op) + ": labels must be i32 or i64 class indices, got " +
                          dtype_name(labels.dtype) + " of shape " + shape_str(labels.shape) +
                          "; for one-hot labels take argmax or use a dense cross-entropy");
  }
  if (labels.shape != Shape{logits.shape[0]}) {
    throw InvalidArgument(std::string(op) + ": labels " + shape_str(labels.shape) +
                          " must have shape (" + std::to_string(logits.shape[0]) +
                          ",), one class index per row of logits " + shape_str(logits.shape));
  }
  if (logits.shape[1] == 0 && logits.shape[0] > 0) {
    throw InvalidArgument(std::string(op) + ": logits " + shape_str(logits.shape) +
                          " have no classes");
  }
  return {{{logits.shape[0]}, logits.dtype}, logits};
}

// max, exp, sum, divide and subtract per logit.
OpCost cross_entropy_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                          const Attrs&) {
  return {5.0 * static_cast<double>(shape_numel(in[0].shape)), bytes_of(in) + bytes_of(out)};
}

// d loss_i / d logits_i = backprop_i, so the logits get backprop * dloss[:, None]. Should a
// gradient reach backprop itself (second order), backprop = softmax(logits) - one_hot adds
// softmax_backward of it. Integer labels get none.
std::vector<Tensor> grad_sparse_softmax_cross_entropy(const GradContext& c) {
  const Tensor& d_loss = c.output_grads[0];      // (N,)
  const Tensor& d_backprop = c.output_grads[1];  // (N, C)
  const Tensor& backprop = c.outputs[1];         // (N, C)
  Tensor d_logits;                               // (N, C)
  if (d_loss.defined()) d_logits = backprop * reshape(d_loss, {d_loss.dim(0), 1});
  if (d_backprop.defined()) {
    const Tensor second_order = softmax_backward(d_backprop, softmax(c.inputs[0]));
    d_logits = d_logits.defined() ? d_logits + second_order : second_order;
  }
  return {d_logits, Tensor()};
}

// ---- StableHLO ----

// loss = log(sum(exp(z))) - z[label] and backprop = softmax(logits) - one_hot(label), with
// z = logits - max(logits) per row. Labels outside [0, C) give a zero one-hot row here; the CPU
// and CUDA kernels refuse them (XLA has no way to stop a program with an error).
std::vector<StablehloValue> lower_sparse_softmax_cross_entropy(StablehloEmitter& emit,
                                                               std::span<const StablehloValue> in,
                                                               std::span<const TensorMeta>,
                                                               const Attrs&) {
  const StablehloValue& logits = in[0];  // (N, C)
  const StablehloValue& labels = in[1];  // (N,)
  const DType dtype = logits.dtype;
  const StablehloValue peak =
      emit.reduce_back(logits, 1, "stablehlo.maximum", -std::numeric_limits<double>::infinity());
  const StablehloValue shifted = emit.elementwise("stablehlo.subtract", {logits, peak}, dtype);
  const StablehloValue exponentials = emit.elementwise("stablehlo.exponential", {shifted}, dtype);
  const StablehloValue total = emit.reduce(exponentials, {1}, "stablehlo.add", 0.0);  // (N,)
  const StablehloValue classes = emit.iota(logits.shape, 1, labels.dtype);
  const StablehloValue is_label =
      emit.compare(classes, emit.broadcast_in_dim(labels, logits.shape, {0}), "EQ");
  const StablehloValue one_hot = emit.convert(is_label, dtype);  // (N, C)
  const StablehloValue picked = emit.reduce(
      emit.elementwise("stablehlo.multiply", {shifted, one_hot}, dtype), {1}, "stablehlo.add",
      0.0);  // (N,)
  const StablehloValue loss = emit.elementwise(
      "stablehlo.subtract", {emit.elementwise("stablehlo.log", {total}, dtype), picked}, dtype);
  const StablehloValue probabilities = emit.elementwise(
      "stablehlo.divide", {exponentials, emit.broadcast_in_dim(total, logits.shape, {0})}, dtype);
  return {loss, emit.elementwise("stablehlo.subtract", {probabilities, one_hot}, dtype)};
}

}  // namespace

std::vector<OpDef> define_loss_ops() {
  return op_family<k_loss_ops>(OpRules<OpKind::sparse_softmax_cross_entropy>{
      2, 2, infer_sparse_softmax_cross_entropy, grad_sparse_softmax_cross_entropy,
      cross_entropy_cost, lower_sparse_softmax_cross_entropy});
}

CrossEntropyResult sparse_softmax_cross_entropy_with_logits(const Tensor& logits,
                                                            const Tensor& labels) {
  std::vector<Tensor> outputs = call_op(OpKind::sparse_softmax_cross_entropy, {logits, labels});
  return {std::move(outputs[0]), std::move(outputs[1])};
}

}  // namespace tandem
