// Layer normalisation over the last axis (Keras' LayerNormalization with axis=-1, as in BERT):
// y = (x - mean) * rstd * gamma + beta per row, with the row statistics mean and
// rstd = 1 / sqrt(variance + epsilon) as extra outputs for the backward kernel. Forward,
// backward kernel and gradient rule side by side.
//
// gamma, beta and the statistics have x's dtype, or f32 when x is bf16/f16, so a
// mixed-precision layer keeps its parameters in f32 as Keras does.
#include <string>

#include "ops/op_attrs.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

// gamma, beta: (C,) of one dtype, x's or f32 for a bf16/f16 x.
void require_parameters(const char* op, const TensorMeta& x, const TensorMeta& gamma,
                        const TensorMeta* beta) {
  require_floating(op, x);
  if (x.shape.empty()) {
    throw InvalidArgument(std::string(op) + ": x needs rank >= 1 (features last), got a scalar");
  }
  const Shape expected{x.shape.back()};
  const bool mixed_precision_ok =
      gamma.dtype == DType::f32 && (x.dtype == DType::bf16 || x.dtype == DType::f16);
  if (gamma.dtype != x.dtype && !mixed_precision_ok) {
    throw InvalidArgument(std::string(op) + ": gamma is " + dtype_name(gamma.dtype) + " but x is " +
                          dtype_name(x.dtype) + "; use x's dtype (or f32 for a bf16/f16 x)");
  }
  for (const TensorMeta* param : {&gamma, beta}) {
    if (param == nullptr) continue;
    const char* name = param == &gamma ? "gamma" : "beta";
    if (param->shape != expected || param->dtype != gamma.dtype) {
      throw InvalidArgument(std::string(op) + ": " + name + " " + shape_str(param->shape) + " " +
                            dtype_name(param->dtype) + " must be " + shape_str(expected) + " " +
                            dtype_name(gamma.dtype) + ", one value per feature of x " +
                            shape_str(x.shape));
    }
  }
}

void require_epsilon(const char* op, const Attrs& attrs) {
  if (!(op_attrs<OpKind::layer_norm>(attrs).epsilon > 0.0)) {
    throw InvalidArgument(std::string(op) + ": epsilon must be > 0, got " +
                          std::to_string(op_attrs<OpKind::layer_norm>(attrs).epsilon));
  }
}

// One statistic per row: x's shape without its last axis.
TensorMeta statistics_meta(const TensorMeta& x, DType dtype) {
  return {Shape(x.shape.begin(), x.shape.end() - 1), dtype};
}

// (x, gamma, beta) -> (y, mean, rstd)
std::vector<TensorMeta> infer_layer_norm(const char* op, std::span<const TensorMeta> in,
                                         const Attrs& attrs) {
  const TensorMeta& x = in[0];
  require_parameters(op, x, in[1], &in[2]);
  require_epsilon(op, attrs);
  if (x.shape.back() == 0) {
    throw InvalidArgument(std::string(op) + ": x " + shape_str(x.shape) +
                          " has no features to normalise over");
  }
  const TensorMeta statistic = statistics_meta(x, in[1].dtype);
  return {x, statistic, statistic};
}

// (dy, x, gamma, mean, rstd) -> (dx, d_gamma, d_beta)
std::vector<TensorMeta> infer_layer_norm_backward(const char* op, std::span<const TensorMeta> in,
                                                  const Attrs& attrs) {
  const TensorMeta& dy = in[0];
  const TensorMeta& x = in[1];
  require_parameters(op, x, in[2], nullptr);
  if (dy.shape != x.shape || dy.dtype != x.dtype) {
    throw InvalidArgument(std::string(op) + ": dy " + shape_str(dy.shape) + " " +
                          dtype_name(dy.dtype) + " must match x " + shape_str(x.shape) + " " +
                          dtype_name(x.dtype));
  }
  const TensorMeta statistic = statistics_meta(x, in[2].dtype);
  for (int i = 3; i < 5; ++i) {
    if (in[i].shape != statistic.shape || in[i].dtype != statistic.dtype) {
      throw InvalidArgument(std::string(op) + ": " + (i == 3 ? "mean " : "rstd ") +
                            shape_str(in[i].shape) + " " + dtype_name(in[i].dtype) + " must be " +
                            shape_str(statistic.shape) + " " + dtype_name(statistic.dtype) +
                            ", one value per row of x " + shape_str(x.shape));
    }
  }
  return {x, in[2], in[2]};
}

