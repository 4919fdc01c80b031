// CPU batch normalisation, forward (training and inference) and backward. x (..., C) is viewed
// as (M, C) rows: oneDNN's batch_normalization primitives for f32/bf16 (seen as an NHWC tensor of
// M images of 1x1 pixels), loops for f64/f16 that are also the reference for the oneDNN path.
#include <bit>
#include <cmath>
#include <optional>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/primitive_cache.h"
#include "ops/kernel_geometry.h"
#include "ops/op_attrs.h"
#include "tandem/runtime.h"

namespace tandem::cpu {
namespace {

// A (C,) per-channel tensor read as double, whatever its dtype.
std::vector<double> channel_values(const Tensor& tensor) {
  return tensor.to_vector<double>();
}

// Writes per-channel doubles into a (C,) tensor of any floating dtype.
void store_channels(const std::vector<double>& values, const Tensor& tensor) {
  visit_dtype(tensor.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(tensor.raw_data());
    for (std::size_t c = 0; c < values.size(); ++c)
      out[c] = convert_element<T>(values[c]);
  });
}

// Per-channel sums over all rows of add_row(row, sums) contributions, in double. The rows are
// cut into a fixed number of slices summed separately and then in order, so the result does not
// depend on the thread count.
template <typename AddRow>
std::vector<double> sum_over_rows(const LastAxisRows& shape, AddRow add_row) {
  constexpr std::int64_t kSlices = 16;
  const auto channels = static_cast<std::size_t>(shape.length);
  std::vector<std::vector<double>> partial(kSlices, std::vector<double>(channels, 0.0));
  parallel_for(kSlices, shape.rows * shape.length / kSlices + 1,
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t slice = begin; slice < end; ++slice) {
                   double* sums = partial[static_cast<std::size_t>(slice)].data();
                   const std::int64_t first = shape.rows * slice / kSlices;
                   const std::int64_t last = shape.rows * (slice + 1) / kSlices;
                   for (std::int64_t row = first; row < last; ++row)
                     add_row(row, sums);
                 }
               });
  std::vector<double> total(channels, 0.0);
  for (const std::vector<double>& sums : partial) {
    for (std::size_t c = 0; c < channels; ++c)
      total[c] += sums[c];
  }
  return total;
}

// ---- loops (f64, f16; the reference for the oneDNN path) ----
template <typename T>
void batch_norm_loops(const KernelContext& c) {
  const auto attrs = op_attrs<OpKind::batch_norm>(c.attrs);
  using C = compute_type_t<T>;
  const Tensor& x_tensor = c.inputs[0];
  const LastAxisRows shape = last_axis_rows(x_tensor);
  const std::int64_t channels = shape.length;
  const bool training = c.inputs.size() == 3;
  const T* x = static_cast<const T*>(x_tensor.raw_data());
  std::vector<double> mean;
  std::vector<double> variance;
  if (training) {
    mean = sum_over_rows(shape, [&](std::int64_t row, double* sums) {
      const T* x_row = x + row * channels;
      for (std::int64_t k = 0; k < channels; ++k)
        sums[k] += static_cast<double>(static_cast<C>(x_row[k]));
    });
    for (double& value : mean)
      value /= static_cast<double>(shape.rows);
    // Two passes: the variance of centred values does not cancel catastrophically.
    variance = sum_over_rows(shape, [&](std::int64_t row, double* sums) {
      const T* x_row = x + row * channels;
      for (std::int64_t k = 0; k < channels; ++k) {
        const double centered = static_cast<double>(static_cast<C>(x_row[k])) - mean[k];
        sums[k] += centered * centered;
      }
    });
    for (double& value : variance)
      value /= static_cast<double>(shape.rows);
    store_channels(mean, c.outputs[1]);
    store_channels(variance, c.outputs[2]);
  } else {
    mean = channel_values(c.inputs[3]);
    variance = channel_values(c.inputs[4]);
  }
  const double epsilon = attrs.epsilon;
  const std::vector<double> gamma = channel_values(c.inputs[1]);
  const std::vector<double> beta = channel_values(c.inputs[2]);
  // y = x * scale + shift per channel.
  std::vector<C> scale(static_cast<std::size_t>(channels));
  std::vector<C> shift(static_cast<std::size_t>(channels));
  for (std::int64_t k = 0; k < channels; ++k) {
    const double channel_scale = gamma[k] / std::sqrt(variance[k] + epsilon);
    scale[k] = static_cast<C>(channel_scale);
    shift[k] = static_cast<C>(beta[k] - mean[k] * channel_scale);
  }
  T* y = static_cast<T*>(c.outputs[0].raw_data());
  parallel_for(shape.rows, channels, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const T* x_row = x + row * channels;
      T* y_row = y + row * channels;
      for (std::int64_t k = 0; k < channels; ++k) {
        y_row[k] = convert_element<T>(static_cast<C>(x_row[k]) * scale[k] + shift[k]);
      }
    }
  });
}

