// Layout and type ops: reshape (a view), transpose, concat, slice, pad, cast. Their gradients
// are each other: slice <-> pad, concat -> slices, transpose -> inverse transpose.
#include <algorithm>
#include <numeric>

#include "ops/op_attrs.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

std::vector<TensorMeta> infer_reshape(const char* op, std::span<const TensorMeta> in,
                                      const Attrs& attrs) {
  const Shape shape = op_attrs<OpKind::reshape>(attrs).shape;
  if (shape_numel(shape) != shape_numel(in[0].shape)) {
    throw InvalidArgument(std::string(op) + ": cannot reshape " + shape_str(in[0].shape) + " (" +
                          std::to_string(shape_numel(in[0].shape)) + " elements) to " +
                          shape_str(shape) + " (" + std::to_string(shape_numel(shape)) +
                          " elements)");
  }
  return {{shape, in[0].dtype}};
}

std::vector<TensorMeta> infer_transpose(const char* op, std::span<const TensorMeta> in,
                                        const Attrs& attrs) {
  const std::vector<std::int64_t> permutation = op_attrs<OpKind::transpose>(attrs).perm;
  const Shape& shape = in[0].shape;
  std::vector<std::int64_t> sorted = permutation;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> identity(shape.size());
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity) {
    throw InvalidArgument(std::string(op) + ": permutation " + shape_str(permutation) +
                          " is not a permutation of the " + std::to_string(shape.size()) +
                          " axes of shape " + shape_str(shape));
  }
  Shape result(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    result[i] = shape[static_cast<std::size_t>(permutation[i])];
  }
  return {{result, in[0].dtype}};
}

std::vector<TensorMeta> infer_concat(const char* op, std::span<const TensorMeta> in,
                                     const Attrs& attrs) {
  require_same_dtype(op, in);
  const std::int64_t axis = normalize_axis(op, op_attrs<OpKind::concat>(attrs).axis, in[0].shape);
  Shape result = in[0].shape;
  for (std::size_t k = 1; k < in.size(); ++k) {
    const Shape& shape = in[k].shape;
    bool compatible = shape.size() == result.size();
    for (std::size_t i = 0; compatible && i < shape.size(); ++i) {
      if (static_cast<std::int64_t>(i) != axis && shape[i] != result[i]) compatible = false;
    }
    if (!compatible) {
      throw InvalidArgument(std::string(op) + ": input " + std::to_string(k) + " has shape " +
                            shape_str(shape) + ", incompatible with " + shape_str(in[0].shape) +
                            " for concatenation along axis " + std::to_string(axis));
    }
    result[static_cast<std::size_t>(axis)] += shape[static_cast<std::size_t>(axis)];
  }
  return {{result, in[0].dtype}};
}

std::vector<TensorMeta> infer_slice(const char* op, std::span<const TensorMeta> in,
                                    const Attrs& attrs) {
  const std::vector<std::int64_t> begin = op_attrs<OpKind::slice>(attrs).begin;
  const std::vector<std::int64_t> size = op_attrs<OpKind::slice>(attrs).size;
  const Shape& shape = in[0].shape;
  if (begin.size() != shape.size() || size.size() != shape.size()) {
    throw InvalidArgument(std::string(op) + ": begin " + shape_str(begin) + " and size " +
                          shape_str(size) + " need one entry per axis of shape " +
                          shape_str(shape));
  }
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (begin[i] < 0 || size[i] < 0 || begin[i] + size[i] > shape[i]) {
      throw InvalidArgument(std::string(op) + ": axis " + std::to_string(i) + " range [" +
                            std::to_string(begin[i]) + ", " + std::to_string(begin[i] + size[i]) +
                            ") is outside shape " + shape_str(shape));
    }
  }
  return {{size, in[0].dtype}};
}

std::vector<TensorMeta> infer_pad(const char* op, std::span<const TensorMeta> in,
                                  const Attrs& attrs) {
  const std::vector<std::int64_t> paddings = op_attrs<OpKind::pad>(attrs).paddings;
  const Shape& shape = in[0].shape;
  if (paddings.size() != 2 * shape.size()) {
    throw InvalidArgument(std::string(op) + ": needs {before, after} for each of the " +
                          std::to_string(shape.size()) + " axes of shape " + shape_str(shape));
  }
  Shape result = shape;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (paddings[2 * i] < 0 || paddings[2 * i + 1] < 0) {
      throw InvalidArgument(std::string(op) + ": negative padding on axis " + std::to_string(i) +
                            "; use slice to crop");
    }
    result[i] += paddings[2 * i] + paddings[2 * i + 1];
  }
  return {{result, in[0].dtype}};
}