// Mean, variance, normalise, scale and shift: about 8 operations per element.
OpCost layer_norm_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                       const Attrs&) {
  return elementwise_cost(in, out.first(1), 8.0);
}

OpCost layer_norm_backward_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                                const Attrs&) {
  return elementwise_cost(in, out.first(1), 10.0);
}

// y's gradient goes through layer_norm_backward. Should a gradient reach the statistics (rare:
// they exist for the backward kernel), it flows to x as d mean / dx = 1 / C and
// d rstd / dx = -rstd^3 (x - mean) / C.
std::vector<Tensor> grad_layer_norm(const GradContext& c) {
  const Tensor& x = c.inputs[0];      // (..., C)
  const Tensor& mean = c.outputs[1];  // (...)
  const Tensor& rstd = c.outputs[2];  // (...)
  std::vector<Tensor> grads(3);
  if (c.output_grads[0].defined()) {
    grads = layer_norm_backward(c.output_grads[0], x, c.inputs[1], mean, rstd);
  }
  const Tensor& d_mean = c.output_grads[1];
  const Tensor& d_rstd = c.output_grads[2];
  if (!d_mean.defined() && !d_rstd.defined()) return grads;
  Shape keepdims = mean.shape();
  keepdims.push_back(1);
  const auto features = static_cast<double>(x.dim(-1));
  Tensor d_x_statistics;  // (..., C)
  if (d_mean.defined()) {
    d_x_statistics = broadcast_to(reshape(cast(d_mean, x.dtype()), keepdims) / features, x.shape());
  }
  if (d_rstd.defined()) {
    const Tensor rstd_column = reshape(cast(rstd, x.dtype()), keepdims);
    const Tensor centered = x - reshape(cast(mean, x.dtype()), keepdims);
    const Tensor term = centered * (rstd_column * rstd_column * rstd_column) *
                        reshape(cast(d_rstd, x.dtype()), keepdims) * (-1.0 / features);
    d_x_statistics = d_x_statistics.defined() ? d_x_statistics + term : term;
  }
  grads[0] = grads[0].defined() ? grads[0] + d_x_statistics : d_x_statistics;
  return grads;
}

// ---- StableHLO ----

// Rows of x (its last axis), computed in the parameters' dtype, or f32 for 16-bit floats (as the
// CPU kernels compute them): inputs converted to it, outputs back to their own dtypes.
struct RowStatistics {
  StablehloEmitter& emit;
  Shape shape;    // x's
  DType compute;  // the parameters' dtype
  std::int64_t axis = 0;
  double width = 1;  // elements per row

  RowStatistics(StablehloEmitter& emitter, const StablehloValue& x, DType parameters)
      : emit(emitter),
        shape(x.shape),
        compute(StablehloEmitter::accumulation_type(parameters)),
        axis(static_cast<std::int64_t>(x.shape.size()) - 1),
        width(static_cast<double>(x.shape.back())) {}
  StablehloValue op(const char* name, const StablehloValue& a, const StablehloValue& b) const {
    return emit.elementwise(name, {a, b}, a.dtype);
  }
  // One value per row, to x's shape.
  StablehloValue spread_rows(const StablehloValue& rows) const {
    std::vector<std::int64_t> dims;
    for (std::int64_t kept = 0; kept < axis; ++kept)
      dims.push_back(kept);
    return emit.broadcast_in_dim(rows, shape, dims);
  }
  StablehloValue row_mean(const StablehloValue& value) const {
    const StablehloValue total = emit.reduce(value, {axis}, "stablehlo.add", 0.0);
    return op("stablehlo.divide", total, emit.constant(width, total.shape, compute));
  }
  // Summed over every row: a feature's total.
  StablehloValue feature_sum(const StablehloValue& value) const {
    std::vector<std::int64_t> rows;
    for (std::int64_t kept = 0; kept < axis; ++kept)
      rows.push_back(kept);
    return emit.reduce(value, rows, "stablehlo.add", 0.0);
  }
};

