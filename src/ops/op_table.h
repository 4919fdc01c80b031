#pragma once
// The op table: one OpDef per OpKind, holding everything about an op that does not depend on the
// device. Each op family defines its entries in its own file (src/ops/<family>.cpp), next to its
// typed wrappers and gradient rules, forward and backward side by side.
#include <array>
#include <span>
#include <vector>

#include "tandem/ops.h"

namespace tandem {

struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
};

struct OpCost {
  double flops = 0;  // floating-point operations (a fused multiply-add counts 2)
  double bytes = 0;  // bytes read and written by an ideal kernel
};

// What a gradient rule sees: the recorded op's inputs and outputs, the gradients flowing into
// its outputs (undefined where none flowed) and its attributes.
struct GradContext {
  std::span<const Tensor> inputs;
  std::span<const Tensor> outputs;
  std::span<const Tensor> output_grads;
  const Attrs& attrs;
  // Per input, whether the tape wants its gradient (nullptr: all). Rules skip work for inputs
  // that need none, e.g. the first convolution's gradient with respect to the images.
  const std::vector<bool>* input_needs_grad = nullptr;

  bool needs_grad(std::size_t input) const {
    return input_needs_grad == nullptr || (*input_needs_grad)[input];
  }
};

// `op` is the op's name, for error messages.
using InferFn = std::vector<TensorMeta> (*)(const char* op, std::span<const TensorMeta> inputs,
                                            const Attrs& attrs);
// Returns one gradient per input (undefined for inputs that get none, e.g. integer labels),
// computed with other ops so it runs on the same device and can itself be differentiated.
using GradientFn = std::vector<Tensor> (*)(const GradContext& context);
using CostFn = OpCost (*)(std::span<const TensorMeta> inputs, std::span<const TensorMeta> outputs,
                          const Attrs& attrs);

struct OpDef {
  OpKind kind{};
  const char* name = nullptr;
  int min_inputs = 0;
  int max_inputs = 0;  // -1: variadic
  InferFn infer = nullptr;
  GradientFn gradient = nullptr;  // nullptr: not differentiable
  CostFn cost = nullptr;          // nullptr: no FLOPs, bytes = inputs + outputs
  // Per output: the input whose storage it shares (reshape views, in-place updates), or -1.
  std::vector<int> output_aliases;
};

const OpDef& op_def(OpKind kind);
// Whether the table has an entry for `kind` (a test checks that every op has one).
bool op_is_defined(OpKind kind);
OpCost op_cost(OpKind kind, std::span<const TensorMeta> inputs, std::span<const TensorMeta> outputs,
               const Attrs& attrs);

using OpTable = std::array<OpDef, kNumOps>;

// Each family file fills in its ops; op_table.cpp calls them all and checks none is missing.
void define_elementwise_ops(OpTable& table);
void define_reduction_ops(OpTable& table);
void define_linalg_ops(OpTable& table);
void define_conv_ops(OpTable& table);
void define_pool_ops(OpTable& table);
void define_norm_ops(OpTable& table);
void define_softmax_ops(OpTable& table);
void define_layout_ops(OpTable& table);
void define_loss_ops(OpTable& table);
void define_dropout_ops(OpTable& table);
void define_optimizer_ops(OpTable& table);
void define_gather_ops(OpTable& table);
void define_layer_norm_ops(OpTable& table);

// ---- helpers shared by the family files ----
std::vector<TensorMeta> metas_of(std::span<const Tensor> tensors);
TensorMeta meta_of(const Tensor& tensor);
// NumPy broadcasting of two shapes; throws InvalidArgument naming the op and both shapes.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Resolves a possibly negative axis against `rank`; throws naming the op and shape.
std::int64_t normalize_axis(const char* op, std::int64_t axis, const Shape& shape);
// Sorted, unique, non-negative axes; empty means all axes.
std::vector<std::int64_t> normalize_axes(const char* op, const std::vector<std::int64_t>& axes,
                                         const Shape& shape);
// Throws InvalidArgument unless the inputs share a dtype (naming the op and both dtypes).
void require_same_dtype(const char* op, std::span<const TensorMeta> inputs);
void require_floating(const char* op, const TensorMeta& input);
void require_rank(const char* op, const char* what, const TensorMeta& input, int rank);
double bytes_of(std::span<const TensorMeta> metas);
OpCost elementwise_cost(std::span<const TensorMeta> inputs, std::span<const TensorMeta> outputs,
                        double flops_per_element);

}  // namespace tandem