// d_beta = sum dy, d_gamma = sum dy * xhat; dx = gamma rstd (dy - [d_beta + xhat d_gamma] / M)
// in training (the statistics depend on x), dx = gamma rstd dy in inference.
template <typename T>
void batch_norm_backward_loops(const KernelContext& c) {
  const auto attrs = op_attrs<OpKind::batch_norm_backward>(c.attrs);
  using C = compute_type_t<T>;
  const LastAxisRows shape = last_axis_rows(c.inputs[1]);
  const std::int64_t channels = shape.length;
  const T* dy = static_cast<const T*>(c.inputs[0].raw_data());
  const T* x = static_cast<const T*>(c.inputs[1].raw_data());
  const std::vector<double> gamma = channel_values(c.inputs[2]);
  const std::vector<double> mean = channel_values(c.inputs[3]);
  const std::vector<double> variance = channel_values(c.inputs[4]);
  const double epsilon = attrs.epsilon;
  const bool training = attrs.training;
  std::vector<double> rstd(static_cast<std::size_t>(channels));
  for (std::int64_t k = 0; k < channels; ++k)
    rstd[k] = 1.0 / std::sqrt(variance[k] + epsilon);

  const std::vector<double> d_beta = sum_over_rows(shape, [&](std::int64_t row, double* sums) {
    const T* dy_row = dy + row * channels;
    for (std::int64_t k = 0; k < channels; ++k)
      sums[k] += static_cast<double>(static_cast<C>(dy_row[k]));
  });
  const std::vector<double> d_gamma = sum_over_rows(shape, [&](std::int64_t row, double* sums) {
    const T* dy_row = dy + row * channels;
    const T* x_row = x + row * channels;
    for (std::int64_t k = 0; k < channels; ++k) {
      const double x_hat = (static_cast<double>(static_cast<C>(x_row[k])) - mean[k]) * rstd[k];
      sums[k] += static_cast<double>(static_cast<C>(dy_row[k])) * x_hat;
    }
  });
  store_channels(d_gamma, c.outputs[1]);
  store_channels(d_beta, c.outputs[2]);

  // dx = dy * dy_scale + x * x_scale + offset per channel.
  const double inverse_rows = shape.rows > 0 ? 1.0 / static_cast<double>(shape.rows) : 0.0;
  std::vector<C> dy_scale(static_cast<std::size_t>(channels));
  std::vector<C> x_scale(static_cast<std::size_t>(channels), C(0));
  std::vector<C> offset(static_cast<std::size_t>(channels), C(0));
  for (std::int64_t k = 0; k < channels; ++k) {
    const double g = gamma[k] * rstd[k];
    dy_scale[k] = static_cast<C>(g);
    if (training) {
      const double per_x_hat = -g * d_gamma[k] * inverse_rows;  // times xhat = (x - mean) rstd
      x_scale[k] = static_cast<C>(per_x_hat * rstd[k]);
      offset[k] = static_cast<C>(-g * d_beta[k] * inverse_rows - per_x_hat * rstd[k] * mean[k]);
    }
  }
  T* dx = static_cast<T*>(c.outputs[0].raw_data());
  parallel_for(shape.rows, channels, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const T* dy_row = dy + row * channels;
      const T* x_row = x + row * channels;
      T* dx_row = dx + row * channels;
      for (std::int64_t k = 0; k < channels; ++k) {
        dx_row[k] = convert_element<T>(static_cast<C>(dy_row[k]) * dy_scale[k] +
                                       static_cast<C>(x_row[k]) * x_scale[k] + offset[k]);
      }
    }
  });
}

