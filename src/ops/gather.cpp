// Gathering rows by index and its adjoint: gather(params, indices) picks rows of params (an
// embedding lookup); scatter_add(updates, indices, rows) adds rows of updates into a zeroed
// (rows, ...) tensor at those indices. Each is the other's gradient, so an embedding trains with
// a scatter-add and a scatter-add's gradient is a gather. Index values are checked by the
// kernels, which read them.
#include <algorithm>
#include <string>

#include "ops/op_attrs.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

void require_indices(const char* op, const TensorMeta& indices) {
  if (indices.dtype != DType::i32 && indices.dtype != DType::i64) {
    throw InvalidArgument(std::string(op) + ": indices must be i32 or i64, got " +
                          dtype_name(indices.dtype) + " of shape " + shape_str(indices.shape) +
                          "; cast them with tandem::cast(indices, DType::i32)");
  }
}

// indices.shape followed by the row shape (everything after the first axis of `rows_of`).
Shape gathered_shape(const Shape& indices, const Shape& rows_of) {
  Shape shape = indices;
  shape.insert(shape.end(), rows_of.begin() + 1, rows_of.end());
  return shape;
}

// (params (V, ...), indices) -> (indices..., ...)
std::vector<TensorMeta> infer_gather(const char* op, std::span<const TensorMeta> in, const Attrs&) {
  const TensorMeta& params = in[0];
  require_indices(op, in[1]);
  if (params.shape.empty()) {
    throw InvalidArgument(std::string(op) + ": params must have rank >= 1 (rows first), got a " +
                          "scalar; reshape it to (V, ...)");
  }
  return {{gathered_shape(in[1].shape, params.shape), params.dtype}};
}

// (updates (indices..., ...), indices) -> (rows, ...)
std::vector<TensorMeta> infer_scatter_add(const char* op, std::span<const TensorMeta> in,
                                          const Attrs& attrs) {
  const TensorMeta& updates = in[0];
  const TensorMeta& indices = in[1];
  require_indices(op, indices);
  if (updates.dtype == DType::boolean) {
    throw InvalidArgument(std::string(op) + ": cannot add bool updates of shape " +
                          shape_str(updates.shape) + "; cast them to a number type");
  }
  const std::int64_t rows = op_attrs<OpKind::scatter_add>(attrs).rows;
  if (rows < 0) {
    throw InvalidArgument(std::string(op) + ": rows must be >= 0, got " + std::to_string(rows));
  }
  const std::size_t index_rank = indices.shape.size();
  const bool leading_match =
      updates.shape.size() >= index_rank &&
      std::equal(indices.shape.begin(), indices.shape.end(), updates.shape.begin());
  if (!leading_match) {
    throw InvalidArgument(std::string(op) + ": updates " + shape_str(updates.shape) +
                          " must start with the indices' shape " + shape_str(indices.shape) +
                          ", one row of updates per index");
  }
  Shape out{rows};
  out.insert(out.end(), updates.shape.begin() + static_cast<std::ptrdiff_t>(index_rank),
             updates.shape.end());
  return {{out, updates.dtype}};
}

// A gather moves its output's bytes once and reads the indices.
OpCost gather_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return {0.0, 2.0 * bytes_of(out) + bytes_of(in.subspan(1))};
}

// One add per update element; the output is zeroed and written.
OpCost scatter_add_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                        const Attrs&) {
  return {static_cast<double>(shape_numel(in[0].shape)), bytes_of(in) + 2.0 * bytes_of(out)};
}

std::vector<Tensor> grad_gather(const GradContext& c) {
  const Tensor& params = c.inputs[0];
  if (!c.needs_grad(0) || !is_floating(params.dtype())) return {Tensor(), Tensor()};
  return {scatter_add(c.output_grads[0], c.inputs[1], params.dim(0)), Tensor()};
}

