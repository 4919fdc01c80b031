// Quantisation. fake_quantize: the quantise-dequantise round trip of an integer kernel's inputs,
// computed in f32 (f64 for f64 inputs), with the straight-through gradient; post-training
// quantisation calibrates ranges with it and evaluates the quantised model, quantisation-aware
// training trains through it. quantized_conv2d and quantized_matmul: the integer kernels the
// quantised model then runs for inference (no gradient).
#include <string>

#include "ops/op_attrs.h"
#include "ops/op_table.h"
#include "ops/stablehlo.h"
#include "ops/window.h"

namespace tandem {
namespace {

// (x, scale, zero_point) -> (y, in_range), both x's shape and dtype.
std::vector<TensorMeta> infer_fake_quantize(const char* op, std::span<const TensorMeta> in,
                                            const Attrs& attrs) {
  const auto [quant_min, quant_max] = op_attrs<OpKind::fake_quantize>(attrs);
  require_floating(op, in[0]);
  for (std::size_t i = 1; i < 3; ++i) {
    if (in[i].dtype != DType::f32) {
      throw InvalidArgument(std::string(op) + ": " + (i == 1 ? "scale" : "zero_point") + " is " +
                            dtype_name(in[i].dtype) + "; quantisation parameters are f32");
    }
  }
  const Shape& x = in[0].shape;
  const Shape& scale = in[1].shape;
  const bool per_tensor = scale.empty();
  const bool per_channel = scale.size() == 1 && !x.empty() && scale[0] == x.back();
  if (!per_tensor && !per_channel) {
    throw InvalidArgument(std::string(op) + ": scale " + shape_str(scale) + " for x " +
                          shape_str(x) +
                          "; give a scalar (per tensor) or one scale per element of x's last "
                          "axis (per channel)");
  }
  if (in[2].shape != scale) {
    throw InvalidArgument(std::string(op) + ": zero_point " + shape_str(in[2].shape) +
                          " must have scale's shape " + shape_str(scale));
  }
  if (quant_min >= quant_max) {
    throw InvalidArgument(std::string(op) + ": the integer range [" + std::to_string(quant_min) +
                          ", " + std::to_string(quant_max) + "] is empty");
  }
  return {in[0], in[0]};
}

// Straight through where x was in range, nothing where it was clamped (as TensorFlow's
// FakeQuantWithMinMaxVarsGradient passes x's gradient).
std::vector<Tensor> grad_fake_quantize(const GradContext& c) {
  if (!c.output_grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
  return {c.output_grads[0] * c.outputs[1], Tensor(), Tensor()};
}

// A divide, a round, an add, two compares, a clamp, a subtract and a multiply per element.
OpCost fake_quantize_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                          const Attrs&) {
  return elementwise_cost(in.first(1), out, 8.0);
}

// As the kernels: the same operations in the same order, each rounded to the compute type (f32,
// or f64 for an f64 x); the results rounded once to x's dtype.
std::vector<StablehloValue> lower_fake_quantize(StablehloEmitter& emit,
                                                std::span<const StablehloValue> in,
                                                std::span<const TensorMeta>, const Attrs& attrs) {
  const auto [quant_min, quant_max] = op_attrs<OpKind::fake_quantize>(attrs);
  const DType compute = StablehloEmitter::accumulation_type(in[0].dtype);
  const StablehloValue x = emit.convert(in[0], compute);
  const Shape& shape = x.shape;
  const StablehloValue scale = emit.broadcast(emit.convert(in[1], compute), shape);
  const StablehloValue zero_point = emit.broadcast(emit.convert(in[2], compute), shape);
  const auto apply = [&](const char* op, std::vector<StablehloValue> operands) {
    return emit.elementwise(op, operands, compute);
  };
  const StablehloValue q = apply(
      "stablehlo.add",
      {apply("stablehlo.round_nearest_even", {apply("stablehlo.divide", {x, scale})}), zero_point});
  const StablehloValue low = emit.constant(static_cast<double>(quant_min), shape, compute);
  const StablehloValue high = emit.constant(static_cast<double>(quant_max), shape, compute);
  const StablehloValue inside = emit.elementwise(
      "stablehlo.and", {emit.compare(q, low, "GE"), emit.compare(q, high, "LE")}, DType::boolean);
  const StablehloValue y = apply(
      "stablehlo.multiply",
      {apply("stablehlo.subtract", {apply("stablehlo.clamp", {low, q, high}), zero_point}), scale});
  const DType dtype = in[0].dtype;
  const StablehloValue in_range = emit.elementwise(
      "stablehlo.select",
      {inside, emit.constant(1.0, shape, dtype), emit.constant(0.0, shape, dtype)}, dtype);
  return {emit.convert(y, dtype), in_range};
}

// ---- integer products ----
// Inputs (x, input_scale, weights, weight_scale, bias[, residual]) of quantized_conv2d and
// quantized_matmul: the operands both share, checked; the weights' output channels are returned.
std::int64_t check_quantized_operands(const char* op, std::span<const TensorMeta> in,
                                      const char* weights_layout) {
  if (in[0].dtype != DType::f32) {
    throw InvalidArgument(std::string(op) + ": x is " + dtype_name(in[0].dtype) +
                          "; the integer kernels quantise an f32 input (cast it to f32 first)");
  }
  if (in[1].dtype != DType::f32 || !in[1].shape.empty()) {
    throw InvalidArgument(std::string(op) + ": input_scale is " + dtype_name(in[1].dtype) + " " +
                          shape_str(in[1].shape) + "; give one f32 scale (a scalar)");
  }
  if (in[2].dtype != DType::i8) {
    throw InvalidArgument(std::string(op) + ": the weights " + weights_layout + " are " +
                          dtype_name(in[2].dtype) +
                          "; give int8 weights (quantization::quantize_kernel makes them)");
  }
  const std::int64_t channels = in[2].shape.empty() ? 0 : in[2].shape.back();
  for (std::size_t i = 3; i < 5; ++i) {
    if (in[i].dtype != DType::f32 || in[i].shape != Shape{channels}) {
      throw InvalidArgument(std::string(op) + ": " + (i == 3 ? "weight_scale" : "bias") + " is " +
                            dtype_name(in[i].dtype) + " " + shape_str(in[i].shape) +
                            "; give f32 values, one per output channel: " + shape_str({channels}));
    }
  }
  return channels;
}

void check_residual(const char* op, std::span<const TensorMeta> in, bool fused_add,
                    const Shape& output) {
  if (fused_add && (in.size() != 6 || in.back().shape != output || in.back().dtype != DType::f32)) {
    throw InvalidArgument(std::string(op) + ": the fused residual must be f32 " +
                          shape_str(output) + ", the output's shape");
  }
  if (!fused_add && in.size() != 5) {
    throw InvalidArgument(std::string(op) +
                          ": takes x, input_scale, weights, weight_scale and "
                          "bias, got " +
                          std::to_string(in.size()) + " inputs");
  }
}

// x (N, H, W, C_in), filter (KH, KW, C_in, C_out) -> (N, OH, OW, C_out) f32
std::vector<TensorMeta> infer_quantized_conv2d(const char* op, std::span<const TensorMeta> in,
                                               const Attrs& attrs) {
  const QuantizedConv2DAttrs options = op_attrs<OpKind::quantized_conv2d>(attrs);
  check_quantized_operands(op, in, "(KH, KW, C_in, C_out)");
  const Window2D geometry = conv_window(op, in[0].shape, in[2].shape, options);
  check_residual(op, in, options.fused_add, geometry.output_shape());
  return {{geometry.output_shape(), DType::f32}};
}

// x (..., M, K), weights (K, N) -> (..., M, N) f32
std::vector<TensorMeta> infer_quantized_matmul(const char* op, std::span<const TensorMeta> in,
                                               const Attrs& attrs) {
  const std::int64_t channels = check_quantized_operands(op, in, "(K, N)");
  const Shape& x = in[0].shape;
  const Shape& weights = in[2].shape;
  if (x.size() < 2 || weights.size() != 2 || x.back() != weights[0]) {
    throw InvalidArgument(std::string(op) + ": x " + shape_str(x) + " and weights " +
                          shape_str(weights) +
                          " do not multiply; x needs rank >= 2 and K = weights' first extent");
  }
  Shape output = x;
  output.back() = channels;
  check_residual(op, in, op_attrs<OpKind::quantized_matmul>(attrs).fused_add, output);
  return {{output, DType::f32}};
}

// The float product's multiply-adds (each an integer one here), plus per output element the
// scaling, the bias, and a fused residual and relu; x is read once more to quantise it.
OpCost quantized_product_cost(double macs, std::span<const TensorMeta> in,
                              std::span<const TensorMeta> out) {
  const double outputs = static_cast<double>(shape_numel(out[0].shape));
  const double inputs = static_cast<double>(shape_numel(in[0].shape));
  return {2.0 * macs + 4.0 * outputs + 3.0 * inputs, bytes_of(in) + bytes_of(out)};
}

OpCost quantized_conv2d_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                             const Attrs& attrs) {
  const Window2D geometry = conv_window("quantized_conv2d", in[0].shape, in[2].shape,
                                        op_attrs<OpKind::quantized_conv2d>(attrs));
  return quantized_product_cost(geometry.window_visits() * static_cast<double>(geometry.in_c) *
                                    static_cast<double>(geometry.out_c),
                                in, out);
}

OpCost quantized_matmul_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                             const Attrs&) {
  return quantized_product_cost(
      static_cast<double>(shape_numel(out[0].shape)) * static_cast<double>(in[0].shape.back()), in,
      out);
}

