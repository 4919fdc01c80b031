// Reductions (sum, mean, max, argmax) and broadcasting, with their gradients: a reduction's
// gradient broadcasts back, a broadcast's gradient sums back (sum_to_shape).
#include <algorithm>
#include <limits>

#include "ops/op_attrs.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

Shape reduced_shape(const Shape& shape, const std::vector<std::int64_t>& axes, bool keepdims) {
  Shape result;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const bool reduced =
        std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) != axes.end();
    if (!reduced) {
      result.push_back(shape[i]);
    } else if (keepdims) {
      result.push_back(1);
    }
  }
  return result;
}

std::vector<TensorMeta> infer_reduce(const char* op, std::span<const TensorMeta> in,
                                     const Attrs& attrs) {
  const std::vector<std::int64_t> axes =
      normalize_axes(op, read_attrs<ReduceAttrs>(attrs).axes, in[0].shape);
  if (in[0].dtype == DType::boolean) {
    throw InvalidArgument(std::string(op) + ": cannot reduce a bool tensor of shape " +
                          shape_str(in[0].shape) + "; cast it to i32 or f32 first");
  }
  for (std::int64_t axis : axes) {
    if (std::string(op) != "sum" && in[0].shape[static_cast<std::size_t>(axis)] == 0) {
      throw InvalidArgument(std::string(op) + ": axis " + std::to_string(axis) + " of shape " +
                            shape_str(in[0].shape) + " is empty, so the reduction has no value");
    }
  }
  return {{reduced_shape(in[0].shape, axes, read_attrs<ReduceAttrs>(attrs).keepdims), in[0].dtype}};
}

std::vector<TensorMeta> infer_argmax(const char* op, std::span<const TensorMeta> in,
                                     const Attrs& attrs) {
  const std::int64_t axis = normalize_axis(op, op_attrs<OpKind::argmax>(attrs).axis, in[0].shape);
  if (in[0].shape[static_cast<std::size_t>(axis)] == 0) {
    throw InvalidArgument(std::string(op) + ": axis " + std::to_string(axis) + " of shape " +
                          shape_str(in[0].shape) + " is empty");
  }
  return {{reduced_shape(in[0].shape, {axis}, false), DType::i64}};
}

std::vector<TensorMeta> infer_broadcast_to(const char* op, std::span<const TensorMeta> in,
                                           const Attrs& attrs) {
  const Shape target = op_attrs<OpKind::broadcast_to>(attrs).shape;
  if (broadcast_shapes(op, in[0].shape, target) != target) {
    throw InvalidArgument(std::string(op) + ": cannot broadcast shape " + shape_str(in[0].shape) +
                          " to " + shape_str(target));
  }
  return {{target, in[0].dtype}};
}

OpCost reduce_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return {static_cast<double>(shape_numel(in[0].shape)), bytes_of(in) + bytes_of(out)};
}

// dy reshaped to keepdims form so it broadcasts against the input.
Tensor keepdims_view(const Tensor& reduced, const GradContext& c) {
  const std::vector<std::int64_t> axes =
      normalize_axes("sum", read_attrs<ReduceAttrs>(c.attrs).axes, c.inputs[0].shape());
  return reshape(reduced, reduced_shape(c.inputs[0].shape(), axes, true));
}

std::vector<Tensor> grad_sum(const GradContext& c) {
  return {broadcast_to(keepdims_view(c.output_grads[0], c), c.inputs[0].shape())};
}

std::vector<Tensor> grad_mean(const GradContext& c) {
  const double count = static_cast<double>(c.inputs[0].numel()) /
                       static_cast<double>(std::max<std::int64_t>(c.outputs[0].numel(), 1));
  return {broadcast_to(keepdims_view(c.output_grads[0], c), c.inputs[0].shape()) / count};
}

// The gradient is shared equally among tied maxima, as TensorFlow does.
std::vector<Tensor> grad_max(const GradContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor is_max =
      cast(equal(x, broadcast_to(keepdims_view(c.outputs[0], c), x.shape())), x.dtype());
  const Tensor ties = sum(is_max, read_attrs<ReduceAttrs>(c.attrs).axes, true);
  return {is_max * broadcast_to(keepdims_view(c.output_grads[0], c), x.shape()) / ties};
}

std::vector<Tensor> grad_broadcast_to(const GradContext& c) {
  return {sum_to_shape(c.output_grads[0], c.inputs[0].shape())};
}

