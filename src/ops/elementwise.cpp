// Element-wise ops: unary math and activations with their backward kernels, binary arithmetic
// with NumPy broadcasting, comparisons and select. Forward wrappers, definitions and gradient
// rules side by side.
#include <cmath>

#include "ops/op_attrs.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

Tensor first(std::vector<Tensor> outputs) {
  return std::move(outputs[0]);
}

std::vector<TensorMeta> infer_unary(const char*, std::span<const TensorMeta> in, const Attrs&) {
  return {in[0]};
}

std::vector<TensorMeta> infer_unary_floating(const char* op, std::span<const TensorMeta> in,
                                             const Attrs&) {
  require_floating(op, in[0]);
  return {in[0]};
}

// Backward kernels take (dy, x_or_y) of one shape and dtype.
std::vector<TensorMeta> infer_unary_backward(const char* op, std::span<const TensorMeta> in,
                                             const Attrs&) {
  require_same_dtype(op, in);
  if (in[0].shape != in[1].shape) {
    throw InvalidArgument(std::string(op) + ": dy " + shape_str(in[0].shape) +
                          " and the forward tensor " + shape_str(in[1].shape) +
                          " must have the same shape");
  }
  return {in[0]};
}

std::vector<TensorMeta> infer_binary(const char* op, std::span<const TensorMeta> in, const Attrs&) {
  require_same_dtype(op, in);
  return {{broadcast_shapes(op, in[0].shape, in[1].shape), in[0].dtype}};
}

std::vector<TensorMeta> infer_comparison(const char* op, std::span<const TensorMeta> in,
                                         const Attrs& attrs) {
  std::vector<TensorMeta> out = infer_binary(op, in, attrs);
  out[0].dtype = DType::boolean;
  return out;
}

std::vector<TensorMeta> infer_select(const char*, std::span<const TensorMeta> in, const Attrs&) {
  if (in[0].dtype != DType::boolean) {
    throw InvalidArgument(std::string("where: the condition must be bool, got ") +
                          dtype_name(in[0].dtype) + "; compare with tandem::greater etc.");
  }
  require_same_dtype("where", in.subspan(1));
  const Shape ab = broadcast_shapes("where", in[1].shape, in[2].shape);
  return {{broadcast_shapes("where", in[0].shape, ab), in[1].dtype}};
}

template <int kFlops>
OpCost cost_per_element(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                        const Attrs&) {
  return elementwise_cost(in, out, kFlops);
}

