// Batch normalisation over every axis but the last (the channels of NHWC or (N, C) tensors):
// one op for training (batch statistics as extra outputs) and inference (given statistics), its
// backward kernel, and the gradient rules, side by side.
//
// The scale, offset and statistics (C,) have x's dtype, or f32 when x is bf16/f16, so a
// mixed-precision layer keeps its parameters in f32 as Keras does.
#include <string>
#include <utility>

#include "ops/op_attrs.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

std::int64_t channels_of(const TensorMeta& x) {
  return x.shape.back();
}

void require_input_tensor(const char* op, const TensorMeta& x) {
  require_floating(op, x);
  if (x.shape.size() < 2) {
    throw InvalidArgument(std::string(op) + ": x " + shape_str(x.shape) +
                          " needs rank >= 2, (..., C) with channels last");
  }
}

// gamma, beta, mean, variance: shape (C,), one dtype: x's, or f32 for a bf16/f16 x.
void require_parameters(const char* op, const TensorMeta& x, std::span<const TensorMeta> params,
                        std::span<const char* const> names) {
  const Shape expected{channels_of(x)};
  const DType dtype = params[0].dtype;
  const bool mixed_precision_ok =
      dtype == DType::f32 && (x.dtype == DType::bf16 || x.dtype == DType::f16);
  if (dtype != x.dtype && !mixed_precision_ok) {
    throw InvalidArgument(std::string(op) + ": " + names[0] + " is " + dtype_name(dtype) +
                          " but x is " + dtype_name(x.dtype) +
                          "; use x's dtype (or f32 for a bf16/f16 x)");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].shape != expected) {
      throw InvalidArgument(std::string(op) + ": " + names[i] + " " + shape_str(params[i].shape) +
                            " must have shape " + shape_str(expected) +
                            ", one value per channel of x " + shape_str(x.shape));
    }
    if (params[i].dtype != dtype) {
      throw InvalidArgument(std::string(op) + ": " + names[i] + " is " +
                            dtype_name(params[i].dtype) + " but " + names[0] + " is " +
                            dtype_name(dtype) + "; give all per-channel tensors one dtype");
    }
  }
}

void require_epsilon(const char* op, const Attrs& attrs) {
  const double epsilon = op_attrs<OpKind::batch_norm>(attrs).epsilon;
  if (!(epsilon > 0.0)) {
    throw InvalidArgument(std::string(op) + ": epsilon must be > 0, got " +
                          std::to_string(epsilon));
  }
}

// (x, gamma, beta) -> (y, mean, variance) in training; (x, gamma, beta, mean, variance) -> y.
std::vector<TensorMeta> infer_batch_norm(const char* op, std::span<const TensorMeta> in,
                                         const Attrs& attrs) {
  if (in.size() == 4) {
    throw InvalidArgument(std::string(op) +
                          ": takes (x, gamma, beta) for training or (x, gamma, beta, mean, "
                          "variance) for inference, got 4 inputs");
  }
  const TensorMeta& x = in[0];
  require_input_tensor(op, x);
  require_epsilon(op, attrs);
  static constexpr const char* kNames[] = {"gamma", "beta", "mean", "variance"};
  require_parameters(op, x, in.subspan(1), std::span(kNames, in.size() - 1));
  if (in.size() == 5) return {x};
  if (shape_numel(x.shape) == 0) {
    throw InvalidArgument(std::string(op) + ": x " + shape_str(x.shape) +
                          " is empty, so it has no batch statistics");
  }
  const TensorMeta statistic{{channels_of(x)}, in[1].dtype};
  return {x, statistic, statistic};
}

// (dy, x, gamma, mean, variance) -> (dx, d_gamma, d_beta)
std::vector<TensorMeta> infer_batch_norm_backward(const char* op, std::span<const TensorMeta> in,
                                                  const Attrs& attrs) {
  const TensorMeta& dy = in[0];
  const TensorMeta& x = in[1];
  require_input_tensor(op, x);
  require_epsilon(op, attrs);
  if (dy.shape != x.shape || dy.dtype != x.dtype) {
    throw InvalidArgument(std::string(op) + ": dy " + shape_str(dy.shape) + " " +
                          dtype_name(dy.dtype) + " must match x " + shape_str(x.shape) + " " +
                          dtype_name(x.dtype));
  }
  static constexpr const char* kNames[] = {"gamma", "mean", "variance"};
  require_parameters(op, x, in.subspan(2), kNames);
  const TensorMeta parameter{{channels_of(x)}, in[2].dtype};
  return {x, parameter, parameter};
}

// Statistics (training), normalise, scale and shift: about 8 operations per element.
OpCost batch_norm_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                       const Attrs&) {
  return elementwise_cost(in, out.first(1), 8.0);
}

OpCost batch_norm_backward_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                                const Attrs&) {
  return elementwise_cost(in, out.first(1), 10.0);
}