// ---- oneDNN (f32, bf16 x; scale, shift and statistics always f32) ----
struct OneDnnBatchNorm {
  std::optional<dnnl::primitive> primitive;  // empty: oneDNN has no implementation here
  dnnl::memory::desc data_desc;
  dnnl::memory::desc channel_desc;
};

// The (M, C) rows as an NHWC tensor of M images of 1x1 pixels: the layout oneDNN's fast
// channels-last implementation works on.
dnnl::memory::desc rows_desc(const LastAxisRows& shape, DType dtype) {
  return dnnl::memory::desc({shape.rows, shape.length, 1, 1}, *onednn_data_type(dtype),
                            dnnl::memory::format_tag::nhwc);
}

// forward: training (statistics computed) or inference (statistics given); backward: the
// statistics are inputs either way, use_global_stats saying they do not depend on x.
OneDnnBatchNorm build_batch_norm(bool backward, bool training, const LastAxisRows& shape,
                                 DType dtype, float epsilon) {
  using flags = dnnl::normalization_flags;
  OneDnnBatchNorm result;
  result.data_desc = rows_desc(shape, dtype);
  result.channel_desc =
      dnnl::memory::desc({shape.length}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  const flags scale_shift = flags::use_scale | flags::use_shift;
  const flags statistics = training ? flags::none : flags::use_global_stats;
  // A backward primitive takes a training forward as its hint, even with given statistics.
  const dnnl::prop_kind forward_kind =
      training || backward ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::batch_normalization_forward::primitive_desc forward_pd(
      dnnl::batch_normalization_forward::desc(forward_kind, result.data_desc, epsilon,
                                              scale_shift | statistics),
      onednn_engine(), /*allow_empty=*/true);
  if (!forward_pd) return result;
  if (!backward) {
    result.primitive.emplace(dnnl::batch_normalization_forward(forward_pd));
    return result;
  }
  const dnnl::batch_normalization_backward::primitive_desc backward_pd(
      dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, result.data_desc,
                                               result.data_desc, epsilon, scale_shift | statistics),
      onednn_engine(), forward_pd, /*allow_empty=*/true);
  if (backward_pd) result.primitive.emplace(dnnl::batch_normalization_backward(backward_pd));
  return result;
}

std::shared_ptr<const OneDnnBatchNorm> cached_batch_norm(bool backward, bool training,
                                                         const LastAxisRows& shape, DType dtype,
                                                         double epsilon) {
  static PrimitiveCache<OneDnnBatchNorm> cache(64);
  const auto epsilon_f32 = static_cast<float>(epsilon);
  const PrimitiveKey key{backward,   training,     static_cast<std::int64_t>(dtype),
                         shape.rows, shape.length, std::bit_cast<std::int32_t>(epsilon_f32)};
  return cache.get(key,
                   [&] { return build_batch_norm(backward, training, shape, dtype, epsilon_f32); });
}

// The f32 tensor oneDNN needs for a per-channel input: the tensor itself or an f32 copy.
Tensor as_f32(const Tensor& tensor) {
  if (tensor.dtype() == DType::f32) return tensor;
  Tensor copy = Tensor::empty(tensor.shape(), DType::f32, tensor.device());
  store_channels(channel_values(tensor), copy);
  return copy;
}

// An f32 buffer for a per-channel output: the output itself or a scratch to convert from.
Tensor f32_target(const Tensor& output) {
  return output.dtype() == DType::f32 ? output
                                      : Tensor::empty(output.shape(), DType::f32, output.device());
}

void copy_back(const Tensor& f32, const Tensor& output) {
  if (f32.raw_data() != output.raw_data()) store_channels(channel_values(f32), output);
}