// The float product's lowering on integer-valued f32 operands: q = clamp(round(x / scale)) and
// the weights converted, then the per-channel scale, the bias, a residual and relu. Every
// product of a q and a weight is exact in f32; their sums round as the float product's do.
template <OpKind Kind, OpKind FloatKind>
std::vector<StablehloValue> lower_quantized_product(StablehloEmitter& emit,
                                                    std::span<const StablehloValue> in,
                                                    std::span<const TensorMeta> out,
                                                    const OpAttrs<FloatKind>& float_attrs,
                                                    const OpAttrs<Kind>& attrs) {
  const StablehloValue& x = in[0];
  const Shape& shape = out[0].shape;
  const DType f32 = DType::f32;
  const auto apply = [&](const char* op, std::vector<StablehloValue> operands) {
    return emit.elementwise(op, operands, f32);
  };
  const StablehloValue input_scale = emit.broadcast(in[1], x.shape);
  const double low = attrs.input_unsigned ? 0.0 : -128.0;
  const double high = attrs.input_unsigned ? 255.0 : 127.0;
  const StablehloValue q =
      apply("stablehlo.clamp",
            {emit.constant(low, x.shape, f32),
             apply("stablehlo.round_nearest_even", {apply("stablehlo.divide", {x, input_scale})}),
             emit.constant(high, x.shape, f32)});
  const StablehloValue weights = emit.convert(in[2], f32);
  const std::vector<StablehloValue> operands{q, weights};
  const TensorMeta product_meta{shape, f32};
  StablehloValue y = op_def(FloatKind).lower(emit, operands, {&product_meta, 1},
                                             make_op_attrs<FloatKind>(float_attrs))[0];
  const StablehloValue scale = emit.broadcast(
      apply("stablehlo.multiply", {emit.broadcast(in[1], in[3].shape), in[3]}), shape);
  y = apply("stablehlo.add",
            {apply("stablehlo.multiply", {y, scale}), emit.broadcast(in[4], shape)});
  if (attrs.fused_add) y = apply("stablehlo.add", {y, in[5]});
  if (attrs.fused_relu) y = apply("stablehlo.maximum", {y, emit.constant(0.0, shape, f32)});
  return {y};
}