// Training: y's gradient goes through batch_norm_backward. The batch statistics are outputs
// too; gradients reaching them (rare: the moving averages are updated outside any tape's
// target) flow to x as d mean/dx = 1/M and d variance/dx = 2 (x - mean) / M.
std::vector<Tensor> grad_batch_norm_training(const GradContext& c) {
  const Tensor& x = c.inputs[0];      // (..., C)
  const Tensor& mean = c.outputs[1];  // (C,)
  const double epsilon = op_attrs<OpKind::batch_norm>(c.attrs).epsilon;
  std::vector<Tensor> grads(3);
  if (c.output_grads[0].defined()) {
    grads =
        batch_norm_backward(c.output_grads[0], x, c.inputs[1], mean, c.outputs[2], epsilon, true);
  }
  const Tensor& d_mean = c.output_grads[1];      // (C,)
  const Tensor& d_variance = c.output_grads[2];  // (C,)
  if (!d_mean.defined() && !d_variance.defined()) return grads;
  const double rows = static_cast<double>(x.numel() / x.dim(-1));
  Tensor d_x_statistics;  // (..., C)
  if (d_mean.defined()) d_x_statistics = broadcast_to(cast(d_mean, x.dtype()) / rows, x.shape());
  if (d_variance.defined()) {
    const Tensor centered = x - cast(mean, x.dtype());
    const Tensor term = centered * (cast(d_variance, x.dtype()) * (2.0 / rows));
    d_x_statistics = d_x_statistics.defined() ? d_x_statistics + term : term;
  }
  grads[0] = grads[0].defined() ? grads[0] + d_x_statistics : d_x_statistics;
  return grads;
}

// Inference: y = gamma (x - mean) / sqrt(variance + epsilon) + beta with mean and variance as
// inputs, so they get gradients too: d mean = -gamma rstd d_beta and
// d variance = -gamma d_gamma / (2 (variance + epsilon)).
std::vector<Tensor> grad_batch_norm_inference(const GradContext& c) {
  const Tensor& gamma = c.inputs[1];     // (C,)
  const Tensor& variance = c.inputs[4];  // (C,)
  const double epsilon = op_attrs<OpKind::batch_norm>(c.attrs).epsilon;
  std::vector<Tensor> grads = batch_norm_backward(c.output_grads[0], c.inputs[0], gamma,
                                                  c.inputs[3], variance, epsilon, false);
  const Tensor shifted_variance = variance + epsilon;  // (C,)
  const Tensor d_mean = -(gamma * rsqrt(shifted_variance) * grads[2]);
  const Tensor d_variance = gamma * grads[1] / shifted_variance * -0.5;
  grads.push_back(d_mean);
  grads.push_back(d_variance);
  return grads;
}

std::vector<Tensor> grad_batch_norm(const GradContext& c) {
  return c.inputs.size() == 3 ? grad_batch_norm_training(c) : grad_batch_norm_inference(c);
}

// ---- StableHLO ----

// The statistics of the channels over every other axis, computed in the parameters' dtype, or
// f32 for 16-bit floats (as the CPU kernels compute them): every input converted to it, every
// output converted back to its own dtype.
struct ChannelStatistics {
  StablehloEmitter& emit;
  Shape shape;                     // x's
  DType compute;                   // see above
  std::vector<std::int64_t> axes;  // all but the last
  double count = 1;                // elements per channel

  ChannelStatistics(StablehloEmitter& emitter, const StablehloValue& x, DType parameters)
      : emit(emitter), shape(x.shape), compute(StablehloEmitter::accumulation_type(parameters)) {
    for (std::size_t axis = 0; axis + 1 < shape.size(); ++axis) {
      axes.push_back(static_cast<std::int64_t>(axis));
      count *= static_cast<double>(shape[axis]);
    }
  }
  StablehloValue op(const char* name, const StablehloValue& a, const StablehloValue& b) const {
    return emit.elementwise(name, {a, b}, a.dtype);
  }
  // (C,) to x's shape.
  StablehloValue spread(const StablehloValue& channels) const {
    return emit.broadcast(channels, shape);
  }
  StablehloValue channel_sum(const StablehloValue& value) const {
    return emit.reduce(value, axes, "stablehlo.add", 0.0);
  }
  StablehloValue channel_mean(const StablehloValue& value) const {
    const StablehloValue total = channel_sum(value);
    return op("stablehlo.divide", total, emit.constant(count, total.shape, compute));
  }
  StablehloValue inverse_std(const StablehloValue& variance, double epsilon) const {
    return emit.elementwise(
        "stablehlo.rsqrt",
        {op("stablehlo.add", variance, emit.constant(epsilon, variance.shape, compute))}, compute);
  }
};

