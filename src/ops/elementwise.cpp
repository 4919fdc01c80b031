// Element-wise ops: unary math and activations with their backward kernels, binary arithmetic
// with NumPy broadcasting, comparisons and select. Forward wrappers, definitions and gradient
// rules side by side.
#include <cmath>
#include <numbers>

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

// ---- StableHLO ----

// The constants of the GELU formulas, as the CPU kernels compute them.
const double kGeluTanhScale = std::numbers::sqrt2 / std::sqrt(std::numbers::pi);  // sqrt(2/pi)
const double kInverseSqrtTwo = 1.0 / std::numbers::sqrt2;
const double kInverseSqrtTwoPi = 1.0 / std::sqrt(2.0 * std::numbers::pi);

using Lowered = std::vector<StablehloValue>;
using LoweredInputs = std::span<const StablehloValue>;
using LoweredOutputs = std::span<const TensorMeta>;

template <StablehloName Op>
Lowered lower_unary(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out, const Attrs&) {
  return {emit.elementwise(Op.text, {in[0]}, out[0].dtype)};
}

// Both operands broadcast to the output's shape first: StableHLO does not broadcast implicitly.
template <StablehloName Op>
Lowered lower_binary(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out, const Attrs&) {
  const Shape& shape = out[0].shape;
  return {emit.elementwise(Op.text, {emit.broadcast(in[0], shape), emit.broadcast(in[1], shape)},
                           out[0].dtype)};
}

template <StablehloName Direction>
Lowered lower_comparison(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out,
                         const Attrs&) {
  const Shape& shape = out[0].shape;
  return {emit.compare(emit.broadcast(in[0], shape), emit.broadcast(in[1], shape), Direction.text)};
}

StablehloValue greater_than_zero(StablehloEmitter& emit, const StablehloValue& x) {
  return emit.compare(x, emit.constant(0.0, x.shape, x.dtype), "GT");
}

Lowered lower_square(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out, const Attrs&) {
  return {emit.elementwise("stablehlo.multiply", {in[0], in[0]}, out[0].dtype)};
}

Lowered lower_relu(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out, const Attrs&) {
  const StablehloValue zero = emit.constant(0.0, in[0].shape, in[0].dtype);
  return {emit.elementwise("stablehlo.maximum", {in[0], zero}, out[0].dtype)};
}

// The formulas below of several steps compute 16-bit floats in f32 (emit.widened) and round
// once, as the CPU kernels do (their compute type); one rounding per step would lose a bit or two
// more.
// x * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2, or x * (1 + erf(x / sqrt(2))) / 2: the
// formulas of the CPU kernels.
Lowered lower_gelu(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out,
                   const Attrs& attrs) {
  const StablehloValue x = emit.widened(in[0]);
  const auto constant = [&](double value) { return emit.constant(value, x.shape, x.dtype); };
  const auto op = [&](const char* name, const StablehloValue& a, const StablehloValue& b) {
    return emit.elementwise(name, {a, b}, x.dtype);
  };
  StablehloValue curve;
  if (op_attrs<OpKind::gelu>(attrs).approximate) {
    const StablehloValue cube = op("stablehlo.multiply", op("stablehlo.multiply", x, x), x);
    const StablehloValue inner =
        op("stablehlo.multiply", constant(kGeluTanhScale),
           op("stablehlo.add", x, op("stablehlo.multiply", constant(0.044715), cube)));
    curve = emit.elementwise("stablehlo.tanh", {inner}, x.dtype);
  } else {
    curve = emit.elementwise("chlo.erf", {op("stablehlo.multiply", x, constant(kInverseSqrtTwo))},
                             x.dtype);
  }
  const StablehloValue half_x = op("stablehlo.multiply", constant(0.5), x);
  return {emit.convert(op("stablehlo.multiply", half_x, op("stablehlo.add", constant(1.0), curve)),
                       out[0].dtype)};
}

// dy where y > 0 (y = relu(x)), else 0.
Lowered lower_relu_backward(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out,
                            const Attrs&) {
  const StablehloValue zero = emit.constant(0.0, in[0].shape, in[0].dtype);
  return {emit.elementwise("stablehlo.select", {greater_than_zero(emit, in[1]), in[0], zero},
                           out[0].dtype)};
}