// (x, gamma, beta) -> (y, mean, rstd): y = (x - mean) rstd gamma + beta per row.
std::vector<StablehloValue> lower_layer_norm(StablehloEmitter& emit,
                                             std::span<const StablehloValue> in,
                                             std::span<const TensorMeta> out, const Attrs& attrs) {
  const double epsilon = op_attrs<OpKind::layer_norm>(attrs).epsilon;
  const RowStatistics rows(emit, in[0], in[1].dtype);
  const StablehloValue x = emit.convert(in[0], rows.compute);
  const StablehloValue mean = rows.row_mean(x);
  const StablehloValue centered = rows.op("stablehlo.subtract", x, rows.spread_rows(mean));
  const StablehloValue variance = rows.row_mean(rows.op("stablehlo.multiply", centered, centered));
  const StablehloValue rstd = emit.elementwise(
      "stablehlo.rsqrt",
      {rows.op("stablehlo.add", variance, emit.constant(epsilon, variance.shape, rows.compute))},
      rows.compute);
  const StablehloValue normalised = rows.op("stablehlo.multiply", centered, rows.spread_rows(rstd));
  const StablehloValue gamma = emit.broadcast(emit.convert(in[1], rows.compute), rows.shape);
  const StablehloValue beta = emit.broadcast(emit.convert(in[2], rows.compute), rows.shape);
  const StablehloValue y =
      rows.op("stablehlo.add", rows.op("stablehlo.multiply", normalised, gamma), beta);
  return {emit.convert(y, out[0].dtype), emit.convert(mean, out[1].dtype),
          emit.convert(rstd, out[2].dtype)};
}

// (dy, x, gamma, mean, rstd) -> (dx, d_gamma, d_beta) with g = dy gamma:
// dx = rstd (g - mean(g) - x_hat mean(g x_hat)) per row.
std::vector<StablehloValue> lower_layer_norm_backward(StablehloEmitter& emit,
                                                      std::span<const StablehloValue> in,
                                                      std::span<const TensorMeta> out,
                                                      const Attrs&) {
  const RowStatistics rows(emit, in[1], in[2].dtype);
  const StablehloValue dy = emit.convert(in[0], rows.compute);
  const StablehloValue x = emit.convert(in[1], rows.compute);
  const StablehloValue rstd = rows.spread_rows(emit.convert(in[4], rows.compute));
  const StablehloValue x_hat = rows.op(
      "stablehlo.multiply",
      rows.op("stablehlo.subtract", x, rows.spread_rows(emit.convert(in[3], rows.compute))), rstd);
  const StablehloValue d_gamma = rows.feature_sum(rows.op("stablehlo.multiply", dy, x_hat));
  const StablehloValue d_beta = rows.feature_sum(dy);
  const StablehloValue g = rows.op("stablehlo.multiply", dy,
                                   emit.broadcast(emit.convert(in[2], rows.compute), rows.shape));
  const StablehloValue inner = rows.op(
      "stablehlo.subtract", rows.op("stablehlo.subtract", g, rows.spread_rows(rows.row_mean(g))),
      rows.op("stablehlo.multiply", x_hat,
              rows.spread_rows(rows.row_mean(rows.op("stablehlo.multiply", g, x_hat)))));
  return {emit.convert(rows.op("stablehlo.multiply", rstd, inner), out[0].dtype),
          emit.convert(d_gamma, out[1].dtype), emit.convert(d_beta, out[2].dtype)};
}

}  // namespace

std::vector<OpDef> define_layer_norm_ops() {
  return op_family<k_layer_norm_ops>(
      OpRules<OpKind::layer_norm>{3, 3, infer_layer_norm, grad_layer_norm, layer_norm_cost,
                                  lower_layer_norm},
      // Not differentiable itself: no second-order gradients through layer norm.
      OpRules<OpKind::layer_norm_backward>{5, 5, infer_layer_norm_backward, nullptr,
                                           layer_norm_backward_cost, lower_layer_norm_backward});
}

LayerNormResult layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           double epsilon) {
  std::vector<Tensor> outputs =
      call_op(OpKind::layer_norm, {x, gamma, beta}, make_op_attrs<OpKind::layer_norm>({epsilon}));
  return {std::move(outputs[0]), std::move(outputs[1]), std::move(outputs[2])};
}

std::vector<Tensor> layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                        const Tensor& mean, const Tensor& rstd) {
  return call_op(OpKind::layer_norm_backward, {dy, x, gamma, mean, rstd});
}

}  // namespace tandem
