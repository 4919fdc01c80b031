// fused_elementwise (ops/fused.h): its program, shape inference, cost and StableHLO lowering; the
// CPU kernel is in backend/cpu/elementwise.cpp beside the ops' own loops.
#include "ops/fused.h"

#include <algorithm>
#include <limits>

#include "ops/op_attrs.h"
#include "ops/op_table.h"
#include "ops/window.h"

namespace tandem {

int fused_operand_count(OpKind kind) {
  return op_def(kind).min_inputs;
}

Attrs fused_elementwise_attrs(const std::vector<FusedInstruction>& program) {
  FusedElementwiseAttrs attrs;
  for (const FusedInstruction& instruction : program) {
    attrs.program.push_back(static_cast<std::int64_t>(instruction.kind));
    attrs.program.push_back(instruction.a);
    attrs.program.push_back(instruction.b);
  }
  return make_op_attrs<OpKind::fused_elementwise>(attrs);
}

std::vector<FusedInstruction> fused_program(const Attrs& attrs, std::size_t inputs) {
  const std::vector<std::int64_t>& code = op_attrs<OpKind::fused_elementwise>(attrs).program;
  const std::string op = "fused_elementwise";
  if (code.empty() || code.size() % 3 != 0 || code.size() / 3 > kMaxFusedInstructions) {
    throw InvalidArgument(op + ": the program must hold 1 to " +
                          std::to_string(kMaxFusedInstructions) +
                          " instructions of 3 numbers each (op, operand slots), got " +
                          std::to_string(code.size()) + " numbers");
  }
  std::vector<FusedInstruction> program;
  for (std::size_t i = 0; i < code.size(); i += 3) {
    const std::size_t index = i / 3;
    const std::string where = op + " instruction " + std::to_string(index);
    if (code[i] < 0 || code[i] >= kNumOps || !fusible_elementwise(static_cast<OpKind>(code[i]))) {
      throw InvalidArgument(where + ": op " + std::to_string(code[i]) +
                            " is not a correctly rounded element-wise op (add, mul, relu, ...)");
    }
    const FusedInstruction instruction{static_cast<OpKind>(code[i]), code[i + 1], code[i + 2]};
    const auto slots = static_cast<std::int64_t>(inputs + index);  // those defined before it
    const bool binary = fused_operand_count(instruction.kind) == 2;
    const bool a_ok = instruction.a >= 0 && instruction.a < slots;
    const bool b_ok = binary ? instruction.b >= 0 && instruction.b < slots : instruction.b == -1;
    if (!a_ok || !b_ok) {
      throw InvalidArgument(where + " (" + op_name(instruction.kind) + "): operand slots " +
                            std::to_string(instruction.a) + ", " + std::to_string(instruction.b) +
                            " must name one of the " + std::to_string(inputs) +
                            " inputs or an earlier instruction (slots 0.." +
                            std::to_string(slots - 1) + (binary ? "" : "; -1 for b") + ")");
    }
    program.push_back(instruction);
  }
  return program;
}

std::string fused_label(const std::vector<FusedInstruction>& program) {
  std::string label;
  for (const FusedInstruction& instruction : program)
    label += (label.empty() ? "" : "+") + std::string(op_name(instruction.kind));
  return label;
}

bool repeats_into(const Shape& shape, const Shape& output) {
  auto first = std::find_if(shape.begin(), shape.end(), [](std::int64_t d) { return d != 1; });
  const auto kept = static_cast<std::size_t>(shape.end() - first);
  return kept <= output.size() && std::equal(first, shape.end(), output.end() - kept);
}

Attrs pooled_conv2d_attrs(const Attrs& convolution, const Attrs& pooling) {
  const Pool2DOptions pool = op_attrs<OpKind::max_pool2d>(pooling);
  PooledConv2DAttrs attrs;
  static_cast<Conv2DAttrs&>(attrs) = op_attrs<OpKind::conv2d>(convolution);
  attrs.pool_window = pool.window;
  attrs.pool_strides = pool.strides;
  attrs.pool_padding = pool.padding;
  return make_op_attrs<OpKind::pooled_conv2d>(attrs);
}

PooledConvolutionParts pooled_convolution_parts(const Attrs& attrs) {
  const PooledConv2DAttrs pooled = op_attrs<OpKind::pooled_conv2d>(attrs);
  return {make_op_attrs<OpKind::conv2d>(static_cast<const Conv2DAttrs&>(pooled)),
          make_op_attrs<OpKind::max_pool2d>(
              Pool2DOptions{pooled.pool_window, pooled.pool_strides, pooled.pool_padding})};
}

Attrs pooled_conv2d_backward_filter_attrs(const Attrs& pool_gradient,
                                          const Attrs& filter_gradient) {
  const MaxPool2DBackwardAttrs pool = op_attrs<OpKind::max_pool2d_backward>(pool_gradient);
  PooledConv2DBackwardFilterAttrs attrs;
  static_cast<Conv2DBackwardFilterAttrs&>(attrs) =
      op_attrs<OpKind::conv2d_backward_filter>(filter_gradient);
  attrs.pool_window = pool.window;
  attrs.pool_strides = pool.strides;
  attrs.pool_padding = pool.padding;
  attrs.relu_masked = pool.relu_masked;
  return make_op_attrs<OpKind::pooled_conv2d_backward_filter>(attrs);
}

PooledFilterGradientParts pooled_filter_gradient_parts(const Attrs& attrs) {
  const PooledConv2DBackwardFilterAttrs pooled =
      op_attrs<OpKind::pooled_conv2d_backward_filter>(attrs);
  MaxPool2DBackwardAttrs pool;
  pool.window = pooled.pool_window;
  pool.strides = pooled.pool_strides;
  pool.padding = pooled.pool_padding;
  pool.relu_masked = pooled.relu_masked;
  return {make_op_attrs<OpKind::max_pool2d_backward>(pool),
          make_op_attrs<OpKind::conv2d_backward_filter>(
              static_cast<const Conv2DBackwardFilterAttrs&>(pooled))};
}

namespace {

// The output: the largest input shape, which every input must repeat into.
std::vector<TensorMeta> infer_fused_elementwise(const char* op, std::span<const TensorMeta> in,
                                                const Attrs& attrs) {
  fused_program(attrs, in.size());
  require_same_dtype(op, in);
  require_floating(op, in[0]);
  const auto largest = std::max_element(in.begin(), in.end(), [](const auto& a, const auto& b) {
    return shape_numel(a.shape) < shape_numel(b.shape) ||
           (shape_numel(a.shape) == shape_numel(b.shape) && a.shape.size() < b.shape.size());
  });
  const Shape& output = largest->shape;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!repeats_into(in[i].shape, output)) {
      throw InvalidArgument(std::string(op) + ": input " + std::to_string(i) + " " +
                            shape_str(in[i].shape) + " is not the output's shape " +
                            shape_str(output) +
                            " or a trailing part of it; only such inputs repeat in a fused loop");
    }
  }
  return {{output, in[0].dtype}};
}

