// The StableHLO emitter the lowering rules write through: types, fresh names, constants and
// NumPy broadcasting, every op in MLIR's generic form ("stablehlo.add"(%a, %b) : (...) -> ...),
// which every StableHLO version parses alike.
#include "ops/stablehlo.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "tandem/error.h"

namespace tandem {
namespace {

// The bits of an infinity or NaN in `dtype`, in hex, as MLIR reads non-finite float constants:
// the width must be the type's.
std::string special_bits(double value, DType dtype) {
  const bool nan = std::isnan(value);
  const bool negative = value < 0;
  switch (dtype) {
    case DType::f64:
      return nan ? "0x7FF8000000000000" : negative ? "0xFFF0000000000000" : "0x7FF0000000000000";
    case DType::bf16:
      return nan ? "0x7FC0" : negative ? "0xFF80" : "0x7F80";
    case DType::f16:
      return nan ? "0x7E00" : negative ? "0xFC00" : "0x7C00";
    default:
      return nan ? "0x7FC00000" : negative ? "0xFF800000" : "0x7F800000";
  }
}

// A constant's value as MLIR reads it for the element type.
std::string literal(double value, DType dtype) {
  if (dtype == DType::boolean) return value != 0.0 ? "true" : "false";
  if (!is_floating(dtype)) return std::to_string(static_cast<long long>(value));
  if (!std::isfinite(value)) return special_bits(value, dtype);
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", value);
  std::string result = text;
  if (result.find_first_of(".e") == std::string::npos) result += ".0";
  return result;
}

}  // namespace

std::string StablehloEmitter::element_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::u8:
      return "ui8";
    case DType::boolean:
      return "i1";
    case DType::i8:
      return "i8";
  }
  return "?";
}

std::string StablehloEmitter::type(const Shape& shape, DType dtype) {
  std::string text = "tensor<";
  for (const std::int64_t extent : shape)
    text += std::to_string(extent) + "x";
  return text + element_type(dtype) + ">";
}

std::string StablehloEmitter::fresh() {
  return "%v" + std::to_string(next_++);
}

StablehloValue StablehloEmitter::emit(const std::string& op, const Shape& shape, DType dtype) {
  StablehloValue value{fresh(), shape, dtype};
  body_ += "    " + value.name + " = " + op + "\n";
  return value;
}

std::vector<StablehloValue> StablehloEmitter::emit_results(
    const std::string& op, const std::vector<StablehloValue>& results) {
  const std::string name = fresh();
  body_ += "    " + name + ":" + std::to_string(results.size()) + " = " + op + "\n";
  std::vector<StablehloValue> values = results;
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i].name = name + "#" + std::to_string(i);
  return values;
}

StablehloValue StablehloEmitter::constant(double value, const Shape& shape, DType dtype) {
  const std::string scalar_type = type({}, dtype);
  const StablehloValue scalar =
      emit("\"stablehlo.constant\"() {value = dense<" + literal(value, dtype) +
               "> : " + scalar_type + "} : () -> " + scalar_type,
           {}, dtype);
  return broadcast(scalar, shape);
}

StablehloValue StablehloEmitter::broadcast(const StablehloValue& value, const Shape& shape) {
  if (value.shape == shape) return value;
  TANDEM_ASSERT(value.shape.size() <= shape.size(), "broadcast to a lower rank");
  const std::size_t offset = shape.size() - value.shape.size();
  std::vector<std::int64_t> dims;
  for (std::size_t axis = 0; axis < value.shape.size(); ++axis)
    dims.push_back(static_cast<std::int64_t>(axis + offset));
  return broadcast_in_dim(value, shape, dims);
}

StablehloValue StablehloEmitter::broadcast_in_dim(const StablehloValue& value, const Shape& shape,
                                                  const std::vector<std::int64_t>& dims) {
  return emit("\"stablehlo.broadcast_in_dim\"(" + value.name + ") {broadcast_dimensions = " +
                  i64_array(dims) + "} : (" + type(value) + ") -> " + type(shape, value.dtype),
              shape, value.dtype);
}

StablehloValue StablehloEmitter::reduce_back(const StablehloValue& value, std::int64_t axis,
                                             const std::string& op, double init) {
  const StablehloValue reduced = reduce(value, {axis}, op, init);
  std::vector<std::int64_t> dims;
  for (std::int64_t kept = 0; kept < static_cast<std::int64_t>(value.shape.size()); ++kept) {
    if (kept != axis) dims.push_back(kept);
  }
  return broadcast_in_dim(reduced, value.shape, dims);
}

