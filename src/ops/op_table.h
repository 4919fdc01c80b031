#pragma once
// The op table: one OpDef per OpKind, holding everything about an op that does not depend on the
// device. Each op family defines its entries in its own file (src/ops/<family>.cpp), next to its
// typed wrappers and gradient rules, forward and backward side by side, through op_family,
// which checks them against the family's list in tandem/ops.h when the file compiles: the table
// cannot have a gap.
#include <algorithm>
#include <array>
#include <iterator>
#include <span>
#include <vector>

#include "ops/stablehlo.h"
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
// The input whose buffer the op's output 0 may be written into, or -1: every kernel of the op
// gives the same result when the two share a buffer (a fused residual the product's result is
// accumulated onto). A compiled graph's memory plan does so where nothing reads that input later.
using InPlaceFn = int (*)(std::span<const TensorMeta> inputs, const Attrs& attrs);

struct OpDef {
  OpKind kind{};
  const char* name = nullptr;
  int min_inputs = 0;
  int max_inputs = 0;  // -1: variadic
  InferFn infer = nullptr;
  GradientFn gradient = nullptr;  // nullptr: not differentiable
  CostFn cost = nullptr;          // nullptr: no FLOPs, bytes = inputs + outputs
  LowerFn lower = nullptr;        // StableHLO (ops/stablehlo.h); nullptr: not lowered yet
  // Per output: the input whose storage it shares (reshape views, in-place updates), or -1.
  std::vector<int> output_aliases;
  // Whether the op writes the inputs its outputs alias (the optimizer updates), rather than
  // viewing them (reshape): a compiled graph never removes, merges or folds such a node.
  bool writes_aliased_inputs = false;
  InPlaceFn in_place_input = nullptr;  // nullptr: never in place
};

const OpDef& op_def(OpKind kind);
// Whether the table has an entry for `kind` (a test checks that every op has one).
bool op_is_defined(OpKind kind);
OpCost op_cost(OpKind kind, std::span<const TensorMeta> inputs, std::span<const TensorMeta> outputs,
               const Attrs& attrs);

using OpTable = std::array<OpDef, kNumOps>;

// One op's rules, tagged with its kind so a family's definitions are checked against its list
// in ops.h when the family file compiles. The name comes from the list.
template <OpKind Kind>
struct OpRules {
  int min_inputs = 0;
  int max_inputs = 0;  // -1: variadic
  InferFn infer = nullptr;
  GradientFn gradient = nullptr;  // nullptr: not differentiable
  CostFn cost = nullptr;          // nullptr: no FLOPs, bytes = inputs + outputs
  LowerFn lower = nullptr;        // see OpDef
  // Per output: the input whose storage it shares (reshape views, in-place updates), or -1.
  std::vector<int> output_aliases = {};
  bool writes_aliased_inputs = false;  // see OpDef
  InPlaceFn in_place_input = nullptr;  // see OpDef
};

#define TANDEM_OP_KIND_ENTRY(op) OpKind::op,
#define TANDEM_OP_FAMILY_KINDS(family, X) \
  inline constexpr OpKind k_##family##_ops[] = {TANDEM_OPS_##family(TANDEM_OP_KIND_ENTRY)};
TANDEM_OP_FAMILIES(TANDEM_OP_FAMILY_KINDS, )
#undef TANDEM_OP_FAMILY_KINDS
#undef TANDEM_OP_KIND_ENTRY

// The OpDefs of one family from its rules, which must name exactly the kinds of `Family` (its
// list in ops.h), in that order.
template <const auto& Family, OpKind... Kinds>
std::vector<OpDef> op_family(OpRules<Kinds>... rules) {
  constexpr OpKind given[] = {Kinds...};
  static_assert(sizeof...(Kinds) == std::size(Family),
                "a family file defines more or fewer ops than its list in tandem/ops.h");
  static_assert(std::ranges::equal(given, Family),
                "a family file's ops differ from its list in tandem/ops.h, or are out of order");
  return {OpDef{Kinds, op_name(Kinds), rules.min_inputs, rules.max_inputs, rules.infer,
                rules.gradient, rules.cost, rules.lower, std::move(rules.output_aliases),
                rules.writes_aliased_inputs, rules.in_place_input}...};
}

// Each family file defines its ops (src/ops/<family>.cpp); op_table.cpp puts them in order.
#define TANDEM_DECLARE_OP_FAMILY(family, X) std::vector<OpDef> define_##family##_ops();
TANDEM_OP_FAMILIES(TANDEM_DECLARE_OP_FAMILY, )
#undef TANDEM_DECLARE_OP_FAMILY

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
