// Softmax and log-softmax along one axis, their backward kernels (which take the forward output
// y, not x) and the gradient rules, second order included, side by side.
#include <limits>
#include <string>

#include "ops/op_attrs.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

std::vector<TensorMeta> infer_softmax(const char* op, std::span<const TensorMeta> in,
                                      const Attrs& attrs) {
  require_floating(op, in[0]);
  normalize_axis(op, read_attrs<AxisAttrs>(attrs).axis, in[0].shape);
  return {in[0]};
}

// (dy, y) -> dx, all of one shape.
std::vector<TensorMeta> infer_softmax_backward(const char* op, std::span<const TensorMeta> in,
                                               const Attrs& attrs) {
  require_same_dtype(op, in);
  if (in[0].shape != in[1].shape) {
    throw InvalidArgument(std::string(op) + ": dy " + shape_str(in[0].shape) +
                          " and the forward output y " + shape_str(in[1].shape) +
                          " must have the same shape");
  }
  return infer_softmax(op, in.subspan(1), attrs);
}

// max, subtract, exp, sum, divide (or log): about 5 operations per element.
OpCost softmax_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return elementwise_cost(in, out, 5.0);
}

OpCost softmax_backward_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                             const Attrs&) {
  return elementwise_cost(in, out, 4.0);
}

std::int64_t axis_of(const GradContext& c) {
  return read_attrs<AxisAttrs>(c.attrs).axis;
}

std::vector<Tensor> grad_softmax(const GradContext& c) {
  return {softmax_backward(c.output_grads[0], c.outputs[0], axis_of(c))};
}

std::vector<Tensor> grad_log_softmax(const GradContext& c) {
  return {log_softmax_backward(c.output_grads[0], c.outputs[0], axis_of(c))};
}

// dx = y (dy - s) with s = sum(dy y). For an upstream g: d dy = y (g - sum(g y)), which is
// softmax_backward(g, y) again, and d y = g (dy - s) - dy sum(g y).
std::vector<Tensor> grad_softmax_backward(const GradContext& c) {
  const Tensor& g = c.output_grads[0];
  const Tensor& dy = c.inputs[0];
  const Tensor& y = c.inputs[1];
  const std::int64_t axis = axis_of(c);
  const Tensor dy_dot_y = sum(dy * y, {axis}, true);
  const Tensor g_dot_y = sum(g * y, {axis}, true);
  return {softmax_backward(g, y, axis), g * (dy - dy_dot_y) - dy * g_dot_y};
}

// dx = dy - exp(y) sum(dy). For an upstream g: d dy = g - sum(g exp(y)) and
// d y = -g exp(y) sum(dy).
std::vector<Tensor> grad_log_softmax_backward(const GradContext& c) {
  const Tensor& g = c.output_grads[0];
  const Tensor& dy = c.inputs[0];
  const std::int64_t axis = axis_of(c);
  const Tensor probabilities = exp(c.inputs[1]);
  return {g - sum(g * probabilities, {axis}, true), -(g * probabilities * sum(dy, {axis}, true))};
}

Tensor softmax_op(OpKind kind, const std::vector<Tensor>& inputs, std::int64_t axis) {
  return call_op(kind, inputs, write_attrs(AxisAttrs{axis}))[0];
}

// ---- StableHLO ----

// The written axis (the wrappers may leave it negative), counted from the front.
std::int64_t lowered_axis(const Attrs& attrs, const StablehloValue& x) {
  const std::int64_t axis = read_attrs<AxisAttrs>(attrs).axis;
  return axis < 0 ? axis + static_cast<std::int64_t>(x.shape.size()) : axis;
}

