// fused_elementwise (ops/fused.h): its program, shape inference, cost and StableHLO lowering; the
// CPU kernel is in backend/cpu/elementwise.cpp beside the ops' own loops.
#include "ops/fused.h"

#include <algorithm>

#include "ops/op_attrs.h"
#include "ops/op_table.h"

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

// The gradient dy (N, OH, OW, C_out) by max_pool2d_backward's rule from inputs 1 and 2,
// pooled_dy (N, PH, PW, C_out) and y (N, OH, OW, C_out); errors name `op`.
TensorMeta pooled_gradient_meta(const char* op, std::span<const TensorMeta> in,
                                const PooledFilterGradientParts& parts) {
  return op_def(OpKind::max_pool2d_backward).infer(op, in.subspan(1, 2), parts.pool_gradient)[0];
}

// inputs: x (N, H, W, C_in), pooled_dy, y: dy by max_pool2d_backward's rule, then the filter
// (and bias) gradient by conv2d_backward_filter's, errors naming this op.
std::vector<TensorMeta> infer_pooled_conv2d_backward_filter(const char* op,
                                                            std::span<const TensorMeta> in,
                                                            const Attrs& attrs) {
  const PooledFilterGradientParts parts = pooled_filter_gradient_parts(attrs);
  const TensorMeta filter_inputs[] = {in[0], pooled_gradient_meta(op, in, parts)};
  return op_def(OpKind::conv2d_backward_filter)
      .infer(op, std::span<const TensorMeta>(filter_inputs), parts.filter_gradient);
}

// Both ops' FLOPs; memory: the fused op's inputs and outputs, once (dy stays in the kernel).
OpCost cost_pooled_conv2d_backward_filter(std::span<const TensorMeta> in,
                                          std::span<const TensorMeta> out, const Attrs& attrs) {
  const PooledFilterGradientParts parts = pooled_filter_gradient_parts(attrs);
  const TensorMeta dy[] = {pooled_gradient_meta("pooled_conv2d_backward_filter", in, parts)};
  const TensorMeta filter_inputs[] = {in[0], dy[0]};
  const double flops =
      op_cost(OpKind::max_pool2d_backward, in.subspan(1, 2), dy, parts.pool_gradient).flops +
      op_cost(OpKind::conv2d_backward_filter, filter_inputs, out, parts.filter_gradient).flops;
  return {flops, bytes_of(in) + bytes_of(out)};
}

std::vector<StablehloValue> lower_pooled_conv2d_backward_filter(StablehloEmitter& emit,
                                                                std::span<const StablehloValue> in,
                                                                std::span<const TensorMeta> out,
                                                                const Attrs& attrs) {
  const PooledFilterGradientParts parts = pooled_filter_gradient_parts(attrs);
  const TensorMeta dy_meta[] = {TensorMeta{in[2].shape, in[2].dtype}};
  const StablehloValue dy = op_def(OpKind::max_pool2d_backward)
                                .lower(emit, in.subspan(1, 2), std::span<const TensorMeta>(dy_meta),
                                       parts.pool_gradient)[0];
  const StablehloValue filter_inputs[] = {in[0], dy};
  return op_def(OpKind::conv2d_backward_filter)
      .lower(emit, std::span<const StablehloValue>(filter_inputs), out, parts.filter_gradient);
}

}  // namespace

std::vector<OpDef> define_fused_ops() {
  return op_family<k_fused_ops>(
      OpRules<OpKind::fused_elementwise>{1, static_cast<int>(kMaxFusedInputs),
                                         infer_fused_elementwise, nullptr, cost_fused_elementwise,
                                         lower_fused_elementwise},
      OpRules<OpKind::pooled_conv2d_backward_filter>{3, 3, infer_pooled_conv2d_backward_filter,
                                                     nullptr, cost_pooled_conv2d_backward_filter,
                                                     lower_pooled_conv2d_backward_filter});
}

}  // namespace tandem