StablehloValue StablehloEmitter::elementwise(const std::string& op,
                                             const std::vector<StablehloValue>& operands,
                                             DType result_dtype, const std::string& attributes) {
  std::string names;
  std::string types;
  for (const StablehloValue& operand : operands) {
    names += (names.empty() ? "" : ", ") + operand.name;
    types += (types.empty() ? "" : ", ") + type(operand);
  }
  const Shape& shape = operands.front().shape;
  return emit("\"" + op + "\"(" + names + ")" +
                  (attributes.empty() ? "" : " {" + attributes + "}") + " : (" + types + ") -> " +
                  type(shape, result_dtype),
              shape, result_dtype);
}

StablehloValue StablehloEmitter::compare(const StablehloValue& left, const StablehloValue& right,
                                         const std::string& direction) {
  const DType dtype = left.dtype;
  const char* ordering = is_floating(dtype)                              ? "FLOAT"
                         : dtype == DType::u8 || dtype == DType::boolean ? "UNSIGNED"
                                                                         : "SIGNED";
  return elementwise("stablehlo.compare", {left, right}, DType::boolean,
                     "comparison_direction = #stablehlo<comparison_direction " + direction +
                         ">, compare_type = #stablehlo<comparison_type " + ordering + ">");
}

StablehloValue StablehloEmitter::iota(const Shape& shape, std::int64_t dimension, DType dtype) {
  return emit("\"stablehlo.iota\"() {iota_dimension = " + std::to_string(dimension) +
                  " : i64} : () -> " + type(shape, dtype),
              shape, dtype);
}

StablehloValue StablehloEmitter::replica_id() {
  // stablehlo.replica_id gives a ui32, a type Tandem's dtypes do not have.
  const std::string id = fresh();
  body_ += "    " + id + " = \"stablehlo.replica_id\"() : () -> tensor<ui32>\n";
  return emit("\"stablehlo.convert\"(" + id + ") : (tensor<ui32>) -> tensor<i64>", {}, DType::i64);
}

StablehloValue StablehloEmitter::element(const StablehloValue& vector, std::int64_t index) {
  return reshape(slice(vector, {index}, {index + 1}), {});
}

StablehloValue StablehloEmitter::convert(const StablehloValue& value, DType dtype) {
  if (value.dtype == dtype) return value;
  return elementwise("stablehlo.convert", {value}, dtype);
}

StablehloValue StablehloEmitter::pad(const StablehloValue& value, double fill,
                                     const std::vector<std::int64_t>& low,
                                     const std::vector<std::int64_t>& high,
                                     std::vector<std::int64_t> interior) {
  if (interior.empty()) interior.assign(value.shape.size(), 0);
  Shape shape = value.shape;
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    const std::int64_t cells = shape[axis];
    shape[axis] = cells + low[axis] + high[axis] + (cells > 0 ? interior[axis] * (cells - 1) : 0);
  }
  const StablehloValue filler = constant(fill, {}, value.dtype);
  return emit("\"stablehlo.pad\"(" + value.name + ", " + filler.name + ") {edge_padding_low = " +
                  i64_array(low) + ", edge_padding_high = " + i64_array(high) +
                  ", interior_padding = " + i64_array(interior) + "} : (" + type(value) + ", " +
                  type(filler) + ") -> " + type(shape, value.dtype),
              shape, value.dtype);
}

StablehloValue StablehloEmitter::slice(const StablehloValue& value,
                                       const std::vector<std::int64_t>& begin,
                                       const std::vector<std::int64_t>& limit,
                                       std::vector<std::int64_t> strides) {
  if (strides.empty()) strides.assign(begin.size(), 1);
  Shape shape;
  for (std::size_t axis = 0; axis < begin.size(); ++axis)
    shape.push_back((limit[axis] - begin[axis] + strides[axis] - 1) / strides[axis]);
  return emit("\"stablehlo.slice\"(" + value.name + ") {start_indices = " + i64_array(begin) +
                  ", limit_indices = " + i64_array(limit) + ", strides = " + i64_array(strides) +
                  "} : (" + type(value) + ") -> " + type(shape, value.dtype),
              shape, value.dtype);
}

StablehloValue StablehloEmitter::reshape(const StablehloValue& value, const Shape& shape) {
  if (value.shape == shape) return value;
  return emit("\"stablehlo.reshape\"(" + value.name + ") : (" + type(value) + ") -> " +
                  type(shape, value.dtype),
              shape, value.dtype);
}

