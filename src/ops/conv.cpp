// 2-D convolution (NHWC input, (KH, KW, C_in, C_out) filter, optional bias) and its two backward
// ops. Forward wrappers, definitions and gradient rules side by side; the geometry (output
// extents, SAME padding) lives in ops/window.h, shared with pooling and the kernels.
#include <array>
#include <string>

#include "ops/op_attrs.h"
#include "ops/window.h"

namespace tandem {
namespace {

void require_conv_dtypes(const char* op, std::span<const TensorMeta> in) {
  require_same_dtype(op, in);
  require_floating(op, in[0]);
}

void require_output_gradient(const char* op, const TensorMeta& dy, const Window2D& geometry) {
  if (dy.shape != geometry.output_shape()) {
    throw InvalidArgument(std::string(op) + ": dy has shape " + shape_str(dy.shape) +
                          " but the convolution of an input " + shape_str(geometry.input_shape()) +
                          " produces " + shape_str(geometry.output_shape()) +
                          "; pass the gradient of that forward output");
  }
}

// inputs: x (N, H, W, C_in), filter (KH, KW, C_in, C_out), optional bias (C_out,)
std::vector<TensorMeta> infer_conv2d(const char* op, std::span<const TensorMeta> in,
                                     const Attrs& attrs) {
  require_conv_dtypes(op, in);
  const Window2D geometry =
      conv_window(op, in[0].shape, in[1].shape, read_attrs<Conv2DOptions>(attrs));
  const bool fused_add = op_attrs<OpKind::conv2d>(attrs).fused_add;
  if (has_bias_input(in.size(), fused_add) && in[2].shape != Shape{geometry.out_c}) {
    throw InvalidArgument(std::string(op) + ": the bias must have shape " +
                          shape_str({geometry.out_c}) + " to match the filter " +
                          shape_str(in[1].shape) + ", got " + shape_str(in[2].shape));
  }
  if (fused_add && in.back().shape != geometry.output_shape()) {
    throw InvalidArgument(std::string(op) + ": the fused residual " + shape_str(in.back().shape) +
                          " must have the output's shape " + shape_str(geometry.output_shape()));
  }
  return {{geometry.output_shape(), in[0].dtype}};
}

// inputs: dy (N, OH, OW, C_out), filter (KH, KW, C_in, C_out); attrs input_shape
std::vector<TensorMeta> infer_conv2d_backward_input(const char* op, std::span<const TensorMeta> in,
                                                    const Attrs& attrs) {
  require_conv_dtypes(op, in);
  const Shape input_shape = op_attrs<OpKind::conv2d_backward_input>(attrs).input_shape;
  const Window2D geometry =
      conv_window(op, input_shape, in[1].shape, read_attrs<Conv2DOptions>(attrs));
  require_output_gradient(op, in[0], geometry);
  return {{input_shape, in[0].dtype}};
}

// inputs: x (N, H, W, C_in), dy (N, OH, OW, C_out); attrs filter_shape, with_bias
std::vector<TensorMeta> infer_conv2d_backward_filter(const char* op, std::span<const TensorMeta> in,
                                                     const Attrs& attrs) {
  require_conv_dtypes(op, in);
  const Conv2DBackwardFilterAttrs options = op_attrs<OpKind::conv2d_backward_filter>(attrs);
  const Shape& filter_shape = options.filter_shape;
  const Window2D geometry = conv_window(op, in[0].shape, filter_shape, options);
  require_output_gradient(op, in[1], geometry);
  std::vector<TensorMeta> out{{filter_shape, in[0].dtype}};
  if (options.with_bias) out.push_back({{geometry.out_c}, in[0].dtype});
  return out;
}

// All three ops do one multiply-add per (output position, window cell, C_in, C_out); the bias
// adds (forward) or sums (backward) once per output element.
OpCost conv_cost(const Window2D& geometry, bool with_bias, std::span<const TensorMeta> in,
                 std::span<const TensorMeta> out) {
  const double macs = geometry.window_visits() * static_cast<double>(geometry.in_c) *
                      static_cast<double>(geometry.out_c);
  const double bias_flops =
      with_bias ? static_cast<double>(shape_numel(geometry.output_shape())) : 0.0;
  return {2.0 * macs + bias_flops, bytes_of(in) + bytes_of(out)};
}

OpCost cost_conv2d(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                   const Attrs& attrs) {
  const bool fused_add = op_attrs<OpKind::conv2d>(attrs).fused_add;
  OpCost cost =
      conv_cost(conv_window("conv2d", in[0].shape, in[1].shape, read_attrs<Conv2DOptions>(attrs)),
                has_bias_input(in.size(), fused_add), in, out);
  if (fused_add) cost.flops += static_cast<double>(shape_numel(out[0].shape));
  return cost;
}

OpCost cost_conv2d_backward_input(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                                  const Attrs& attrs) {
  return conv_cost(conv_window("conv2d_backward_input", out[0].shape, in[1].shape,
                               read_attrs<Conv2DOptions>(attrs)),
                   false, in, out);
}

OpCost cost_conv2d_backward_filter(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                                   const Attrs& attrs) {
  return conv_cost(conv_window("conv2d_backward_filter", in[0].shape, out[0].shape,
                               read_attrs<Conv2DOptions>(attrs)),
                   out.size() == 2, in, out);
}

// ---- gradient rule ----
// d x = conv2d_backward_input(dy, filter); d filter (and d bias) = conv2d_backward_filter(x, dy);
// with a fused relu, dy is first masked where the output is zero; a fused residual's gradient is
// that dy.
std::vector<Tensor> grad_conv2d(const GradContext& c) {
  const Conv2DAttrs attrs = op_attrs<OpKind::conv2d>(c.attrs);
  const Tensor dy =
      attrs.fused_relu ? relu_backward(c.output_grads[0], c.outputs[0]) : c.output_grads[0];
  const Conv2DOptions options = attrs;
  const bool with_bias = has_bias_input(c.inputs.size(), attrs.fused_add);
  std::vector<Tensor> grads(c.inputs.size());
  if (attrs.fused_add && c.needs_grad(c.inputs.size() - 1)) grads.back() = dy;
  // The first layer's input is the images: nobody wants their gradient, and for one input
  // channel it is the slowest of the three convolutions.
  if (c.needs_grad(0)) {
    grads[0] = conv2d_backward_input(dy, c.inputs[1], c.inputs[0].shape(), options);
  }
  if (c.needs_grad(1) || (with_bias && c.needs_grad(2))) {
    std::vector<Tensor> filter_grads =
        conv2d_backward_filter(c.inputs[0], dy, c.inputs[1].shape(), with_bias, options);
    for (std::size_t i = 0; i < filter_grads.size(); ++i)
      grads[i + 1] = std::move(filter_grads[i]);
  }
  return grads;
}

// ---- StableHLO ----

// One stablehlo.convolution: its dimension layout, window strides, explicit (low, high) padding
// per spatial axis and the two dilations, as JAX writes the forward convolution and its two
// gradients (jax/_src/lax/convolution.py).
struct ConvolutionSpec {
  std::string layout;  // "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"
  std::array<std::int64_t, 2> strides{1, 1};
  std::array<std::array<std::int64_t, 2>, 2> padding{};
  std::array<std::int64_t, 2> lhs_dilation{1, 1};
  std::array<std::int64_t, 2> rhs_dilation{1, 1};
};

StablehloValue convolution(StablehloEmitter& emit, const StablehloValue& lhs,
                           const StablehloValue& rhs, const ConvolutionSpec& spec,
                           const Shape& shape, DType dtype) {
  // 16-bit operands give an f32 result (XLA accumulates in it), which the callers round once,
  // after conv2d's bias and relu, as the fused kernels do.
  const DType accumulate = StablehloEmitter::accumulation_type(dtype);
  const auto pair = [](const std::array<std::int64_t, 2>& values) {
    return StablehloEmitter::i64_array({values[0], values[1]});
  };
  const std::string padding = StablehloEmitter::padding({spec.padding[0], spec.padding[1]});
  const StablehloValue result = emit.emit(
      "\"stablehlo.convolution\"(" + lhs.name + ", " + rhs.name +
          ") {batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<" + spec.layout +
          ">, feature_group_count = 1 : i64, lhs_dilation = " + pair(spec.lhs_dilation) +
          ", padding = " + padding + ", rhs_dilation = " + pair(spec.rhs_dilation) +
          ", window_strides = " + pair(spec.strides) + "} : (" + StablehloEmitter::type(lhs) +
          ", " + StablehloEmitter::type(rhs) + ") -> " + StablehloEmitter::type(shape, accumulate),
      shape, accumulate);
  return result;
}

// A 1x1 window with stride 1 and no padding: the convolution is a product of the
// (N * H * W, C_in) rows with the (C_in, C_out) filter. It is lowered as that dot_general, which
// XLA:CPU runs as a GEMM where it runs a 1x1 stablehlo.convolution as a convolution (TF 2.15's
// XLA rewrote these into dots, the plugin's does not: bench/RESULTS.md, ResNet-50).
bool is_pointwise(const Window2D& geometry) {
  return geometry.k_h == 1 && geometry.k_w == 1 &&
         geometry.strides == std::array<std::int64_t, 2>{1, 1} &&
         geometry.pad_before == std::array<std::int64_t, 2>{0, 0} &&
         geometry.pad_after == std::array<std::int64_t, 2>{0, 0};
}

// (N, H, W, C) as (N * H * W, C); a (1, 1, C_in, C_out) filter as (C_in, C_out).
StablehloValue as_rows(StablehloEmitter& emit, const StablehloValue& value) {
  const Shape& shape = value.shape;
  return emit.reshape(value, {shape[0] * shape[1] * shape[2], shape[3]});
}

// The product of `lhs` and `rhs` (rank 2, contracting the given axes) in the accumulation type,
// reshaped to `shape`.
StablehloValue pointwise_product(StablehloEmitter& emit, const StablehloValue& lhs,
                                 const StablehloValue& rhs, std::int64_t lhs_contracting,
                                 std::int64_t rhs_contracting, const Shape& shape, DType dtype) {
  const DType accumulate = StablehloEmitter::accumulation_type(dtype);
  const Shape rows{lhs.shape[static_cast<std::size_t>(1 - lhs_contracting)],
                   rhs.shape[static_cast<std::size_t>(1 - rhs_contracting)]};
  return emit.reshape(
      emit.dot_general(lhs, rhs, {}, lhs_contracting, rhs_contracting, rows, accumulate), shape);
}

// 1 + d (n - 1): the extent of n cells spread d apart (0 for none).
std::int64_t dilated(std::int64_t extent, std::int64_t dilation) {
  return extent == 0 ? 0 : 1 + dilation * (extent - 1);
}

std::vector<StablehloValue> lower_conv2d(StablehloEmitter& emit, std::span<const StablehloValue> in,
                                         std::span<const TensorMeta> out, const Attrs& attrs) {
  const Conv2DAttrs& options = op_attrs<OpKind::conv2d>(attrs);
  const Window2D geometry = conv_window("conv2d", in[0].shape, in[1].shape, options);
  ConvolutionSpec spec{
      "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]", options.strides, {}, {1, 1}, options.dilations};
  for (std::size_t axis = 0; axis < 2; ++axis)
    spec.padding[axis] = {geometry.pad_before[axis], geometry.pad_after[axis]};
  const Shape& shape = out[0].shape;
  StablehloValue y = is_pointwise(geometry)
                         ? pointwise_product(emit, as_rows(emit, in[0]), as_rows(emit, in[1]), 1, 0,
                                             shape, out[0].dtype)
                         : convolution(emit, in[0], in[1], spec, shape, out[0].dtype);
  const DType accumulate = y.dtype;
  if (has_bias_input(in.size(), options.fused_add)) {
    y = emit.elementwise("stablehlo.add",
                         {y, emit.broadcast(emit.convert(in[2], accumulate), shape)}, accumulate);
  }
  if (options.fused_add) {
    y = emit.elementwise("stablehlo.add", {y, emit.convert(in.back(), accumulate)}, accumulate);
  }
  if (options.fused_relu) {
    y = emit.elementwise("stablehlo.maximum", {y, emit.constant(0.0, shape, accumulate)},
                         accumulate);
  }
  return {emit.convert(y, out[0].dtype)};
}

// dx: dy dilated by the strides, convolved with the filter reversed in space and with its
// channel axes swapped, padded so that each input cell sees every output it fed.
std::vector<StablehloValue> lower_conv2d_backward_input(StablehloEmitter& emit,
                                                        std::span<const StablehloValue> in,
                                                        std::span<const TensorMeta> out,
                                                        const Attrs& attrs) {
  const Conv2DBackwardInputAttrs& options = op_attrs<OpKind::conv2d_backward_input>(attrs);
  const Window2D geometry =
      conv_window("conv2d_backward_input", options.input_shape, in[1].shape, options);
  const StablehloValue& filter = in[1];
  if (is_pointwise(geometry)) {  // dy (N*H*W, C_out) times the filter (C_in, C_out) transposed
    return {emit.convert(pointwise_product(emit, as_rows(emit, in[0]), as_rows(emit, filter), 1, 1,
                                           out[0].shape, out[0].dtype),
                         out[0].dtype)};
  }
  const StablehloValue reversed =
      emit.emit("\"stablehlo.reverse\"(" + filter.name + ") {dimensions = array<i64: 0, 1>} : (" +
                    StablehloEmitter::type(filter) + ") -> " + StablehloEmitter::type(filter),
                filter.shape, filter.dtype);
  ConvolutionSpec spec{
      "[b, 0, 1, f]x[0, 1, o, i]->[b, 0, 1, f]", {1, 1}, {}, options.strides, options.dilations};
  const std::array<std::int64_t, 2> in_extent{geometry.in_h, geometry.in_w};
  const std::array<std::int64_t, 2> out_extent{geometry.out_h, geometry.out_w};
  const std::array<std::int64_t, 2> kernel{geometry.k_h, geometry.k_w};
  for (std::size_t axis = 0; axis < 2; ++axis) {
    const std::int64_t kernel_extent = dilated(kernel[axis], options.dilations[axis]);
    const std::int64_t before = kernel_extent - geometry.pad_before[axis] - 1;
    const std::int64_t after = in_extent[axis] + kernel_extent - 1 -
                               dilated(out_extent[axis], options.strides[axis]) - before;
    spec.padding[axis] = {before, after};
  }
  return {emit.convert(convolution(emit, in[0], reversed, spec, out[0].shape, out[0].dtype),
                       out[0].dtype)};
}

// d filter: x with its batch and channel axes swapped convolved with dy as the window, the
// strides becoming the window's dilation; d bias: dy summed over all but its channels.
std::vector<StablehloValue> lower_conv2d_backward_filter(StablehloEmitter& emit,
                                                         std::span<const StablehloValue> in,
                                                         std::span<const TensorMeta> out,
                                                         const Attrs& attrs) {
  const Conv2DBackwardFilterAttrs& options = op_attrs<OpKind::conv2d_backward_filter>(attrs);
  const Window2D geometry =
      conv_window("conv2d_backward_filter", in[0].shape, options.filter_shape, options);
  StablehloValue filter_gradient;
  if (is_pointwise(geometry)) {  // x (N*H*W, C_in) transposed times dy (N*H*W, C_out)
    filter_gradient = pointwise_product(emit, as_rows(emit, in[0]), as_rows(emit, in[1]), 0, 0,
                                        out[0].shape, out[0].dtype);
  } else {
    ConvolutionSpec spec{
        "[f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f]", options.dilations, {}, {1, 1}, options.strides};
    const std::array<std::int64_t, 2> in_extent{geometry.in_h, geometry.in_w};
    const std::array<std::int64_t, 2> out_extent{geometry.out_h, geometry.out_w};
    const std::array<std::int64_t, 2> kernel{geometry.k_h, geometry.k_w};
    for (std::size_t axis = 0; axis < 2; ++axis) {
      const std::int64_t low = geometry.pad_before[axis];
      const std::int64_t high = dilated(out_extent[axis], options.strides[axis]) - in_extent[axis] +
                                dilated(kernel[axis], options.dilations[axis]) - low - 1;
      spec.padding[axis] = {low, high};
    }
    filter_gradient = convolution(emit, in[0], in[1], spec, out[0].shape, out[0].dtype);
  }
  std::vector<StablehloValue> results{emit.convert(filter_gradient, out[0].dtype)};
  if (options.with_bias) results.push_back(emit.reduce(in[1], {0, 1, 2}, "stablehlo.add", 0.0));
  return results;
}

// An f32 residual is accumulated onto (the CPU's sum post-op) where the result may take over its
// buffer; a bf16 one is added after rounding, so it must outlive the convolution.
int conv2d_in_place_input(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const bool onto_residual =
      op_attrs<OpKind::conv2d>(attrs).fused_add && inputs[0].dtype == DType::f32;
  return onto_residual ? static_cast<int>(inputs.size()) - 1 : -1;
}

}  // namespace

std::vector<OpDef> define_conv_ops() {
  using K = OpKind;
  return op_family<k_conv_ops>(
      OpRules<K::conv2d>{2,
                         4,
                         infer_conv2d,
                         grad_conv2d,
                         cost_conv2d,
                         lower_conv2d,
                         {},
                         false,
                         conv2d_in_place_input},
      OpRules<K::conv2d_backward_input>{2, 2, infer_conv2d_backward_input, nullptr,
                                        cost_conv2d_backward_input, lower_conv2d_backward_input},
      OpRules<K::conv2d_backward_filter>{2, 2, infer_conv2d_backward_filter, nullptr,
                                         cost_conv2d_backward_filter,
                                         lower_conv2d_backward_filter});
}

Tensor conv2d(const Tensor& x, const Tensor& filter, const Conv2DOptions& options) {
  return call_op(OpKind::conv2d, {x, filter}, make_op_attrs<OpKind::conv2d>({options}))[0];
}

Tensor conv2d(const Tensor& x, const Tensor& filter, const Tensor& bias,
              const Conv2DOptions& options) {
  return call_op(OpKind::conv2d, {x, filter, bias}, make_op_attrs<OpKind::conv2d>({options}))[0];
}

Tensor conv2d_backward_input(const Tensor& dy, const Tensor& filter, const Shape& input_shape,
                             const Conv2DOptions& options) {
  return call_op(OpKind::conv2d_backward_input, {dy, filter},
                 make_op_attrs<OpKind::conv2d_backward_input>({options, input_shape}))[0];
}

std::vector<Tensor> conv2d_backward_filter(const Tensor& x, const Tensor& dy,
                                           const Shape& filter_shape, bool with_bias,
                                           const Conv2DOptions& options) {
  return call_op(OpKind::conv2d_backward_filter, {x, dy},
                 make_op_attrs<OpKind::conv2d_backward_filter>({options, filter_shape, with_bias}));
}

}  // namespace tandem