std::vector<TensorMeta> infer_cast(const char*, std::span<const TensorMeta> in,
                                   const Attrs& attrs) {
  return {{in[0].shape, op_attrs<OpKind::cast>(attrs).dtype}};
}

OpCost copy_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return {0.0, bytes_of(out) * 2};
}

OpCost no_cost(std::span<const TensorMeta>, std::span<const TensorMeta>, const Attrs&) {
  return {0.0, 0.0};
}

std::vector<Tensor> grad_reshape(const GradContext& c) {
  return {reshape(c.output_grads[0], c.inputs[0].shape())};
}

std::vector<Tensor> grad_transpose(const GradContext& c) {
  const std::vector<std::int64_t> permutation = op_attrs<OpKind::transpose>(c.attrs).perm;
  std::vector<std::int64_t> inverse(permutation.size());
  for (std::size_t i = 0; i < permutation.size(); ++i) {
    inverse[static_cast<std::size_t>(permutation[i])] = static_cast<std::int64_t>(i);
  }
  return {transpose(c.output_grads[0], inverse)};
}

std::vector<Tensor> grad_concat(const GradContext& c) {
  const Tensor& dy = c.output_grads[0];
  const auto axis = static_cast<std::size_t>(op_attrs<OpKind::concat>(c.attrs).axis);
  std::vector<std::int64_t> begin(dy.shape().size(), 0);
  std::vector<Tensor> grads;
  for (const Tensor& input : c.inputs) {
    grads.push_back(slice(dy, begin, input.shape()));
    begin[axis] += input.shape()[axis];
  }
  return grads;
}

std::vector<Tensor> grad_slice(const GradContext& c) {
  const std::vector<std::int64_t> begin = op_attrs<OpKind::slice>(c.attrs).begin;
  const Shape& input_shape = c.inputs[0].shape();
  const Shape& size = c.outputs[0].shape();
  std::vector<std::array<std::int64_t, 2>> paddings;
  for (std::size_t i = 0; i < input_shape.size(); ++i) {
    paddings.push_back({begin[i], input_shape[i] - begin[i] - size[i]});
  }
  return {pad(c.output_grads[0], paddings)};
}

std::vector<Tensor> grad_pad(const GradContext& c) {
  const std::vector<std::int64_t> paddings = op_attrs<OpKind::pad>(c.attrs).paddings;
  std::vector<std::int64_t> begin;
  for (std::size_t i = 0; i < c.inputs[0].shape().size(); ++i)
    begin.push_back(paddings[2 * i]);
  return {slice(c.output_grads[0], begin, c.inputs[0].shape())};
}

std::vector<Tensor> grad_cast(const GradContext& c) {
  if (!is_floating(c.inputs[0].dtype())) return {Tensor()};
  return {cast(c.output_grads[0], c.inputs[0].dtype())};
}

// ---- StableHLO ----

using Lowered = std::vector<StablehloValue>;
using LoweredInputs = std::span<const StablehloValue>;
using LoweredOutputs = std::span<const TensorMeta>;

Lowered lower_reshape(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out, const Attrs&) {
  return {emit.reshape(in[0], out[0].shape)};
}

Lowered lower_transpose(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out,
                        const Attrs& attrs) {
  return {emit.emit("\"stablehlo.transpose\"(" + in[0].name + ") {permutation = " +
                        StablehloEmitter::i64_array(op_attrs<OpKind::transpose>(attrs).perm) +
                        "} : (" + StablehloEmitter::type(in[0]) + ") -> " +
                        StablehloEmitter::type(out[0].shape, out[0].dtype),
                    out[0].shape, out[0].dtype)};
}

Lowered lower_concat(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out,
                     const Attrs& attrs) {
  std::string names;
  std::string types;
  for (const StablehloValue& input : in) {
    names += (names.empty() ? "" : ", ") + input.name;
    types += (types.empty() ? "" : ", ") + StablehloEmitter::type(input);
  }
  return {emit.emit("\"stablehlo.concatenate\"(" + names + ") {dimension = " +
                        std::to_string(op_attrs<OpKind::concat>(attrs).axis) + " : i64} : (" +
                        types + ") -> " + StablehloEmitter::type(out[0].shape, out[0].dtype),
                    out[0].shape, out[0].dtype)};
}