// ---- gradient rules ----
std::vector<Tensor> grad_neg(const GradContext& c) {
  return {neg(c.output_grads[0])};
}
std::vector<Tensor> grad_abs(const GradContext& c) {
  return {mul(c.output_grads[0], sign(c.inputs[0]))};
}
// sign is piecewise constant: zero gradient (and no error when a second-order gradient of abs
// flows through it).
std::vector<Tensor> grad_sign(const GradContext&) {
  return {Tensor()};
}
std::vector<Tensor> grad_exp(const GradContext& c) {
  return {mul(c.output_grads[0], c.outputs[0])};
}
std::vector<Tensor> grad_log(const GradContext& c) {
  return {div(c.output_grads[0], c.inputs[0])};
}
std::vector<Tensor> grad_sqrt(const GradContext& c) {
  return {div(c.output_grads[0], c.outputs[0] * 2.0)};
}
std::vector<Tensor> grad_rsqrt(const GradContext& c) {
  const Tensor& y = c.outputs[0];
  return {c.output_grads[0] * (y * y * y) * -0.5};
}
std::vector<Tensor> grad_square(const GradContext& c) {
  return {c.output_grads[0] * c.inputs[0] * 2.0};
}
// relu_backward masks with the output (y > 0 exactly where x > 0), as TensorFlow's ReluGrad
// may: then nothing needs the input once relu has run, and a compiled step can fuse relu into
// the convolution or product that made it.
std::vector<Tensor> grad_relu(const GradContext& c) {
  return {relu_backward(c.output_grads[0], c.outputs[0])};
}
std::vector<Tensor> grad_gelu(const GradContext& c) {
  return {
      gelu_backward(c.output_grads[0], c.inputs[0], op_attrs<OpKind::gelu>(c.attrs).approximate)};
}
std::vector<Tensor> grad_sigmoid(const GradContext& c) {
  return {sigmoid_backward(c.output_grads[0], c.outputs[0])};
}
std::vector<Tensor> grad_tanh(const GradContext& c) {
  return {tanh_backward(c.output_grads[0], c.outputs[0])};
}
// relu_backward(dy, x) = dy * (x > 0): linear in dy, piecewise constant in x.
std::vector<Tensor> grad_relu_backward(const GradContext& c) {
  return {relu_backward(c.output_grads[0], c.inputs[1]), Tensor()};
}
// sigmoid_backward(dy, y) = dy * y * (1 - y)
std::vector<Tensor> grad_sigmoid_backward(const GradContext& c) {
  const Tensor& g = c.output_grads[0];
  const Tensor& dy = c.inputs[0];
  const Tensor& y = c.inputs[1];
  return {sigmoid_backward(g, y), g * dy * (1.0 - y * 2.0)};
}
// tanh_backward(dy, y) = dy * (1 - y^2)
std::vector<Tensor> grad_tanh_backward(const GradContext& c) {
  const Tensor& g = c.output_grads[0];
  return {tanh_backward(g, c.inputs[1]), g * c.inputs[0] * c.inputs[1] * -2.0};
}

std::vector<Tensor> reduce_to_inputs(const GradContext& c, const Tensor& grad_a,
                                     const Tensor& grad_b) {
  return {grad_a.defined() ? sum_to_shape(grad_a, c.inputs[0].shape()) : Tensor(),
          grad_b.defined() ? sum_to_shape(grad_b, c.inputs[1].shape()) : Tensor()};
}
std::vector<Tensor> grad_add(const GradContext& c) {
  return reduce_to_inputs(c, c.output_grads[0], c.output_grads[0]);
}
std::vector<Tensor> grad_sub(const GradContext& c) {
  return reduce_to_inputs(c, c.output_grads[0], neg(c.output_grads[0]));
}
std::vector<Tensor> grad_mul(const GradContext& c) {
  const Tensor& g = c.output_grads[0];
  return reduce_to_inputs(c, mul(g, c.inputs[1]), mul(g, c.inputs[0]));
}
std::vector<Tensor> grad_div(const GradContext& c) {
  const Tensor& g = c.output_grads[0];
  const Tensor grad_a = div(g, c.inputs[1]);
  return reduce_to_inputs(c, grad_a, neg(mul(grad_a, c.outputs[0])));
}
// Ties send the gradient to the first input, as TensorFlow does.
std::vector<Tensor> grad_maximum(const GradContext& c) {
  const Tensor& g = c.output_grads[0];
  const Tensor zero = scalar_like(g, 0.0);
  const Tensor first_wins = greater_equal(c.inputs[0], c.inputs[1]);
  return reduce_to_inputs(c, where(first_wins, g, zero), where(first_wins, zero, g));
}
std::vector<Tensor> grad_minimum(const GradContext& c) {
  const Tensor& g = c.output_grads[0];
  const Tensor zero = scalar_like(g, 0.0);
  const Tensor second_wins = greater(c.inputs[0], c.inputs[1]);
  return reduce_to_inputs(c, where(second_wins, zero, g), where(second_wins, g, zero));
}
// d(a^b)/da = b a^(b-1); d(a^b)/db = a^b log(a), taken as 0 where a <= 0 (as TensorFlow does).
std::vector<Tensor> grad_pow(const GradContext& c) {
  const Tensor& g = c.output_grads[0];
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  const Tensor grad_a = g * b * pow(a, b - 1.0);
  const Tensor positive = greater(a, scalar_like(a, 0.0));
  const Tensor safe_a = where(positive, a, scalar_like(a, 1.0));
  const Tensor grad_b = g * c.outputs[0] * log(safe_a);
  return reduce_to_inputs(c, grad_a, grad_b);
}
std::vector<Tensor> grad_select(const GradContext& c) {
  const Tensor& g = c.output_grads[0];
  const Tensor zero = scalar_like(g, 0.0);
  const Tensor& condition = c.inputs[0];
  return {Tensor(), sum_to_shape(where(condition, g, zero), c.inputs[1].shape()),
          sum_to_shape(where(condition, zero, g), c.inputs[2].shape())};
}