// Each instruction is one operation per element; memory is the inputs and the output, once.
OpCost cost_fused_elementwise(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                              const Attrs& attrs) {
  const double instructions = static_cast<double>(fused_program(attrs, in.size()).size());
  return elementwise_cost(in, out, instructions);
}

// Every input broadcast to the output's shape, then each instruction by its op's own rule.
std::vector<StablehloValue> lower_fused_elementwise(StablehloEmitter& emit,
                                                    std::span<const StablehloValue> in,
                                                    std::span<const TensorMeta> out,
                                                    const Attrs& attrs) {
  std::vector<StablehloValue> slots;
  for (const StablehloValue& input : in)
    slots.push_back(emit.broadcast(input, out[0].shape));
  for (const FusedInstruction& instruction : fused_program(attrs, in.size())) {
    std::vector<StablehloValue> operands{slots[static_cast<std::size_t>(instruction.a)]};
    if (instruction.b >= 0) operands.push_back(slots[static_cast<std::size_t>(instruction.b)]);
    slots.push_back(op_def(instruction.kind).lower(emit, operands, out, Attrs{}).front());
  }
  return {slots.back()};
}

// The shapes and dtypes of lowered values.
std::vector<TensorMeta> value_metas(std::span<const StablehloValue> values) {
  std::vector<TensorMeta> metas;
  for (const StablehloValue& value : values)
    metas.push_back({value.shape, value.dtype});
  return metas;
}