Tensor reduce(OpKind kind, const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdims) {
  const std::vector<std::int64_t> resolved = normalize_axes(op_name(kind), axes, x.shape());
  return call_op(kind, {x}, write_attrs(ReduceAttrs{resolved, keepdims}))[0];
}

// ---- StableHLO ----

// The axes a reduction reduces: all of them when the attribute lists none.
std::vector<std::int64_t> reduced_axes(const Attrs& attrs, const Shape& shape) {
  std::vector<std::int64_t> axes = read_attrs<ReduceAttrs>(attrs).axes;
  if (axes.empty()) {
    for (std::size_t axis = 0; axis < shape.size(); ++axis)
      axes.push_back(static_cast<std::int64_t>(axis));
  }
  return axes;
}

// The identity of max over `dtype`: -inf, or its lowest value.
double lowest_value(DType dtype) {
  switch (dtype) {
    case DType::i32:
      return static_cast<double>(std::numeric_limits<std::int32_t>::lowest());
    case DType::i64:
      return static_cast<double>(std::numeric_limits<std::int64_t>::lowest());
    case DType::i8:
      return static_cast<double>(std::numeric_limits<std::int8_t>::lowest());
    case DType::u8:
    case DType::boolean:
      return 0.0;
    default:
      return -std::numeric_limits<double>::infinity();
  }
}

// stablehlo.reduce over the axes, then the output's shape (with keepdims' ones), and for mean
// the division by the count, in the sum's f32 for 16-bit floats (a count past 65504 is no f16,
// and the kernels round once).
template <OpKind kKind>
std::vector<StablehloValue> lower_reduce(StablehloEmitter& emit, std::span<const StablehloValue> in,
                                         std::span<const TensorMeta> out, const Attrs& attrs) {
  const StablehloValue x =
      kKind == OpKind::mean ? emit.convert(in[0], StablehloEmitter::accumulation_type(in[0].dtype))
                            : in[0];
  const std::vector<std::int64_t> axes = reduced_axes(attrs, x.shape);
  const bool maximum = kKind == OpKind::max;
  StablehloValue result = emit.reduce(x, axes, maximum ? "stablehlo.maximum" : "stablehlo.add",
                                      maximum ? lowest_value(x.dtype) : 0.0);
  if (kKind == OpKind::mean) {
    std::int64_t count = 1;
    for (const std::int64_t axis : axes)
      count *= x.shape[static_cast<std::size_t>(axis)];
    result = emit.elementwise(
        "stablehlo.divide",
        {result, emit.constant(static_cast<double>(count), result.shape, result.dtype)},
        result.dtype);
    result = emit.convert(result, out[0].dtype);
  }
  return {emit.reshape(result, out[0].shape)};
}