Tensor unary(OpKind kind, const Tensor& x, const Attrs& attrs = {}) {
  return first(call_op(kind, {x}, attrs));
}
Tensor binary(OpKind kind, const Tensor& a, const Tensor& b) {
  return first(call_op(kind, {a, b}));
}

}  // namespace

std::vector<OpDef> define_elementwise_ops() {
  using K = OpKind;
  return op_family<k_elementwise_ops>(
      OpRules<K::neg>{1, 1, infer_unary, grad_neg, cost_per_element<1>},
      OpRules<K::abs>{1, 1, infer_unary, grad_abs, cost_per_element<1>},
      OpRules<K::sign>{1, 1, infer_unary, grad_sign, cost_per_element<1>},
      OpRules<K::exp>{1, 1, infer_unary_floating, grad_exp, cost_per_element<1>},
      OpRules<K::log>{1, 1, infer_unary_floating, grad_log, cost_per_element<1>},
      OpRules<K::sqrt>{1, 1, infer_unary_floating, grad_sqrt, cost_per_element<1>},
      OpRules<K::rsqrt>{1, 1, infer_unary_floating, grad_rsqrt, cost_per_element<2>},
      OpRules<K::square>{1, 1, infer_unary, grad_square, cost_per_element<1>},
      OpRules<K::relu>{1, 1, infer_unary, grad_relu, cost_per_element<1>},
      OpRules<K::gelu>{1, 1, infer_unary_floating, grad_gelu, cost_per_element<8>},
      OpRules<K::sigmoid>{1, 1, infer_unary_floating, grad_sigmoid, cost_per_element<4>},
      OpRules<K::tanh>{1, 1, infer_unary_floating, grad_tanh, cost_per_element<4>},
      OpRules<K::relu_backward>{2, 2, infer_unary_backward, grad_relu_backward,
                                cost_per_element<1>},
      OpRules<K::gelu_backward>{2, 2, infer_unary_backward, nullptr, cost_per_element<12>},
      OpRules<K::sigmoid_backward>{2, 2, infer_unary_backward, grad_sigmoid_backward,
                                   cost_per_element<3>},
      OpRules<K::tanh_backward>{2, 2, infer_unary_backward, grad_tanh_backward,
                                cost_per_element<3>},
      OpRules<K::add>{2, 2, infer_binary, grad_add, cost_per_element<1>},
      OpRules<K::sub>{2, 2, infer_binary, grad_sub, cost_per_element<1>},
      OpRules<K::mul>{2, 2, infer_binary, grad_mul, cost_per_element<1>},
      OpRules<K::div>{2, 2, infer_binary, grad_div, cost_per_element<1>},
      OpRules<K::maximum>{2, 2, infer_binary, grad_maximum, cost_per_element<1>},
      OpRules<K::minimum>{2, 2, infer_binary, grad_minimum, cost_per_element<1>},
      OpRules<K::pow>{2, 2, infer_binary, grad_pow, cost_per_element<10>},
      OpRules<K::equal>{2, 2, infer_comparison, nullptr, cost_per_element<1>},
      OpRules<K::greater>{2, 2, infer_comparison, nullptr, cost_per_element<1>},
      OpRules<K::greater_equal>{2, 2, infer_comparison, nullptr, cost_per_element<1>},
      OpRules<K::less>{2, 2, infer_comparison, nullptr, cost_per_element<1>},
      OpRules<K::select>{3, 3, infer_select, grad_select, cost_per_element<1>});
}