// pooled_conv2d: the convolution's result y (N, OH, OW, C_out) by conv2d's rule, then the pooled
// result by max_pool2d's, and the winners beside it; errors name `op`.
std::vector<TensorMeta> infer_pooled_conv2d(const char* op, std::span<const TensorMeta> in,
                                            const Attrs& attrs) {
  const PooledConvolutionParts parts = pooled_convolution_parts(attrs);
  const TensorMeta y = op_def(OpKind::conv2d).infer(op, in, parts.convolution)[0];
  const TensorMeta pooled = op_def(OpKind::max_pool2d).infer(op, {&y, 1}, parts.pooling)[0];
  const Pool2DOptions pool = op_attrs<OpKind::max_pool2d>(parts.pooling);
  if (pool.window[0] * pool.window[1] > 127) {
    throw InvalidArgument(std::string(op) + ": a pooling window of " +
                          std::to_string(pool.window[0]) + "x" + std::to_string(pool.window[1]) +
                          " cells has more than the 127 an i8 winner can name; pool the "
                          "convolution's result with max_pool2d instead");
  }
  return {pooled, {pooled.shape, DType::i8}};
}

// Both ops' FLOPs; memory: the inputs and outputs, once (y stays in the kernel).
OpCost cost_pooled_conv2d(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                          const Attrs& attrs) {
  const PooledConvolutionParts parts = pooled_convolution_parts(attrs);
  const TensorMeta y[] = {op_def(OpKind::conv2d).infer("pooled_conv2d", in, parts.convolution)[0]};
  const double flops = op_cost(OpKind::conv2d, in, y, parts.convolution).flops +
                       op_cost(OpKind::max_pool2d, y, out.first(1), parts.pooling).flops;
  return {flops, bytes_of(in) + bytes_of(out)};
}

// The window cell (kh, kw) of every pooled cell: y padded as the pooling pads it (with -inf,
// which never wins), every strides-th cell from (kh, kw) on.
StablehloValue window_cells(StablehloEmitter& emit, const StablehloValue& padded,
                            const Pool2DOptions& pool, const Shape& pooled, std::int64_t kh,
                            std::int64_t kw) {
  return emit.slice(padded, {0, kh, kw, 0},
                    {pooled[0], kh + (pooled[1] - 1) * pool.strides[0] + 1,
                     kw + (pooled[2] - 1) * pool.strides[1] + 1, pooled[3]},
                    {1, pool.strides[0], pool.strides[1], 1});
}

// y by conv2d's lowering; then over the window's cells in scan order, the largest so far and its
// cell, replaced only by a strictly larger value (the first maximum wins, as the CPU's kernels
// and max_pool2d_backward choose); -1 where the relu is fused and the maximum is not positive.
std::vector<StablehloValue> lower_pooled_conv2d(StablehloEmitter& emit,
                                                std::span<const StablehloValue> in,
                                                std::span<const TensorMeta> out,
                                                const Attrs& attrs) {
  const PooledConvolutionParts parts = pooled_convolution_parts(attrs);
  const TensorMeta y_meta[] = {
      op_def(OpKind::conv2d).infer("pooled_conv2d", value_metas(in), parts.convolution)[0]};
  const StablehloValue y = op_def(OpKind::conv2d)
                               .lower(emit, in, std::span<const TensorMeta>(y_meta),
                                      parts.convolution)[0];  // (N, OH, OW, C_out)
  const Pool2DOptions pool = op_attrs<OpKind::max_pool2d>(parts.pooling);
  const Window2D geometry = pool_window("pooled_conv2d", y.shape, pool);
  const StablehloValue padded = emit.pad(y, -std::numeric_limits<double>::infinity(),
                                         {0, geometry.pad_before[0], geometry.pad_before[1], 0},
                                         {0, geometry.pad_after[0], geometry.pad_after[1], 0});
  const Shape& pooled = out[0].shape;
  StablehloValue best = window_cells(emit, padded, pool, pooled, 0, 0);
  StablehloValue winner = emit.constant(0.0, pooled, DType::i8);
  for (std::int64_t kh = 0; kh < pool.window[0]; ++kh) {
    for (std::int64_t kw = kh == 0 ? 1 : 0; kw < pool.window[1]; ++kw) {
      const StablehloValue cell = window_cells(emit, padded, pool, pooled, kh, kw);
      const StablehloValue larger = emit.compare(cell, best, "GT");
      best = emit.elementwise("stablehlo.select", {larger, cell, best}, best.dtype);
      winner = emit.elementwise(
          "stablehlo.select",
          {larger, emit.constant(static_cast<double>(kh * pool.window[1] + kw), pooled, DType::i8),
           winner},
          DType::i8);
    }
  }
  if (op_attrs<OpKind::conv2d>(parts.convolution).fused_relu) {
    const StablehloValue positive =
        emit.compare(best, emit.constant(0.0, pooled, best.dtype), "GT");
    winner = emit.elementwise(
        "stablehlo.select", {positive, winner, emit.constant(-1.0, pooled, DType::i8)}, DType::i8);
  }
  return {best, winner};
}

