// 2-D pooling over NHWC tensors: max and average pooling with their backward ops, and global
// average pooling. Forward wrappers, definitions and gradient rules side by side; the geometry
// lives in ops/window.h, shared with convolution and the kernels.
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
      OpRules<K::max_pool2d>{1, 1, infer_pool, grad_max_pool, cost_pool},
      OpRules<K::max_pool2d_backward>{2, 2, infer_max_pool_backward, nullptr, cost_pool_backward},
      OpRules<K::avg_pool2d>{1, 1, infer_pool, grad_avg_pool, cost_pool},
      OpRules<K::avg_pool2d_backward>{1, 1, infer_avg_pool_backward, nullptr, cost_pool_backward},
      OpRules<K::global_avg_pool2d>{1, 1, infer_global_avg_pool, grad_global_avg_pool,
                                    cost_global_avg_pool, lower_global_avg_pool});
}

Tensor max_pool2d(const Tensor& x, const Pool2DOptions& options) {
  return call_op(OpKind::max_pool2d, {x}, make_op_attrs<OpKind::max_pool2d>(options))[0];
}

Tensor max_pool2d_backward(const Tensor& dy, const Tensor& x, const Pool2DOptions& options) {
  return call_op(OpKind::max_pool2d_backward, {dy, x},
                 make_op_attrs<OpKind::max_pool2d_backward>(options))[0];
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
