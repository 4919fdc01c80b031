// 2-D pooling over NHWC tensors: max and average pooling with their backward ops, and global
// average pooling. Forward wrappers, definitions and gradient rules side by side; the geometry
// lives in ops/window.h, shared with convolution and the kernels.
#include <array>
#include <limits>
#include <string>

#include "ops/op_attrs.h"
#include "ops/window.h"

namespace tandem {
namespace {

void require_pooled_gradient(const char* op, const TensorMeta& dy, const Window2D& geometry) {
  if (dy.shape != geometry.output_shape()) {
    throw InvalidArgument(std::string(op) + ": dy has shape " + shape_str(dy.shape) +
                          " but pooling an input " + shape_str(geometry.input_shape()) +
                          " produces " + shape_str(geometry.output_shape()) +
                          "; pass the gradient of that forward output");
  }
}

// inputs: x (N, H, W, C)
std::vector<TensorMeta> infer_pool(const char* op, std::span<const TensorMeta> in,
                                   const Attrs& attrs) {
  require_floating(op, in[0]);
  return {
      {pool_window(op, in[0].shape, read_attrs<Pool2DOptions>(attrs)).output_shape(), in[0].dtype}};
}

// inputs: dy (N, OH, OW, C), x (N, H, W, C)
std::vector<TensorMeta> infer_max_pool_backward(const char* op, std::span<const TensorMeta> in,
                                                const Attrs& attrs) {
  require_same_dtype(op, in);
  require_floating(op, in[0]);
  require_pooled_gradient(op, in[0],
                          pool_window(op, in[1].shape, read_attrs<Pool2DOptions>(attrs)));
  return {in[1]};
}

// inputs: dy (N, OH, OW, C); attrs input_shape
std::vector<TensorMeta> infer_avg_pool_backward(const char* op, std::span<const TensorMeta> in,
                                                const Attrs& attrs) {
  require_floating(op, in[0]);
  const Shape input_shape = op_attrs<OpKind::avg_pool2d_backward>(attrs).input_shape;
  require_pooled_gradient(op, in[0],
                          pool_window(op, input_shape, read_attrs<Pool2DOptions>(attrs)));
  return {{input_shape, in[0].dtype}};
}

// inputs: x (N, H, W, C) -> (N, C)
std::vector<TensorMeta> infer_global_avg_pool(const char* op, std::span<const TensorMeta> in,
                                              const Attrs&) {
  require_floating(op, in[0]);
  require_rank(op, "the input (N, H, W, C)", in[0], 4);
  return {{{in[0].shape[0], in[0].shape[3]}, in[0].dtype}};
}

// One comparison or addition per (output element, window cell), forward and backward alike.
OpCost pool_cost(const Shape& x_shape, std::span<const TensorMeta> in,
                 std::span<const TensorMeta> out, const Attrs& attrs) {
  const Window2D geometry = pool_window("pool", x_shape, read_attrs<Pool2DOptions>(attrs));
  return {geometry.window_visits() * static_cast<double>(geometry.out_c),
          bytes_of(in) + bytes_of(out)};
}

OpCost cost_pool(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                 const Attrs& attrs) {
  return pool_cost(in[0].shape, in, out, attrs);
}

// The backward ops' largest tensor is the pooled input, their output.
OpCost cost_pool_backward(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                          const Attrs& attrs) {
  return pool_cost(out[0].shape, in, out, attrs);
}

OpCost cost_global_avg_pool(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                            const Attrs&) {
  return {static_cast<double>(shape_numel(in[0].shape)), bytes_of(in) + bytes_of(out)};
}

// ---- gradient rules ----
std::vector<Tensor> grad_max_pool(const GradContext& c) {
  return {max_pool2d_backward(c.output_grads[0], c.inputs[0], read_attrs<Pool2DOptions>(c.attrs))};
}

std::vector<Tensor> grad_avg_pool(const GradContext& c) {
  return {avg_pool2d_backward(c.output_grads[0], c.inputs[0].shape(),
                              read_attrs<Pool2DOptions>(c.attrs))};
}

// Every input cell gets 1 / (H W) of its image's channel gradient.
std::vector<Tensor> grad_global_avg_pool(const GradContext& c) {
  const Shape& x_shape = c.inputs[0].shape();  // (N, H, W, C)
  const Tensor& dy = c.output_grads[0];        // (N, C)
  const double cells = static_cast<double>(x_shape[1] * x_shape[2]);
  const Tensor scaled = reshape(dy * (1.0 / cells), {x_shape[0], 1, 1, x_shape[3]});
  return {broadcast_to(scaled, x_shape)};
}

// ---- StableHLO ----

// stablehlo.reduce_window over the window of `options` (NHWC: 1 x KH x KW x 1), with `padding`
// per axis of x, from `init`.
StablehloValue reduce_window(StablehloEmitter& emit, const StablehloValue& x, const std::string& op,
                             double init, const std::array<std::int64_t, 2>& window,
                             const std::array<std::int64_t, 2>& strides,
                             const std::vector<std::array<std::int64_t, 2>>& padding,
                             const Shape& shape) {
  const StablehloValue start = emit.constant(init, {}, x.dtype);
  return emit.emit(
      "\"stablehlo.reduce_window\"(" + x.name + ", " + start.name + ") (" +
          emit.binary_region(op, x.dtype) + ") {padding = " + StablehloEmitter::padding(padding) +
          ", window_dimensions = " + StablehloEmitter::i64_array({1, window[0], window[1], 1}) +
          ", window_strides = " + StablehloEmitter::i64_array({1, strides[0], strides[1], 1}) +
          "} : (" + StablehloEmitter::type(x) + ", " + StablehloEmitter::type(start) + ") -> " +
          StablehloEmitter::type(shape, x.dtype),
      shape, x.dtype);
}

// The (low, high) padding of each NHWC axis of the pooled input.
std::vector<std::array<std::int64_t, 2>> pool_padding(const Window2D& geometry) {
  return {{0, 0},
          {geometry.pad_before[0], geometry.pad_after[0]},
          {geometry.pad_before[1], geometry.pad_after[1]},
          {0, 0}};
}

// How many real (unpadded) cells each window of avg pooling covers: a window sum of ones.
StablehloValue window_counts(StablehloEmitter& emit, const Shape& input_shape, DType dtype,
                             const Pool2DOptions& options, const Window2D& geometry,
                             const Shape& shape) {
  return reduce_window(emit, emit.constant(1.0, input_shape, dtype), "stablehlo.add", 0.0,
                       options.window, options.strides, pool_padding(geometry), shape);
}

template <OpKind kKind>
std::vector<StablehloValue> lower_pool(StablehloEmitter& emit, std::span<const StablehloValue> in,
                                       std::span<const TensorMeta> out, const Attrs& attrs) {
  const StablehloValue& x = in[0];
  const Pool2DOptions& options = op_attrs<kKind>(attrs);
  const Window2D geometry = pool_window(op_name(kKind), x.shape, options);
  const Shape& shape = out[0].shape;
  if (kKind == OpKind::max_pool2d) {
    return {reduce_window(emit, x, "stablehlo.maximum", -std::numeric_limits<double>::infinity(),
                          options.window, options.strides, pool_padding(geometry), shape)};
  }
  // The window's sum and mean in the accumulation type (f32 for the 16-bit floats), rounded once
  // at the end, as the CPU kernel computes them: a bf16 sum rounded at each add strayed past
  // bf16's tolerance on 3x3 windows (1.2% against 1%, in 2% of the op harness's draws).
  const StablehloValue wide = emit.widened(x);
  const StablehloValue total = reduce_window(emit, wide, "stablehlo.add", 0.0, options.window,
                                             options.strides, pool_padding(geometry), shape);
  const StablehloValue mean = emit.elementwise(
      "stablehlo.divide",
      {total, window_counts(emit, x.shape, wide.dtype, options, geometry, shape)}, wide.dtype);
  return {emit.convert(mean, out[0].dtype)};
}

// dx: each dy to the first largest cell of its window, as select_and_scatter does on x padded
// with -inf (so no padded cell is ever chosen), then the padding sliced away.
std::vector<StablehloValue> lower_max_pool_backward(StablehloEmitter& emit,
                                                    std::span<const StablehloValue> in,
                                                    std::span<const TensorMeta> out,
                                                    const Attrs& attrs) {
  const StablehloValue& dy = in[0];
  const StablehloValue& x = in[1];
  const MaxPool2DBackwardAttrs& options = op_attrs<OpKind::max_pool2d_backward>(attrs);
  const Window2D geometry = pool_window("max_pool2d_backward", x.shape, options);
  const std::vector<std::array<std::int64_t, 2>> padding = pool_padding(geometry);
  std::vector<std::int64_t> low;
  std::vector<std::int64_t> high;
  for (std::size_t axis = 0; axis < 4; ++axis) {
    low.push_back(padding[axis][0]);
    high.push_back(padding[axis][1]);
  }
  const StablehloValue padded = emit.pad(x, -std::numeric_limits<double>::infinity(), low, high);
  const Shape& padded_shape = padded.shape;
  const StablehloValue zero = emit.constant(0.0, {}, dy.dtype);
  const StablehloValue scattered = emit.emit(
      "\"stablehlo.select_and_scatter\"(" + padded.name + ", " + dy.name + ", " + zero.name +
          ") (" + emit.binary_region("stablehlo.compare", x.dtype, "GE") + ", " +
          emit.binary_region("stablehlo.add", dy.dtype) + ") {window_dimensions = " +
          StablehloEmitter::i64_array({1, options.window[0], options.window[1], 1}) +
          ", window_strides = " +
          StablehloEmitter::i64_array({1, options.strides[0], options.strides[1], 1}) + "} : (" +
          StablehloEmitter::type(padded) + ", " + StablehloEmitter::type(dy) + ", " +
          StablehloEmitter::type(zero) + ") -> " + StablehloEmitter::type(padded_shape, dy.dtype),
      padded_shape, dy.dtype);
  std::vector<std::int64_t> limit;
  for (std::size_t axis = 0; axis < 4; ++axis)
    limit.push_back(low[axis] + x.shape[axis]);
  const StablehloValue dx = emit.slice(scattered, low, limit);
  if (!options.relu_masked) return {dx};
  const StablehloValue positive = emit.compare(x, emit.constant(0.0, x.shape, x.dtype), "GT");
  return {emit.elementwise("stablehlo.select",
                           {positive, dx, emit.constant(0.0, dx.shape, dx.dtype)}, dx.dtype)};
}

// dx: dy divided by its windows' counts, spread back over each window: the transpose of a
// window sum, which pads the (stride-dilated) gradient and sums windows of stride 1
// (jax/_src/lax/windowed_reductions.py).
std::vector<StablehloValue> lower_avg_pool_backward(StablehloEmitter& emit,
                                                    std::span<const StablehloValue> in,
                                                    std::span<const TensorMeta> out,
                                                    const Attrs& attrs) {
  const StablehloValue& dy = in[0];
  const AvgPool2DBackwardAttrs& options = op_attrs<OpKind::avg_pool2d_backward>(attrs);
  const Window2D geometry = pool_window("avg_pool2d_backward", options.input_shape, options);
  const StablehloValue share = emit.elementwise(
      "stablehlo.divide",
      {dy, window_counts(emit, options.input_shape, dy.dtype, options, geometry, dy.shape)},
      dy.dtype);
  const std::array<std::int64_t, 2> in_extent{geometry.in_h, geometry.in_w};
  const std::array<std::int64_t, 2> out_extent{geometry.out_h, geometry.out_w};
  std::vector<std::int64_t> low{0};
  std::vector<std::int64_t> high{0};
  std::vector<std::int64_t> interior{0};
  for (std::size_t axis = 0; axis < 2; ++axis) {
    const std::int64_t window = options.window[axis];
    const std::int64_t stride = options.strides[axis];
    const std::int64_t dilated_out =
        out_extent[axis] == 0 ? 0 : 1 + stride * (out_extent[axis] - 1);
    const std::int64_t before = window - geometry.pad_before[axis] - 1;
    const std::int64_t after = in_extent[axis] + window - 1 - dilated_out - before;
    low.push_back(before);
    high.push_back(after);
    interior.push_back(stride - 1);
  }
  low.push_back(0);
  high.push_back(0);
  interior.push_back(0);
  const StablehloValue padded = emit.pad(share, 0.0, low, high, interior);
  return {reduce_window(emit, padded, "stablehlo.add", 0.0, options.window, {1, 1},
                        {{0, 0}, {0, 0}, {0, 0}, {0, 0}}, out[0].shape)};
}

// The mean over H and W of (N, H, W, C).
std::vector<StablehloValue> lower_global_avg_pool(StablehloEmitter& emit,
                                                  std::span<const StablehloValue> in,
                                                  std::span<const TensorMeta> out, const Attrs&) {
  const StablehloValue& x = in[0];
  const StablehloValue total = emit.reduce(x, {1, 2}, "stablehlo.add", 0.0);  // (N, C)
  const double cells = static_cast<double>(x.shape[1] * x.shape[2]);
  return {emit.elementwise("stablehlo.divide",
                           {total, emit.constant(cells, total.shape, total.dtype)}, out[0].dtype)};
}

}  // namespace

std::vector<OpDef> define_pool_ops() {
  using K = OpKind;
  return op_family<k_pool_ops>(
      OpRules<K::max_pool2d>{1, 1, infer_pool, grad_max_pool, cost_pool, lower_pool<K::max_pool2d>},
      OpRules<K::max_pool2d_backward>{2, 2, infer_max_pool_backward, nullptr, cost_pool_backward,
                                      lower_max_pool_backward},
      OpRules<K::avg_pool2d>{1, 1, infer_pool, grad_avg_pool, cost_pool, lower_pool<K::avg_pool2d>},
      OpRules<K::avg_pool2d_backward>{1, 1, infer_avg_pool_backward, nullptr, cost_pool_backward,
                                      lower_avg_pool_backward},
      OpRules<K::global_avg_pool2d>{1, 1, infer_global_avg_pool, grad_global_avg_pool,
                                    cost_global_avg_pool, lower_global_avg_pool});
}

Tensor max_pool2d(const Tensor& x, const Pool2DOptions& options) {
  return call_op(OpKind::max_pool2d, {x}, make_op_attrs<OpKind::max_pool2d>(options))[0];
}

Tensor max_pool2d_backward(const Tensor& dy, const Tensor& x, const Pool2DOptions& options) {
  return call_op(OpKind::max_pool2d_backward, {dy, x},
                 make_op_attrs<OpKind::max_pool2d_backward>({options}))[0];
}

Tensor avg_pool2d(const Tensor& x, const Pool2DOptions& options) {
  return call_op(OpKind::avg_pool2d, {x}, make_op_attrs<OpKind::avg_pool2d>(options))[0];
}

Tensor avg_pool2d_backward(const Tensor& dy, const Shape& input_shape,
                           const Pool2DOptions& options) {
  return call_op(OpKind::avg_pool2d_backward, {dy},
                 make_op_attrs<OpKind::avg_pool2d_backward>({options, input_shape}))[0];
}

Tensor global_avg_pool2d(const Tensor& x) {
  return call_op(OpKind::global_avg_pool2d, {x})[0];
}

}  // namespace tandem