// A reduce over (value, index) pairs keeping the larger value, and on a tie the smaller index:
// the first maximum, as the kernels (and TensorFlow) give it.
std::vector<StablehloValue> lower_argmax(StablehloEmitter& emit, std::span<const StablehloValue> in,
                                         std::span<const TensorMeta> out, const Attrs& attrs) {
  const StablehloValue& x = in[0];
  std::int64_t axis = op_attrs<OpKind::argmax>(attrs).axis;
  if (axis < 0) axis += static_cast<std::int64_t>(x.shape.size());
  const StablehloValue indices = emit.iota(x.shape, axis, DType::i64);
  const StablehloValue lowest = emit.constant(lowest_value(x.dtype), {}, x.dtype);
  const StablehloValue first = emit.constant(0.0, {}, DType::i64);
  const std::string value_type = StablehloEmitter::type({}, x.dtype);
  const std::string index_type = StablehloEmitter::type({}, DType::i64);
  const std::string flag_type = StablehloEmitter::type({}, DType::boolean);
  const std::string kind = is_floating(x.dtype) ? "FLOAT" : "SIGNED";
  const auto compare = [&](const std::string& result, const char* direction, const char* a,
                           const char* b, const std::string& type, const std::string& order) {
    return "      " + result + " = \"stablehlo.compare\"(" + a + ", " + b +
           ") {comparison_direction = #stablehlo<comparison_direction " + direction +
           ">, compare_type = #stablehlo<comparison_type " + order + ">} : (" + type + ", " + type +
           ") -> " + flag_type + "\n";
  };
  const std::string region =
      "({\n    ^bb0(%av: " + value_type + ", %ai: " + index_type + ", %bv: " + value_type +
      ", %bi: " + index_type + "):\n" + compare("%greater", "GT", "%av", "%bv", value_type, kind) +
      compare("%same", "EQ", "%av", "%bv", value_type, kind) +
      compare("%earlier", "LT", "%ai", "%bi", index_type, "SIGNED") +
      "      %tie = \"stablehlo.and\"(%same, %earlier) : (" + flag_type + ", " + flag_type +
      ") -> " + flag_type + "\n      %take = \"stablehlo.or\"(%greater, %tie) : (" + flag_type +
      ", " + flag_type + ") -> " + flag_type +
      "\n      %value = \"stablehlo.select\"(%take, %av, %bv) : (" + flag_type + ", " + value_type +
      ", " + value_type + ") -> " + value_type +
      "\n      %index = \"stablehlo.select\"(%take, %ai, %bi) : (" + flag_type + ", " + index_type +
      ", " + index_type + ") -> " + index_type +
      "\n      \"stablehlo.return\"(%value, %index) : (" + value_type + ", " + index_type +
      ") -> ()\n    })";
  const Shape& shape = out[0].shape;
  const std::vector<StablehloValue> results = emit.emit_results(
      "\"stablehlo.reduce\"(" + x.name + ", " + indices.name + ", " + lowest.name + ", " +
          first.name + ") " + region + " {dimensions = " + StablehloEmitter::i64_array({axis}) +
          "} : (" + StablehloEmitter::type(x) + ", " + StablehloEmitter::type(indices) + ", " +
          value_type + ", " + index_type + ") -> (" + StablehloEmitter::type(shape, x.dtype) +
          ", " + StablehloEmitter::type(shape, DType::i64) + ")",
      {{"", shape, x.dtype}, {"", shape, DType::i64}});
  return {results[1]};
}

std::vector<StablehloValue> lower_broadcast_to(StablehloEmitter& emit,
                                               std::span<const StablehloValue> in,
                                               std::span<const TensorMeta> out, const Attrs&) {
  return {emit.broadcast(in[0], out[0].shape)};
}

}  // namespace

std::vector<OpDef> define_reduction_ops() {
  return op_family<k_reduction_ops>(
      OpRules<OpKind::sum>{1, 1, infer_reduce, grad_sum, reduce_cost, lower_reduce<OpKind::sum>},
      OpRules<OpKind::mean>{1, 1, infer_reduce, grad_mean, reduce_cost, lower_reduce<OpKind::mean>},
      OpRules<OpKind::max>{1, 1, infer_reduce, grad_max, reduce_cost, lower_reduce<OpKind::max>},
      OpRules<OpKind::argmax>{1, 1, infer_argmax, nullptr, reduce_cost, lower_argmax},
      OpRules<OpKind::broadcast_to>{1, 1, infer_broadcast_to, grad_broadcast_to, nullptr,
                                    lower_broadcast_to});
}

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdims) {
  return reduce(OpKind::sum, x, axes, keepdims);
}
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdims) {
  return reduce(OpKind::mean, x, axes, keepdims);
}
Tensor reduce_max(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdims) {
  return reduce(OpKind::max, x, axes, keepdims);
}
Tensor argmax(const Tensor& x, std::int64_t axis) {
  return call_op(OpKind::argmax, {x},
                 make_op_attrs<OpKind::argmax>({normalize_axis("argmax", axis, x.shape())}))[0];
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return call_op(OpKind::broadcast_to, {x}, make_op_attrs<OpKind::broadcast_to>({shape}))[0];
}

Tensor sum_to_shape(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const Shape& from = x.shape();
  if (from.size() < shape.size()) {
    throw InvalidArgument("sum_to_shape: cannot sum " + shape_str(from) +
                          " down to the larger rank " + shape_str(shape));
  }
  const std::size_t leading = from.size() - shape.size();
  std::vector<std::int64_t> axes;
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (i < leading) {
      axes.push_back(static_cast<std::int64_t>(i));
    } else if (shape[i - leading] == 1 && from[i] != 1) {
      axes.push_back(static_cast<std::int64_t>(i));
    } else if (shape[i - leading] != from[i]) {
      throw InvalidArgument("sum_to_shape: " + shape_str(from) + " does not broadcast from " +
                            shape_str(shape));
    }
  }
  return reshape(axes.empty() ? x : sum(x, axes, true), shape);
}

}  // namespace tandem
