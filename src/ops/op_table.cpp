#include "ops/op_table.h"

#include <algorithm>
#include <string>

namespace tandem {
namespace {

OpTable build_table() {
  OpTable table{};
  define_elementwise_ops(table);
  define_reduction_ops(table);
  define_linalg_ops(table);
  define_conv_ops(table);
  define_pool_ops(table);
  define_norm_ops(table);
  define_softmax_ops(table);
  define_layout_ops(table);
  define_loss_ops(table);
  define_dropout_ops(table);
  define_optimizer_ops(table);
  define_gather_ops(table);
  define_layer_norm_ops(table);
  for (int i = 0; i < kNumOps; ++i) {
    TANDEM_ASSERT(table[i].name == nullptr || static_cast<int>(table[i].kind) == i,
                  std::string("op ") + table[i].name + " is filed under the wrong kind");
  }
  return table;
}

}  // namespace

const OpDef& op_def(OpKind kind) {
  static const OpTable table = build_table();
  const OpDef& def = table[static_cast<std::size_t>(kind)];
  TANDEM_ASSERT(def.infer != nullptr, "op #" + std::to_string(static_cast<int>(kind)) +
                                          " has no definition in the op table");
  return def;
}

bool op_is_defined(OpKind kind) {
  try {
    return op_def(kind).name != nullptr;
  } catch (const Error&) {
    return false;
  }
}

const char* op_name(OpKind kind) {
  return op_def(kind).name;
}

OpCost op_cost(OpKind kind, std::span<const TensorMeta> inputs, std::span<const TensorMeta> outputs,
               const Attrs& attrs) {
  const OpDef& def = op_def(kind);
  if (def.cost != nullptr) return def.cost(inputs, outputs, attrs);
  return {0.0, bytes_of(inputs) + bytes_of(outputs)};
}

TensorMeta meta_of(const Tensor& tensor) {
  return {tensor.shape(), tensor.dtype()};
}

std::vector<TensorMeta> metas_of(std::span<const Tensor> tensors) {
  std::vector<TensorMeta> metas;
  metas.reserve(tensors.size());
  for (const Tensor& tensor : tensors)
    metas.push_back(meta_of(tensor));
  return metas;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape result(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t extent_a = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t extent_b = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (extent_a != extent_b && extent_a != 1 && extent_b != 1) {
      throw InvalidArgument(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                            " cannot be broadcast together (axis " + std::to_string(i) + ": " +
                            std::to_string(extent_a) + " vs " + std::to_string(extent_b) +
                            "); reshape one of them");
    }
    result[i] = extent_a == 1 ? extent_b : extent_a;
  }
  return result;
}

std::int64_t normalize_axis(const char* op, std::int64_t axis, const Shape& shape) {
  const auto rank = static_cast<std::int64_t>(shape.size());
  const std::int64_t resolved = axis < 0 ? axis + rank : axis;
  if (resolved < 0 || resolved >= rank) {
    throw InvalidArgument(std::string(op) + ": axis " + std::to_string(axis) +
                          " is out of range for shape " + shape_str(shape) + " (rank " +
                          std::to_string(rank) + ")");
  }
  return resolved;
}

std::vector<std::int64_t> normalize_axes(const char* op, const std::vector<std::int64_t>& axes,
                                         const Shape& shape) {
  std::vector<std::int64_t> resolved;
  if (axes.empty()) {
    for (std::size_t i = 0; i < shape.size(); ++i)
      resolved.push_back(static_cast<std::int64_t>(i));
    return resolved;
  }
  for (std::int64_t axis : axes)
    resolved.push_back(normalize_axis(op, axis, shape));
  std::sort(resolved.begin(), resolved.end());
  resolved.erase(std::unique(resolved.begin(), resolved.end()), resolved.end());
  return resolved;
}

void require_same_dtype(const char* op, std::span<const TensorMeta> inputs) {
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].dtype != inputs[0].dtype) {
      throw InvalidArgument(std::string(op) + ": inputs have different dtypes (" +
                            dtype_name(inputs[0].dtype) + " and " + dtype_name(inputs[i].dtype) +
                            "); cast one of them with tandem::cast");
    }
  }
}

void require_floating(const char* op, const TensorMeta& input) {
  if (!is_floating(input.dtype)) {
    throw InvalidArgument(std::string(op) + ": needs a floating-point input, got " +
                          dtype_name(input.dtype) + " of shape " + shape_str(input.shape) +
                          "; cast it to f32 first");
  }
}

void require_rank(const char* op, const char* what, const TensorMeta& input, int rank) {
  if (static_cast<int>(input.shape.size()) != rank) {
    throw InvalidArgument(std::string(op) + ": " + what + " must have rank " +
                          std::to_string(rank) + ", got shape " + shape_str(input.shape));
  }
}

double bytes_of(std::span<const TensorMeta> metas) {
  double bytes = 0;
  for (const TensorMeta& meta : metas) {
    bytes +=
        static_cast<double>(shape_numel(meta.shape)) * static_cast<double>(dtype_size(meta.dtype));
  }
  return bytes;
}

OpCost elementwise_cost(std::span<const TensorMeta> inputs, std::span<const TensorMeta> outputs,
                        double flops_per_element) {
  double elements = 0;
  for (const TensorMeta& output : outputs)
    elements += static_cast<double>(shape_numel(output.shape));
  return {elements * flops_per_element, bytes_of(inputs) + bytes_of(outputs)};
}

}  // namespace tandem