Tensor neg(const Tensor& x) {
  return unary(OpKind::neg, x);
}
Tensor abs(const Tensor& x) {
  return unary(OpKind::abs, x);
}
Tensor sign(const Tensor& x) {
  return unary(OpKind::sign, x);
}
Tensor exp(const Tensor& x) {
  return unary(OpKind::exp, x);
}
Tensor log(const Tensor& x) {
  return unary(OpKind::log, x);
}
Tensor sqrt(const Tensor& x) {
  return unary(OpKind::sqrt, x);
}
Tensor rsqrt(const Tensor& x) {
  return unary(OpKind::rsqrt, x);
}
Tensor square(const Tensor& x) {
  return unary(OpKind::square, x);
}
Tensor relu(const Tensor& x) {
  return unary(OpKind::relu, x);
}
Tensor gelu(const Tensor& x, bool approximate) {
  return unary(OpKind::gelu, x, make_op_attrs<OpKind::gelu>({approximate}));
}
Tensor sigmoid(const Tensor& x) {
  return unary(OpKind::sigmoid, x);
}
Tensor tanh(const Tensor& x) {
  return unary(OpKind::tanh, x);
}
Tensor relu_backward(const Tensor& dy, const Tensor& x) {
  return first(call_op(OpKind::relu_backward, {dy, x}));
}
Tensor gelu_backward(const Tensor& dy, const Tensor& x, bool approximate) {
  return first(
      call_op(OpKind::gelu_backward, {dy, x}, make_op_attrs<OpKind::gelu_backward>({approximate})));
}
Tensor sigmoid_backward(const Tensor& dy, const Tensor& y) {
  return first(call_op(OpKind::sigmoid_backward, {dy, y}));
}
Tensor tanh_backward(const Tensor& dy, const Tensor& y) {
  return first(call_op(OpKind::tanh_backward, {dy, y}));
}

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(OpKind::add, a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(OpKind::sub, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(OpKind::mul, a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary(OpKind::div, a, b);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary(OpKind::maximum, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary(OpKind::minimum, a, b);
}
Tensor pow(const Tensor& a, const Tensor& b) {
  return binary(OpKind::pow, a, b);
}
Tensor equal(const Tensor& a, const Tensor& b) {
  return binary(OpKind::equal, a, b);
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return binary(OpKind::greater, a, b);
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return binary(OpKind::greater_equal, a, b);
}
Tensor less(const Tensor& a, const Tensor& b) {
  return binary(OpKind::less, a, b);
}
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  return first(call_op(OpKind::select, {condition, a, b}));
}

Tensor scalar_like(const Tensor& x, double value) {
  return Tensor::scalar(value, x.dtype(), x.device());
}

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator-(const Tensor& x) {
  return neg(x);
}
Tensor operator+(const Tensor& a, double b) {
  return add(a, scalar_like(a, b));
}
Tensor operator-(const Tensor& a, double b) {
  return sub(a, scalar_like(a, b));
}
Tensor operator*(const Tensor& a, double b) {
  return mul(a, scalar_like(a, b));
}
Tensor operator/(const Tensor& a, double b) {
  return div(a, scalar_like(a, b));
}
Tensor operator+(double a, const Tensor& b) {
  return add(scalar_like(b, a), b);
}
Tensor operator-(double a, const Tensor& b) {
  return sub(scalar_like(b, a), b);
}
Tensor operator*(double a, const Tensor& b) {
  return mul(scalar_like(b, a), b);
}
Tensor operator/(double a, const Tensor& b) {
  return div(scalar_like(b, a), b);
}

}  // namespace tandem