// dy * y * (1 - y) for y = sigmoid(x); dy * (1 - y^2) for y = tanh(x).
template <bool kTanh>
Lowered lower_saturating_backward(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out,
                                  const Attrs&) {
  const StablehloValue dy = emit.widened(in[0]);
  const StablehloValue y = emit.widened(in[1]);
  const auto op = [&](const char* name, const StablehloValue& a, const StablehloValue& b) {
    return emit.elementwise(name, {a, b}, y.dtype);
  };
  const StablehloValue one = emit.constant(1.0, y.shape, y.dtype);
  const StablehloValue slope = kTanh
                                   ? op("stablehlo.subtract", one, op("stablehlo.multiply", y, y))
                                   : op("stablehlo.multiply", y, op("stablehlo.subtract", one, y));
  return {emit.convert(op("stablehlo.multiply", dy, slope), out[0].dtype)};
}

// dy * gelu'(x), the derivative of either formula of lower_gelu.
Lowered lower_gelu_backward(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out,
                            const Attrs& attrs) {
  const StablehloValue dy = emit.widened(in[0]);
  const StablehloValue x = emit.widened(in[1]);
  const auto constant = [&](double value) { return emit.constant(value, x.shape, x.dtype); };
  const auto op = [&](const char* name, const StablehloValue& a, const StablehloValue& b) {
    return emit.elementwise(name, {a, b}, x.dtype);
  };
  const StablehloValue x2 = op("stablehlo.multiply", x, x);
  StablehloValue slope;
  if (op_attrs<OpKind::gelu_backward>(attrs).approximate) {
    const StablehloValue inner =
        op("stablehlo.multiply", constant(kGeluTanhScale),
           op("stablehlo.add", x,
              op("stablehlo.multiply", constant(0.044715), op("stablehlo.multiply", x2, x))));
    const StablehloValue t = emit.elementwise("stablehlo.tanh", {inner}, x.dtype);
    const StablehloValue left =
        op("stablehlo.multiply", constant(0.5), op("stablehlo.add", constant(1.0), t));
    const StablehloValue sech2 =
        op("stablehlo.subtract", constant(1.0), op("stablehlo.multiply", t, t));
    const StablehloValue inner_slope = op(
        "stablehlo.multiply", constant(kGeluTanhScale),
        op("stablehlo.add", constant(1.0), op("stablehlo.multiply", constant(3 * 0.044715), x2)));
    const StablehloValue right =
        op("stablehlo.multiply", op("stablehlo.multiply", constant(0.5), x),
           op("stablehlo.multiply", sech2, inner_slope));
    slope = op("stablehlo.add", left, right);
  } else {
    const StablehloValue erf = emit.elementwise(
        "chlo.erf", {op("stablehlo.multiply", x, constant(kInverseSqrtTwo))}, x.dtype);
    const StablehloValue cdf =
        op("stablehlo.multiply", constant(0.5), op("stablehlo.add", constant(1.0), erf));
    const StablehloValue gauss = emit.elementwise(
        "stablehlo.exponential", {op("stablehlo.multiply", constant(-0.5), x2)}, x.dtype);
    const StablehloValue pdf = op("stablehlo.multiply", constant(kInverseSqrtTwoPi), gauss);
    slope = op("stablehlo.add", cdf, op("stablehlo.multiply", x, pdf));
  }
  return {emit.convert(emit.elementwise("stablehlo.multiply", {dy, slope}, x.dtype), out[0].dtype)};
}

// where(condition, a, b), every operand broadcast to the output's shape.
Lowered lower_select(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out, const Attrs&) {
  const Shape& shape = out[0].shape;
  return {emit.elementwise(
      "stablehlo.select",
      {emit.broadcast(in[0], shape), emit.broadcast(in[1], shape), emit.broadcast(in[2], shape)},
      out[0].dtype)};
}

}  // namespace