std::vector<Tensor> grad_scatter_add(const GradContext& c) {
  if (!c.needs_grad(0) || !is_floating(c.inputs[0].dtype())) return {Tensor(), Tensor()};
  return {gather(c.output_grads[0], c.inputs[1]), Tensor()};
}

// ---- StableHLO ----

// "[3, 4]": the axes from `first` to `last` - 1.
std::string axis_range(std::size_t first, std::size_t last) {
  std::string text = "[";
  for (std::size_t axis = first; axis < last; ++axis)
    text += (axis > first ? ", " : "") + std::to_string(axis);
  return text + "]";
}

// One row of params per index: stablehlo.gather with the indices' trailing axis implicit.
// Indices outside [0, V) are clamped by XLA; the CPU and CUDA kernels refuse them.
std::vector<StablehloValue> lower_gather(StablehloEmitter& emit, std::span<const StablehloValue> in,
                                         std::span<const TensorMeta> out, const Attrs&) {
  const StablehloValue& params = in[0];
  const StablehloValue& indices = in[1];
  const std::size_t index_rank = indices.shape.size();
  std::vector<std::int64_t> slice{1};
  slice.insert(slice.end(), params.shape.begin() + 1, params.shape.end());
  return {emit.emit(
      "\"stablehlo.gather\"(" + params.name + ", " + indices.name +
          ") {dimension_numbers = #stablehlo.gather<offset_dims = " +
          axis_range(index_rank, out[0].shape.size()) +
          ", collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = " +
          std::to_string(index_rank) +
          ">, indices_are_sorted = false, slice_sizes = " + StablehloEmitter::i64_array(slice) +
          "} : (" + StablehloEmitter::type(params) + ", " + StablehloEmitter::type(indices) +
          ") -> " + StablehloEmitter::type(out[0].shape, out[0].dtype),
      out[0].shape, out[0].dtype)};
}

// The updates added into rows of zeros by their indices (the adjoint of gather). Indices
// outside [0, rows) are dropped by XLA; the CPU and CUDA kernels refuse them.
std::vector<StablehloValue> lower_scatter_add(StablehloEmitter& emit,
                                              std::span<const StablehloValue> in,
                                              std::span<const TensorMeta> out, const Attrs&) {
  const StablehloValue& updates = in[0];
  const StablehloValue& indices = in[1];
  const std::size_t index_rank = indices.shape.size();
  const StablehloValue zeros = emit.constant(0.0, out[0].shape, out[0].dtype);
  return {emit.emit(
      "\"stablehlo.scatter\"(" + zeros.name + ", " + indices.name + ", " + updates.name + ") (" +
          emit.binary_region("stablehlo.add", out[0].dtype) +
          ") {indices_are_sorted = false, scatter_dimension_numbers = "
          "#stablehlo.scatter<update_window_dims = " +
          axis_range(index_rank, updates.shape.size()) +
          ", inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = " +
          std::to_string(index_rank) + ">, unique_indices = false} : (" +
          StablehloEmitter::type(zeros) + ", " + StablehloEmitter::type(indices) + ", " +
          StablehloEmitter::type(updates) + ") -> " +
          StablehloEmitter::type(out[0].shape, out[0].dtype),
      out[0].shape, out[0].dtype)};
}

}  // namespace

std::vector<OpDef> define_gather_ops() {
  return op_family<k_gather_ops>(
      OpRules<OpKind::gather>{2, 2, infer_gather, grad_gather, gather_cost, lower_gather},
      OpRules<OpKind::scatter_add>{2, 2, infer_scatter_add, grad_scatter_add, scatter_add_cost,
                                   lower_scatter_add});
}

Tensor gather(const Tensor& params, const Tensor& indices) {
  return call_op(OpKind::gather, {params, indices})[0];
}

Tensor scatter_add(const Tensor& updates, const Tensor& indices, std::int64_t rows) {
  return call_op(OpKind::scatter_add, {updates, indices},
                 make_op_attrs<OpKind::scatter_add>({rows}))[0];
}

}  // namespace tandem