// The convolution's result y (N, OH, OW, C_out) whose gradient the pooled filter gradient takes:
// from input 2 (y itself), or with from_winners from x and the filter's shape, checking that
// pooled_dy and the winners are the pooling's output; errors name `op`.
TensorMeta pooled_gradient_meta(const char* op, std::span<const TensorMeta> in,
                                const PooledFilterGradientParts& parts, bool from_winners) {
  if (!from_winners)
    return op_def(OpKind::max_pool2d_backward).infer(op, in.subspan(1, 2), parts.pool_gradient)[0];
  const auto& filter_gradient = op_attrs<OpKind::conv2d_backward_filter>(parts.filter_gradient);
  const TensorMeta y{
      conv_window(op, in[0].shape, filter_gradient.filter_shape, filter_gradient).output_shape(),
      in[0].dtype};
  const Pool2DOptions pool = op_attrs<OpKind::max_pool2d_backward>(parts.pool_gradient);
  const TensorMeta pooled =
      op_def(OpKind::max_pool2d).infer(op, {&y, 1}, make_op_attrs<OpKind::max_pool2d>(pool))[0];
  if (in[1].shape != pooled.shape || in[1].dtype != y.dtype || in[2].shape != pooled.shape ||
      in[2].dtype != DType::i8) {
    throw InvalidArgument(std::string(op) + ": pooled_dy " + shape_str(in[1].shape) + " " +
                          dtype_name(in[1].dtype) + " and winners " + shape_str(in[2].shape) + " " +
                          dtype_name(in[2].dtype) + " must be the pooling's output " +
                          shape_str(pooled.shape) + " in " + dtype_name(y.dtype) +
                          " and i8 (pooled_conv2d's outputs) for x " + shape_str(in[0].shape));
  }
  return y;
}

bool from_winners(const Attrs& attrs) {
  return op_attrs<OpKind::pooled_conv2d_backward_filter>(attrs).from_winners;
}

// inputs: x (N, H, W, C_in), pooled_dy, y: dy by max_pool2d_backward's rule, then the filter
// (and bias) gradient by conv2d_backward_filter's, errors naming this op.
std::vector<TensorMeta> infer_pooled_conv2d_backward_filter(const char* op,
                                                            std::span<const TensorMeta> in,
                                                            const Attrs& attrs) {
  const PooledFilterGradientParts parts = pooled_filter_gradient_parts(attrs);
  const TensorMeta filter_inputs[] = {in[0],
                                      pooled_gradient_meta(op, in, parts, from_winners(attrs))};
  return op_def(OpKind::conv2d_backward_filter)
      .infer(op, std::span<const TensorMeta>(filter_inputs), parts.filter_gradient);
}

// Both ops' FLOPs; memory: the fused op's inputs and outputs, once (dy stays in the kernel).
OpCost cost_pooled_conv2d_backward_filter(std::span<const TensorMeta> in,
                                          std::span<const TensorMeta> out, const Attrs& attrs) {
  const PooledFilterGradientParts parts = pooled_filter_gradient_parts(attrs);
  const TensorMeta dy[] = {
      pooled_gradient_meta("pooled_conv2d_backward_filter", in, parts, from_winners(attrs))};
  const TensorMeta filter_inputs[] = {in[0], dy[0]};
  const double flops =
      op_cost(OpKind::max_pool2d_backward, in.subspan(1, 2), dy, parts.pool_gradient).flops +
      op_cost(OpKind::conv2d_backward_filter, filter_inputs, out, parts.filter_gradient).flops;
  return {flops, bytes_of(in) + bytes_of(out)};
}