std::vector<StablehloValue> lower_quantized_conv2d(StablehloEmitter& emit,
                                                   std::span<const StablehloValue> in,
                                                   std::span<const TensorMeta> out,
                                                   const Attrs& attrs) {
  const QuantizedConv2DAttrs options = op_attrs<OpKind::quantized_conv2d>(attrs);
  Conv2DAttrs product;
  static_cast<Conv2DOptions&>(product) = options;
  return lower_quantized_product<OpKind::quantized_conv2d, OpKind::conv2d>(emit, in, out, product,
                                                                           options);
}

std::vector<StablehloValue> lower_quantized_matmul(StablehloEmitter& emit,
                                                   std::span<const StablehloValue> in,
                                                   std::span<const TensorMeta> out,
                                                   const Attrs& attrs) {
  return lower_quantized_product<OpKind::quantized_matmul, OpKind::matmul>(
      emit, in, out, MatmulAttrs{}, op_attrs<OpKind::quantized_matmul>(attrs));
}

std::vector<Tensor> quantized_product_inputs(const Tensor& x, const QuantizedInput& input,
                                             const Tensor& weights, const Tensor& weight_scale,
                                             const Tensor& bias) {
  return {x, input.scale, weights, weight_scale, bias};
}

// The residual (f32, as the result) is what the result is accumulated onto.
template <OpKind Kind>
int quantized_product_in_place_input(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return op_attrs<Kind>(attrs).fused_add ? static_cast<int>(inputs.size()) - 1 : -1;
}

}  // namespace