// exp(x - max) / sum(exp(x - max)), or its log (x - max) - log(sum(exp(x - max))), along the
// axis: the shift keeps exp finite, as the CPU kernels do. 16-bit floats compute in f32 and
// round once, as the kernels' compute type does.
template <bool kLog>
std::vector<StablehloValue> lower_softmax(StablehloEmitter& emit,
                                          std::span<const StablehloValue> in,
                                          std::span<const TensorMeta> out, const Attrs& attrs) {
  const StablehloValue x = emit.widened(in[0]);
  const std::int64_t axis = lowered_axis(attrs, x);
  const DType dtype = x.dtype;
  const StablehloValue peak =
      emit.reduce_back(x, axis, "stablehlo.maximum", -std::numeric_limits<double>::infinity());
  const StablehloValue shifted = emit.elementwise("stablehlo.subtract", {x, peak}, dtype);
  const StablehloValue exponentials = emit.elementwise("stablehlo.exponential", {shifted}, dtype);
  const StablehloValue total = emit.reduce_back(exponentials, axis, "stablehlo.add", 0.0);
  if (kLog) {
    const StablehloValue log_total = emit.elementwise("stablehlo.log", {total}, dtype);
    return {emit.convert(emit.elementwise("stablehlo.subtract", {shifted, log_total}, dtype),
                         out[0].dtype)};
  }
  return {emit.convert(emit.elementwise("stablehlo.divide", {exponentials, total}, dtype),
                       out[0].dtype)};
}

// softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy); in f32 for 16-bit
// floats, as the forward.
template <bool kLog>
std::vector<StablehloValue> lower_softmax_backward(StablehloEmitter& emit,
                                                   std::span<const StablehloValue> in,
                                                   std::span<const TensorMeta> out,
                                                   const Attrs& attrs) {
  const StablehloValue dy = emit.widened(in[0]);
  const StablehloValue y = emit.widened(in[1]);
  const std::int64_t axis = lowered_axis(attrs, y);
  const DType dtype = y.dtype;
  if (kLog) {
    const StablehloValue total = emit.reduce_back(dy, axis, "stablehlo.add", 0.0);
    const StablehloValue probabilities = emit.elementwise("stablehlo.exponential", {y}, dtype);
    return {emit.convert(
        emit.elementwise(
            "stablehlo.subtract",
            {dy, emit.elementwise("stablehlo.multiply", {probabilities, total}, dtype)}, dtype),
        out[0].dtype)};
  }
  const StablehloValue dot = emit.reduce_back(
      emit.elementwise("stablehlo.multiply", {dy, y}, dtype), axis, "stablehlo.add", 0.0);
  return {emit.convert(
      emit.elementwise("stablehlo.multiply",
                       {y, emit.elementwise("stablehlo.subtract", {dy, dot}, dtype)}, dtype),
      out[0].dtype)};
}

}  // namespace

std::vector<OpDef> define_softmax_ops() {
  using K = OpKind;
  return op_family<k_softmax_ops>(
      OpRules<K::softmax>{1, 1, infer_softmax, grad_softmax, softmax_cost, lower_softmax<false>},
      OpRules<K::softmax_backward>{2, 2, infer_softmax_backward, grad_softmax_backward,
                                   softmax_backward_cost, lower_softmax_backward<false>},
      OpRules<K::log_softmax>{1, 1, infer_softmax, grad_log_softmax, softmax_cost,
                              lower_softmax<true>},
      OpRules<K::log_softmax_backward>{2, 2, infer_softmax_backward, grad_log_softmax_backward,
                                       softmax_backward_cost, lower_softmax_backward<true>});
}

Tensor softmax(const Tensor& x, std::int64_t axis) {
  return softmax_op(OpKind::softmax, {x}, axis);
}
Tensor log_softmax(const Tensor& x, std::int64_t axis) {
  return softmax_op(OpKind::log_softmax, {x}, axis);
}
Tensor softmax_backward(const Tensor& dy, const Tensor& y, std::int64_t axis) {
  return softmax_op(OpKind::softmax_backward, {dy, y}, axis);
}
Tensor log_softmax_backward(const Tensor& dy, const Tensor& y, std::int64_t axis) {
  return softmax_op(OpKind::log_softmax_backward, {dy, y}, axis);
}

}  // namespace tandem
