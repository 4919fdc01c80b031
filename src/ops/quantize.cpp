// fake_quantize: the quantise-dequantise round trip of an integer kernel's inputs, computed in
// f32 (f64 for f64 inputs), with the straight-through gradient. Post-training quantisation
// calibrates ranges with it and evaluates the quantised model; quantisation-aware training trains
// through it.
#include <string>

#include "ops/op_attrs.h"
#include "ops/op_table.h"
#include "ops/stablehlo.h"

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

}  // namespace

std::vector<OpDef> define_quantize_ops() {
  return op_family<k_quantize_ops>(OpRules<OpKind::fake_quantize>{
      3, 3, infer_fake_quantize, grad_fake_quantize, fake_quantize_cost, lower_fake_quantize});
}

FakeQuantizeResult fake_quantize(const Tensor& x, const Tensor& scale, const Tensor& zero_point,
                                 std::int64_t quant_min, std::int64_t quant_max) {
  std::vector<Tensor> outputs =
      call_op(OpKind::fake_quantize, {x, scale, zero_point},
              make_op_attrs<OpKind::fake_quantize>({quant_min, quant_max}));
  return {std::move(outputs[0]), std::move(outputs[1])};
}

}  // namespace tandem