// Training: (x, gamma, beta) -> (y, mean, biased variance); inference: (x, gamma, beta, mean,
// variance) -> y. y = (x - mean) / sqrt(variance + epsilon) * gamma + beta.
std::vector<StablehloValue> lower_batch_norm(StablehloEmitter& emit,
                                             std::span<const StablehloValue> in,
                                             std::span<const TensorMeta> out, const Attrs& attrs) {
  const double epsilon = op_attrs<OpKind::batch_norm>(attrs).epsilon;
  const ChannelStatistics stats(emit, in[0], in[1].dtype);
  const StablehloValue x = emit.convert(in[0], stats.compute);
  const bool training = in.size() == 3;
  const StablehloValue mean = training ? stats.channel_mean(x) : emit.convert(in[3], stats.compute);
  const StablehloValue centered = stats.op("stablehlo.subtract", x, stats.spread(mean));
  const StablehloValue variance =
      training ? stats.channel_mean(stats.op("stablehlo.multiply", centered, centered))
               : emit.convert(in[4], stats.compute);
  const StablehloValue normalised =
      stats.op("stablehlo.multiply", centered, stats.spread(stats.inverse_std(variance, epsilon)));
  const StablehloValue y = stats.op(
      "stablehlo.add",
      stats.op("stablehlo.multiply", normalised, stats.spread(emit.convert(in[1], stats.compute))),
      stats.spread(emit.convert(in[2], stats.compute)));
  std::vector<StablehloValue> results{emit.convert(y, out[0].dtype)};
  if (training) {
    results.push_back(emit.convert(mean, out[1].dtype));
    results.push_back(emit.convert(variance, out[2].dtype));
  }
  return results;
}

// (dy, x, gamma, mean, variance) -> (dx, d_gamma, d_beta). In training the statistics depend on
// x: dx = gamma inv / M (M dy - d_beta - x_hat d_gamma); otherwise dx = dy gamma inv.
std::vector<StablehloValue> lower_batch_norm_backward(StablehloEmitter& emit,
                                                      std::span<const StablehloValue> in,
                                                      std::span<const TensorMeta> out,
                                                      const Attrs& attrs) {
  const BatchNormBackwardAttrs& options = op_attrs<OpKind::batch_norm_backward>(attrs);
  const ChannelStatistics stats(emit, in[1], in[2].dtype);
  const StablehloValue dy = emit.convert(in[0], stats.compute);
  const StablehloValue x = emit.convert(in[1], stats.compute);
  const StablehloValue gamma = emit.convert(in[2], stats.compute);
  const StablehloValue mean = emit.convert(in[3], stats.compute);
  const StablehloValue variance = emit.convert(in[4], stats.compute);
  const StablehloValue inverse = stats.spread(stats.inverse_std(variance, options.epsilon));
  const StablehloValue x_hat = stats.op(
      "stablehlo.multiply", stats.op("stablehlo.subtract", x, stats.spread(mean)), inverse);
  const StablehloValue d_beta = stats.channel_sum(dy);
  const StablehloValue d_gamma = stats.channel_sum(stats.op("stablehlo.multiply", dy, x_hat));
  const StablehloValue scale = stats.op("stablehlo.multiply", stats.spread(gamma), inverse);
  StablehloValue dx;
  if (options.training) {
    const StablehloValue count = emit.constant(stats.count, stats.shape, stats.compute);
    const StablehloValue inner =
        stats.op("stablehlo.subtract",
                 stats.op("stablehlo.subtract", stats.op("stablehlo.multiply", count, dy),
                          stats.spread(d_beta)),
                 stats.op("stablehlo.multiply", x_hat, stats.spread(d_gamma)));
    dx = stats.op("stablehlo.divide", stats.op("stablehlo.multiply", scale, inner), count);
  } else {
    dx = stats.op("stablehlo.multiply", dy, scale);
  }
  return {emit.convert(dx, out[0].dtype), emit.convert(d_gamma, out[1].dtype),
          emit.convert(d_beta, out[2].dtype)};
}

}  // namespace

std::vector<OpDef> define_norm_ops() {
  return op_family<k_norm_ops>(
      OpRules<OpKind::batch_norm>{3, 5, infer_batch_norm, grad_batch_norm, batch_norm_cost,
                                  lower_batch_norm},
      // Not differentiable itself: no second-order gradients through batch norm.
      OpRules<OpKind::batch_norm_backward>{5, 5, infer_batch_norm_backward, nullptr,
                                           batch_norm_backward_cost, lower_batch_norm_backward});
}

BatchNormTrainingResult batch_norm_training(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, double epsilon) {
  std::vector<Tensor> outputs =
      call_op(OpKind::batch_norm, {x, gamma, beta}, make_op_attrs<OpKind::batch_norm>({epsilon}));
  return {std::move(outputs[0]), std::move(outputs[1]), std::move(outputs[2])};
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon) {
  return call_op(OpKind::batch_norm, {x, gamma, beta, mean, variance},
                 make_op_attrs<OpKind::batch_norm>({epsilon}))[0];
}

std::vector<Tensor> batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                        const Tensor& mean, const Tensor& variance, double epsilon,
                                        bool training) {
  return call_op(OpKind::batch_norm_backward, {dy, x, gamma, mean, variance},
                 make_op_attrs<OpKind::batch_norm_backward>({epsilon, training}));
}

}  // namespace tandem