StablehloValue StablehloEmitter::dot_general(const StablehloValue& lhs, const StablehloValue& rhs,
                                             const std::vector<std::int64_t>& batch_axes,
                                             std::int64_t lhs_contracting,
                                             std::int64_t rhs_contracting, const Shape& shape,
                                             DType result_dtype) {
  const auto list = [](const std::vector<std::int64_t>& axes) {
    std::string text = "[";
    for (std::size_t i = 0; i < axes.size(); ++i)
      text += (i ? ", " : "") + std::to_string(axes[i]);
    return text + "]";
  };
  std::string dimensions;
  if (!batch_axes.empty()) {
    dimensions = "lhs_batching_dimensions = " + list(batch_axes) +
                 ", rhs_batching_dimensions = " + list(batch_axes) + ", ";
  }
  dimensions += "lhs_contracting_dimensions = " + list({lhs_contracting}) +
                ", rhs_contracting_dimensions = " + list({rhs_contracting});
  return emit("\"stablehlo.dot_general\"(" + lhs.name + ", " + rhs.name +
                  ") {dot_dimension_numbers = #stablehlo.dot<" + dimensions + ">} : (" + type(lhs) +
                  ", " + type(rhs) + ") -> " + type(shape, result_dtype),
              shape, result_dtype);
}

StablehloValue StablehloEmitter::reduce(const StablehloValue& value,
                                        const std::vector<std::int64_t>& axes,
                                        const std::string& op, double init) {
  Shape reduced;
  for (std::size_t axis = 0; axis < value.shape.size(); ++axis) {
    if (std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(axis)) == axes.end()) {
      reduced.push_back(value.shape[axis]);
    }
  }
  // Sums of 16-bit floats accumulate in f32, as the kernels do; the result is rounded once.
  const DType accumulate = op == "stablehlo.add" ? accumulation_type(value.dtype) : value.dtype;
  const StablehloValue operand = convert(value, accumulate);
  const StablehloValue start = constant(init, {}, accumulate);
  const StablehloValue result =
      emit("\"stablehlo.reduce\"(" + operand.name + ", " + start.name + ") (" +
               binary_region(op, accumulate) + ") {dimensions = " + i64_array(axes) + "} : (" +
               type(operand) + ", " + type({}, accumulate) + ") -> " + type(reduced, accumulate),
           reduced, accumulate);
  return convert(result, value.dtype);
}

DType StablehloEmitter::accumulation_type(DType dtype) {
  return dtype == DType::bf16 || dtype == DType::f16 ? DType::f32 : dtype;
}

std::string StablehloEmitter::binary_region(const std::string& op, DType dtype,
                                            const std::string& comparison) {
  const std::string scalar = type({}, dtype);
  // Fresh names for the block's arguments: MLIR does not let them shadow outer values.
  const std::string left = fresh();
  const std::string right = fresh();
  const std::string combined = fresh();
  const std::string result = comparison.empty() ? scalar : type({}, DType::boolean);
  const std::string attributes =
      comparison.empty()
          ? ""
          : " {comparison_direction = #stablehlo<comparison_direction " + comparison + ">}";
  return "{\n    ^bb0(" + left + ": " + scalar + ", " + right + ": " + scalar + "):\n      " +
         combined + " = \"" + op + "\"(" + left + ", " + right + ")" + attributes + " : (" +
         scalar + ", " + scalar + ") -> " + result + "\n      \"stablehlo.return\"(" + combined +
         ") : (" + result + ") -> ()\n    }";
}

std::string StablehloEmitter::padding(const std::vector<std::array<std::int64_t, 2>>& low_high) {
  std::string text = "dense<[";
  for (std::size_t axis = 0; axis < low_high.size(); ++axis) {
    text += (axis ? ", [" : "[") + std::to_string(low_high[axis][0]) + ", " +
            std::to_string(low_high[axis][1]) + "]";
  }
  return text + "]> : tensor<" + std::to_string(low_high.size()) + "x2xi64>";
}

std::string StablehloEmitter::i64_array(const std::vector<std::int64_t>& values) {
  std::string text = "array<i64";
  for (std::size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : ": ") + std::to_string(values[i]);
  return text + ">";
}

StablehloValue stablehlo_argument(std::size_t index, const Shape& shape, DType dtype) {
  return {"%arg" + std::to_string(index), shape, dtype};
}

std::string stablehlo_module(const std::string& symbol, int replicas,
                             std::span<const StablehloArgument> arguments,
                             const StablehloEmitter& emitter,
                             std::span<const StablehloValue> results) {
  std::string signature;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const StablehloArgument& argument = arguments[i];
    signature +=
        (i ? ", " : "") + argument.value.name + ": " + StablehloEmitter::type(argument.value);
    if (argument.aliased_result >= 0) {
      signature += " {tf.aliasing_output = " + std::to_string(argument.aliased_result) + " : i32}";
    }
  }
  std::string names;
  std::string types;
  for (const StablehloValue& value : results) {
    names += (names.empty() ? "" : ", ") + value.name;
    types += (types.empty() ? "" : ", ") + StablehloEmitter::type(value);
  }
  return "module @" + symbol + " attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = " +
         std::to_string(replicas) + " : i32} {\n  func.func public @main(" + signature + ") -> (" +
         types + ") {\n" + emitter.body() + "    return " + names + " : " + types + "\n  }\n}\n";
}

}  // namespace tandem