std::vector<OpDef> define_quantize_ops() {
  using K = OpKind;
  return op_family<k_quantize_ops>(
      OpRules<K::fake_quantize>{3, 3, infer_fake_quantize, grad_fake_quantize, fake_quantize_cost,
                                lower_fake_quantize},
      OpRules<K::quantized_conv2d>{5,
                                   6,
                                   infer_quantized_conv2d,
                                   nullptr,
                                   quantized_conv2d_cost,
                                   lower_quantized_conv2d,
                                   {},
                                   false,
                                   quantized_product_in_place_input<K::quantized_conv2d>},
      OpRules<K::quantized_matmul>{5,
                                   6,
                                   infer_quantized_matmul,
                                   nullptr,
                                   quantized_matmul_cost,
                                   lower_quantized_matmul,
                                   {},
                                   false,
                                   quantized_product_in_place_input<K::quantized_matmul>});
}

FakeQuantizeResult fake_quantize(const Tensor& x, const Tensor& scale, const Tensor& zero_point,
                                 std::int64_t quant_min, std::int64_t quant_max) {
  std::vector<Tensor> outputs =
      call_op(OpKind::fake_quantize, {x, scale, zero_point},
              make_op_attrs<OpKind::fake_quantize>({quant_min, quant_max}));
  return {std::move(outputs[0]), std::move(outputs[1])};
}

Tensor quantized_conv2d(const Tensor& x, const QuantizedInput& input, const Tensor& filter,
                        const Tensor& filter_scale, const Tensor& bias,
                        const Conv2DOptions& options) {
  QuantizedConv2DAttrs attrs;
  static_cast<Conv2DOptions&>(attrs) = options;
  attrs.input_unsigned = input.is_unsigned;
  return call_op(OpKind::quantized_conv2d,
                 quantized_product_inputs(x, input, filter, filter_scale, bias),
                 make_op_attrs<OpKind::quantized_conv2d>(attrs))[0];
}

Tensor quantized_matmul(const Tensor& x, const QuantizedInput& input, const Tensor& weights,
                        const Tensor& weight_scale, const Tensor& bias) {
  QuantizedMatmulAttrs attrs;
  attrs.input_unsigned = input.is_unsigned;
  return call_op(OpKind::quantized_matmul,
                 quantized_product_inputs(x, input, weights, weight_scale, bias),
                 make_op_attrs<OpKind::quantized_matmul>(attrs))[0];
}

}  // namespace tandem