// Returns false when oneDNN has no implementation and the loops must run.
bool batch_norm_onednn(const KernelContext& c) {
  const auto attrs = op_attrs<OpKind::batch_norm>(c.attrs);
  const Tensor& x = c.inputs[0];
  const bool training = c.inputs.size() == 3;
  const LastAxisRows shape = last_axis_rows(x);
  const auto entry = cached_batch_norm(false, training, shape, x.dtype(), attrs.epsilon);
  if (!entry->primitive) return false;
  const Tensor mean = training ? f32_target(c.outputs[1]) : as_f32(c.inputs[3]);
  const Tensor variance = training ? f32_target(c.outputs[2]) : as_f32(c.inputs[4]);
  execute(*entry->primitive, {{DNNL_ARG_SRC, wrap(entry->data_desc, x)},
                              {DNNL_ARG_DST, wrap(entry->data_desc, c.outputs[0])},
                              {DNNL_ARG_SCALE, wrap(entry->channel_desc, as_f32(c.inputs[1]))},
                              {DNNL_ARG_SHIFT, wrap(entry->channel_desc, as_f32(c.inputs[2]))},
                              {DNNL_ARG_MEAN, wrap(entry->channel_desc, mean)},
                              {DNNL_ARG_VARIANCE, wrap(entry->channel_desc, variance)}});
  if (training) {
    copy_back(mean, c.outputs[1]);
    copy_back(variance, c.outputs[2]);
  }
  return true;
}

bool batch_norm_backward_onednn(const KernelContext& c) {
  const auto attrs = op_attrs<OpKind::batch_norm_backward>(c.attrs);
  const Tensor& x = c.inputs[1];
  const LastAxisRows shape = last_axis_rows(x);
  const auto entry = cached_batch_norm(true, attrs.training, shape, x.dtype(), attrs.epsilon);
  if (!entry->primitive) return false;
  const Tensor d_gamma = f32_target(c.outputs[1]);
  const Tensor d_beta = f32_target(c.outputs[2]);
  const Tensor gamma_f32 = as_f32(c.inputs[2]);
  const dnnl::memory gamma = wrap(entry->channel_desc, gamma_f32);
  execute(*entry->primitive, {{DNNL_ARG_DIFF_DST, wrap(entry->data_desc, c.inputs[0])},
                              {DNNL_ARG_SRC, wrap(entry->data_desc, x)},
                              {DNNL_ARG_SCALE, gamma},
                              // oneDNN 2.6 insists on a shift argument with use_shift although
                              // the backward pass never reads it (beta enters no gradient);
                              // gamma's buffer stands in.
                              {DNNL_ARG_SHIFT, gamma},
                              {DNNL_ARG_MEAN, wrap(entry->channel_desc, as_f32(c.inputs[3]))},
                              {DNNL_ARG_VARIANCE, wrap(entry->channel_desc, as_f32(c.inputs[4]))},
                              {DNNL_ARG_DIFF_SRC, wrap(entry->data_desc, c.outputs[0])},
                              {DNNL_ARG_DIFF_SCALE, wrap(entry->channel_desc, d_gamma)},
                              {DNNL_ARG_DIFF_SHIFT, wrap(entry->channel_desc, d_beta)}});
  copy_back(d_gamma, c.outputs[1]);
  copy_back(d_beta, c.outputs[2]);
  return true;
}

bool use_onednn(const Tensor& x) {
  return onednn_float_kernels(x.dtype()) && x.numel() > 0;
}

// oneDNN sums the batch statistics and the gradients of gamma and beta per thread, so they
// depend on the thread count; deterministic mode uses the loops' fixed slices. Inference has no
// sums and keeps oneDNN.
void batch_norm_kernel(const KernelContext& c) {
  const bool training = c.inputs.size() == 3;
  if (use_onednn(c.inputs[0]) && !(training && deterministic()) && batch_norm_onednn(c)) return;
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) batch_norm_loops<T>(c);
  });
}

void batch_norm_backward_kernel(const KernelContext& c) {
  if (use_onednn(c.inputs[1]) && !deterministic() && batch_norm_backward_onednn(c)) return;
  visit_dtype(c.inputs[1].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) batch_norm_backward_loops<T>(c);
  });
}

}  // namespace

void register_norm_kernels(KernelTable& table) {
  table.set(OpKind::batch_norm, batch_norm_kernel, floating_dtypes_mask());
  table.set(OpKind::batch_norm_backward, batch_norm_backward_kernel, floating_dtypes_mask());
}

}  // namespace tandem::cpu
