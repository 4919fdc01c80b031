// 2-D convolution (NHWC input, (KH, KW, C_in, C_out) filter, optional bias) and its two backward
// ops. Forward wrappers, definitions and gradient rules side by side; the geometry (output
// extents, SAME padding) lives in ops/window.h, shared with pooling and the kernels.
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
  if (in.size() == 3 && in[2].shape != Shape{geometry.out_c}) {
    throw InvalidArgument(std::string(op) + ": the bias must have shape " +
                          shape_str({geometry.out_c}) + " to match the filter " +
                          shape_str(in[1].shape) + ", got " + shape_str(in[2].shape));
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
  return conv_cost(
      conv_window("conv2d", in[0].shape, in[1].shape, read_attrs<Conv2DOptions>(attrs)),
      in.size() == 3, in, out);
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
// with a fused relu, dy is first masked where the output is zero.
std::vector<Tensor> grad_conv2d(const GradContext& c) {
  const Conv2DAttrs attrs = op_attrs<OpKind::conv2d>(c.attrs);
  const Tensor dy =
      attrs.fused_relu ? relu_backward(c.output_grads[0], c.outputs[0]) : c.output_grads[0];
  const Conv2DOptions options = attrs;
  const bool with_bias = c.inputs.size() == 3;
  std::vector<Tensor> grads(c.inputs.size());
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

}  // namespace

std::vector<OpDef> define_conv_ops() {
  using K = OpKind;
  return op_family<k_conv_ops>(
      OpRules<K::conv2d>{2, 3, infer_conv2d, grad_conv2d, cost_conv2d},
      OpRules<K::conv2d_backward_input>{2, 2, infer_conv2d_backward_input, nullptr,
                                        cost_conv2d_backward_input},
      OpRules<K::conv2d_backward_filter>{2, 2, infer_conv2d_backward_filter, nullptr,
                                         cost_conv2d_backward_filter});
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