Lowered lower_slice(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out,
                    const Attrs& attrs) {
  const std::vector<std::int64_t>& begin = op_attrs<OpKind::slice>(attrs).begin;
  std::vector<std::int64_t> limit;
  for (std::size_t axis = 0; axis < begin.size(); ++axis)
    limit.push_back(begin[axis] + out[0].shape[axis]);
  return {emit.slice(in[0], begin, limit)};
}

Lowered lower_pad(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs, const Attrs& attrs) {
  const PadAttrs& pad = op_attrs<OpKind::pad>(attrs);
  std::vector<std::int64_t> low;
  std::vector<std::int64_t> high;
  for (std::size_t axis = 0; axis < in[0].shape.size(); ++axis) {
    low.push_back(pad.paddings[2 * axis]);
    high.push_back(pad.paddings[2 * axis + 1]);
  }
  return {emit.pad(in[0], pad.value, low, high)};
}

Lowered lower_cast(StablehloEmitter& emit, LoweredInputs in, LoweredOutputs out, const Attrs&) {
  return {emit.convert(in[0], out[0].dtype)};
}

}  // namespace

std::vector<OpDef> define_layout_ops() {
  using K = OpKind;
  return op_family<k_layout_ops>(
      OpRules<K::reshape>{1, 1, infer_reshape, grad_reshape, no_cost, lower_reshape, {0}},
      OpRules<K::transpose>{1, 1, infer_transpose, grad_transpose, copy_cost, lower_transpose},
      OpRules<K::concat>{1, -1, infer_concat, grad_concat, copy_cost, lower_concat},
      OpRules<K::slice>{1, 1, infer_slice, grad_slice, copy_cost, lower_slice},
      OpRules<K::pad>{1, 1, infer_pad, grad_pad, copy_cost, lower_pad},
      OpRules<K::cast>{1, 1, infer_cast, grad_cast, nullptr, lower_cast});
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape resolved = shape;
  std::int64_t known = 1;
  int inferred_axis = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred_axis >= 0) {
        throw InvalidArgument("reshape: target shape " + shape_str(shape) +
                              " has more than one -1; at most one extent can be inferred");
      }
      inferred_axis = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw InvalidArgument("reshape: negative extent in target shape " + shape_str(shape));
    } else {
      known *= shape[i];
    }
  }
  if (inferred_axis >= 0) {
    if (known == 0 || x.numel() % known != 0) {
      throw InvalidArgument("reshape: cannot reshape " + shape_str(x.shape()) + " (" +
                            std::to_string(x.numel()) + " elements) to " + shape_str(shape));
    }
    resolved[static_cast<std::size_t>(inferred_axis)] = x.numel() / known;
  }
  if (resolved == x.shape()) return x;
  return call_op(OpKind::reshape, {x}, make_op_attrs<OpKind::reshape>({resolved}))[0];
}

Tensor transpose(const Tensor& x, const std::vector<std::int64_t>& permutation) {
  std::vector<std::int64_t> resolved;
  for (std::int64_t axis : permutation)
    resolved.push_back(normalize_axis("transpose", axis, x.shape()));
  return call_op(OpKind::transpose, {x}, make_op_attrs<OpKind::transpose>({resolved}))[0];
}

Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis) {
  if (xs.empty()) throw InvalidArgument("concat: needs at least one tensor");
  return call_op(OpKind::concat, xs,
                 make_op_attrs<OpKind::concat>({normalize_axis("concat", axis, xs[0].shape())}))[0];
}

Tensor slice(const Tensor& x, const std::vector<std::int64_t>& begin,
             const std::vector<std::int64_t>& size) {
  std::vector<std::int64_t> resolved = size;
  for (std::size_t i = 0; i < resolved.size() && i < begin.size(); ++i) {
    if (resolved[i] == -1 && i < x.shape().size()) resolved[i] = x.shape()[i] - begin[i];
  }
  return call_op(OpKind::slice, {x}, make_op_attrs<OpKind::slice>({begin, resolved}))[0];
}

Tensor pad(const Tensor& x, const std::vector<std::array<std::int64_t, 2>>& paddings,
           double value) {
  std::vector<std::int64_t> flat;
  for (const auto& [before, after] : paddings) {
    flat.push_back(before);
    flat.push_back(after);
  }
  return call_op(OpKind::pad, {x}, make_op_attrs<OpKind::pad>({flat, value}))[0];
}

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return call_op(OpKind::cast, {x}, make_op_attrs<OpKind::cast>({dtype}))[0];
}

}  // namespace tandem