std::vector<OpDef> define_elementwise_ops() {
  using K = OpKind;
  return op_family<k_elementwise_ops>(
      OpRules<K::neg>{1, 1, infer_unary, grad_neg, cost_per_element<1>,
                      lower_unary<"stablehlo.negate">},
      OpRules<K::abs>{1, 1, infer_unary, grad_abs, cost_per_element<1>,
                      lower_unary<"stablehlo.abs">},
      OpRules<K::sign>{1, 1, infer_unary, grad_sign, cost_per_element<1>,
                       lower_unary<"stablehlo.sign">},
      OpRules<K::exp>{1, 1, infer_unary_floating, grad_exp, cost_per_element<1>,
                      lower_unary<"stablehlo.exponential">},
      OpRules<K::log>{1, 1, infer_unary_floating, grad_log, cost_per_element<1>,
                      lower_unary<"stablehlo.log">},
      OpRules<K::sqrt>{1, 1, infer_unary_floating, grad_sqrt, cost_per_element<1>,
                       lower_unary<"stablehlo.sqrt">},
      OpRules<K::rsqrt>{1, 1, infer_unary_floating, grad_rsqrt, cost_per_element<2>,
                        lower_unary<"stablehlo.rsqrt">},
      OpRules<K::square>{1, 1, infer_unary, grad_square, cost_per_element<1>, lower_square},
      OpRules<K::relu>{1, 1, infer_unary, grad_relu, cost_per_element<1>, lower_relu},
      OpRules<K::gelu>{1, 1, infer_unary_floating, grad_gelu, cost_per_element<8>, lower_gelu},
      OpRules<K::sigmoid>{1, 1, infer_unary_floating, grad_sigmoid, cost_per_element<4>,
                          lower_unary<"stablehlo.logistic">},
      OpRules<K::tanh>{1, 1, infer_unary_floating, grad_tanh, cost_per_element<4>,
                       lower_unary<"stablehlo.tanh">},
      OpRules<K::relu_backward>{2, 2, infer_unary_backward, grad_relu_backward, cost_per_element<1>,
                                lower_relu_backward},
      OpRules<K::gelu_backward>{2, 2, infer_unary_backward, nullptr, cost_per_element<12>,
                                lower_gelu_backward},
      OpRules<K::sigmoid_backward>{2, 2, infer_unary_backward, grad_sigmoid_backward,
                                   cost_per_element<3>, lower_saturating_backward<false>},
      OpRules<K::tanh_backward>{2, 2, infer_unary_backward, grad_tanh_backward, cost_per_element<3>,
                                lower_saturating_backward<true>},
      OpRules<K::add>{2, 2, infer_binary, grad_add, cost_per_element<1>,
                      lower_binary<"stablehlo.add">},
      OpRules<K::sub>{2, 2, infer_binary, grad_sub, cost_per_element<1>,
                      lower_binary<"stablehlo.subtract">},
      OpRules<K::mul>{2, 2, infer_binary, grad_mul, cost_per_element<1>,
                      lower_binary<"stablehlo.multiply">},
      OpRules<K::div>{2, 2, infer_binary, grad_div, cost_per_element<1>,
                      lower_binary<"stablehlo.divide">},
      OpRules<K::maximum>{2, 2, infer_binary, grad_maximum, cost_per_element<1>,
                          lower_binary<"stablehlo.maximum">},
      OpRules<K::minimum>{2, 2, infer_binary, grad_minimum, cost_per_element<1>,
                          lower_binary<"stablehlo.minimum">},
      OpRules<K::pow>{2, 2, infer_binary, grad_pow, cost_per_element<10>,
                      lower_binary<"stablehlo.power">},
      OpRules<K::equal>{2, 2, infer_comparison, nullptr, cost_per_element<1>,
                        lower_comparison<"EQ">},
      OpRules<K::greater>{2, 2, infer_comparison, nullptr, cost_per_element<1>,
                          lower_comparison<"GT">},
      OpRules<K::greater_equal>{2, 2, infer_comparison, nullptr, cost_per_element<1>,
                                lower_comparison<"GE">},
      OpRules<K::less>{2, 2, infer_comparison, nullptr, cost_per_element<1>,
                       lower_comparison<"LT">},
      OpRules<K::select>{3, 3, infer_select, grad_select, cost_per_element<1>, lower_select});
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
