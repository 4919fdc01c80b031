#include "ops/op_table.h"

#include <algorithm>
#include <string>

namespace tandem {
namespace {

#define TANDEM_OP_NAME(op) #op,
constexpr const char* kOpNames[] = {TANDEM_OPS(TANDEM_OP_NAME)};
#undef TANDEM_OP_NAME
static_assert(std::size(kOpNames) == kNumOps);

OpTable build_table() {
  OpTable table{};
  std::size_t next = 0;
  // op_family has checked each family against its list; the families come in table order.
  const auto append = [&](std::vector<OpDef> family) {
    for (OpDef& def : family) {
      TANDEM_ASSERT(static_cast<std::size_t>(def.kind) == next && def.infer != nullptr,
                    std::string("op ") + def.name + " is out of place or has no shape inference");
      table[next++] = std::move(def);
    }
  };
#define TANDEM_APPEND_OP_FAMILY(family, X) append(define_##family##_ops());
  TANDEM_OP_FAMILIES(TANDEM_APPEND_OP_FAMILY, )
#undef TANDEM_APPEND_OP_FAMILY
  TANDEM_ASSERT(next == table.size(), "the op families do not fill the op table");
  return table;
}

}  // namespace

const OpDef& op_def(OpKind kind) {
  static const OpTable table = build_table();
  return table[static_cast<std::size_t>(kind)];
}

bool op_is_defined(OpKind kind) {
  return static_cast<int>(kind) < kNumOps && op_def(kind).infer != nullptr;
}

const char* op_name(OpKind kind) {
  return kOpNames[static_cast<std::size_t>(kind)];
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