// dy from y by max_pool2d_backward's lowering; or from the winners: for each window cell
// (kh, kw), pooled_dy where it won, spread to the cells of the pooled input it stands for
// (dilated by the strides and shifted by (kh, kw) less the padding; a negative edge pads away),
// summed over the cells.
StablehloValue lowered_pooled_gradient(StablehloEmitter& emit, std::span<const StablehloValue> in,
                                       const PooledFilterGradientParts& parts, bool winners) {
  const TensorMeta dy_meta[] = {
      pooled_gradient_meta("pooled_conv2d_backward_filter", value_metas(in), parts, winners)};
  if (!winners) {
    return op_def(OpKind::max_pool2d_backward)
        .lower(emit, in.subspan(1, 2), std::span<const TensorMeta>(dy_meta),
               parts.pool_gradient)[0];
  }
  const StablehloValue& pooled_dy = in[1];  // (N, PH, PW, C_out)
  const StablehloValue& winner = in[2];     // (N, PH, PW, C_out) i8
  const Pool2DOptions pool = op_attrs<OpKind::max_pool2d_backward>(parts.pool_gradient);
  const Window2D geometry = pool_window("pooled_conv2d_backward_filter", dy_meta[0].shape, pool);
  const StablehloValue zero = emit.constant(0.0, pooled_dy.shape, pooled_dy.dtype);
  StablehloValue dy = emit.constant(0.0, dy_meta[0].shape, pooled_dy.dtype);
  for (std::int64_t kh = 0; kh < pool.window[0]; ++kh) {
    for (std::int64_t kw = 0; kw < pool.window[1]; ++kw) {
      const StablehloValue cell =
          emit.constant(static_cast<double>(kh * pool.window[1] + kw), winner.shape, DType::i8);
      const StablehloValue won = emit.elementwise(
          "stablehlo.select", {emit.compare(winner, cell, "EQ"), pooled_dy, zero}, dy.dtype);
      const std::int64_t extents[2] = {geometry.in_h, geometry.in_w};
      const std::int64_t pooled_extents[2] = {geometry.out_h, geometry.out_w};
      const std::int64_t offsets[2] = {kh - geometry.pad_before[0], kw - geometry.pad_before[1]};
      std::vector<std::int64_t> low{0};
      std::vector<std::int64_t> high{0};
      std::vector<std::int64_t> interior{0};
      for (std::size_t axis = 0; axis < 2; ++axis) {
        const std::int64_t dilated =
            pooled_extents[axis] == 0 ? 0 : (pooled_extents[axis] - 1) * pool.strides[axis] + 1;
        low.push_back(offsets[axis]);
        high.push_back(extents[axis] - offsets[axis] - dilated);
        interior.push_back(pool.strides[axis] - 1);
      }
      low.push_back(0);
      high.push_back(0);
      interior.push_back(0);
      dy = emit.elementwise("stablehlo.add", {dy, emit.pad(won, 0.0, low, high, interior)},
                            dy.dtype);
    }
  }
  return dy;
}

std::vector<StablehloValue> lower_pooled_conv2d_backward_filter(StablehloEmitter& emit,
                                                                std::span<const StablehloValue> in,
                                                                std::span<const TensorMeta> out,
                                                                const Attrs& attrs) {
  const PooledFilterGradientParts parts = pooled_filter_gradient_parts(attrs);
  const StablehloValue filter_inputs[] = {
      in[0], lowered_pooled_gradient(emit, in, parts, from_winners(attrs))};
  return op_def(OpKind::conv2d_backward_filter)
      .lower(emit, std::span<const StablehloValue>(filter_inputs), out, parts.filter_gradient);
}

}  // namespace

std::vector<OpDef> define_fused_ops() {
  return op_family<k_fused_ops>(
      OpRules<OpKind::fused_elementwise>{1, static_cast<int>(kMaxFusedInputs),
                                         infer_fused_elementwise, nullptr, cost_fused_elementwise,
                                         lower_fused_elementwise},
      OpRules<OpKind::pooled_conv2d>{2, 4, infer_pooled_conv2d, nullptr, cost_pooled_conv2d,
                                     lower_pooled_conv2d},
      OpRules<OpKind::pooled_conv2d_backward_filter>{3, 3, infer_pooled_conv2d_backward_filter,
                                                     nullptr, cost_pooled_conv2d_backward_filter,
                                                     lower_pooled_conv2d_backward_filter});
}

}  // namespace tandem
