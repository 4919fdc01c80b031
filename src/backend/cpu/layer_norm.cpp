// CPU layer normalisation over the last axis, forward and backward. x (..., C) is seen as
// (rows, C); every row's statistics and dx are computed in double (so f32, bf16 and f16 lose
// nothing to cancellation and the loops serve as the reference for other backends), and the
// parameter gradients are summed over a fixed number of row slices, so the result does not
// depend on the thread count.
#include <cmath>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "ops/kernel_geometry.h"
#include "ops/op_attrs.h"

namespace tandem::cpu {
namespace {

template <typename T>
double value_at(const T* data, std::int64_t index) {
  return static_cast<double>(static_cast<compute_type_t<T>>(data[index]));
}

// A (C,) or per-row tensor of any floating dtype, read as double.
std::vector<double> as_doubles(const Tensor& tensor) {
  return tensor.to_vector<double>();
}

template <typename T, typename S>
void layer_norm_loops(const KernelContext& c) {
  const LastAxisRows view = last_axis_rows(c.inputs[0]);
  const std::int64_t features = view.length;
  const T* x = static_cast<const T*>(c.inputs[0].raw_data());
  const std::vector<double> gamma = as_doubles(c.inputs[1]);
  const std::vector<double> beta = as_doubles(c.inputs[2]);
  const double epsilon = op_attrs<OpKind::layer_norm>(c.attrs).epsilon;
  T* y = static_cast<T*>(c.outputs[0].raw_data());
  S* mean_out = static_cast<S*>(c.outputs[1].raw_data());
  S* rstd_out = static_cast<S*>(c.outputs[2].raw_data());
  parallel_for(view.rows, features * 6, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t start = row * features;
      double total = 0;
      for (std::int64_t k = 0; k < features; ++k)
        total += value_at(x, start + k);
      const double mean = total / static_cast<double>(features);
      // Two passes: the variance of centred values does not cancel catastrophically.
      double squares = 0;
      for (std::int64_t k = 0; k < features; ++k) {
        const double centered = value_at(x, start + k) - mean;
        squares += centered * centered;
      }
      const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(features) + epsilon);
      for (std::int64_t k = 0; k < features; ++k) {
        const double normalized = (value_at(x, start + k) - mean) * rstd;
        y[start + k] = convert_element<T>(normalized * gamma[k] + beta[k]);
      }
      mean_out[row] = convert_element<S>(mean);
      rstd_out[row] = convert_element<S>(rstd);
    }
  });
}

// Per row, with xhat = (x - mean) rstd and g = dy gamma:
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),
// and over all rows d_gamma = sum dy xhat, d_beta = sum dy.
template <typename T, typename S>
void layer_norm_backward_loops(const KernelContext& c) {
  const LastAxisRows view = last_axis_rows(c.inputs[1]);
  const std::int64_t features = view.length;
  const T* dy = static_cast<const T*>(c.inputs[0].raw_data());
  const T* x = static_cast<const T*>(c.inputs[1].raw_data());
  const std::vector<double> gamma = as_doubles(c.inputs[2]);
  const S* mean = static_cast<const S*>(c.inputs[3].raw_data());
  const S* rstd = static_cast<const S*>(c.inputs[4].raw_data());
  T* dx = static_cast<T*>(c.outputs[0].raw_data());
  constexpr std::int64_t kSlices = 16;
  const auto width = static_cast<std::size_t>(features);
  std::vector<std::vector<double>> d_gamma(kSlices, std::vector<double>(width, 0.0));
  std::vector<std::vector<double>> d_beta(kSlices, std::vector<double>(width, 0.0));
  parallel_for(
      kSlices, view.rows * features / kSlices + 1, [&](std::int64_t begin, std::int64_t end) {
        std::vector<double> normalized(width);
        for (std::int64_t slice = begin; slice < end; ++slice) {
          double* slice_gamma = d_gamma[static_cast<std::size_t>(slice)].data();
          double* slice_beta = d_beta[static_cast<std::size_t>(slice)].data();
          const std::int64_t first = view.rows * slice / kSlices;
          const std::int64_t last = view.rows * (slice + 1) / kSlices;
          for (std::int64_t row = first; row < last; ++row) {
            const std::int64_t start = row * features;
            const double row_mean = static_cast<double>(static_cast<compute_type_t<S>>(mean[row]));
            const double row_rstd = static_cast<double>(static_cast<compute_type_t<S>>(rstd[row]));
            double g_total = 0;
            double g_xhat_total = 0;
            for (std::int64_t k = 0; k < features; ++k) {
              const double upstream = value_at(dy, start + k);
              normalized[k] = (value_at(x, start + k) - row_mean) * row_rstd;
              const double g = upstream * gamma[k];
              g_total += g;
              g_xhat_total += g * normalized[k];
              slice_gamma[k] += upstream * normalized[k];
              slice_beta[k] += upstream;
            }
            const double g_mean = g_total / static_cast<double>(features);
            const double g_xhat_mean = g_xhat_total / static_cast<double>(features);
            for (std::int64_t k = 0; k < features; ++k) {
              const double g = value_at(dy, start + k) * gamma[k];
              dx[start + k] =
                  convert_element<T>(row_rstd * (g - g_mean - normalized[k] * g_xhat_mean));
            }
          }
        }
      });
  for (int output = 1; output <= 2; ++output) {
    const std::vector<std::vector<double>>& partial = output == 1 ? d_gamma : d_beta;
    std::vector<double> total(width, 0.0);
    for (const std::vector<double>& sums : partial) {
      for (std::size_t k = 0; k < width; ++k)
        total[k] += sums[k];
    }
    visit_dtype(c.outputs[output].dtype(), [&](auto tag) {
      using P = decltype(tag);
      P* out = static_cast<P*>(c.outputs[output].raw_data());
      for (std::size_t k = 0; k < width; ++k)
        out[k] = convert_element<P>(total[k]);
    });
  }
}

template <typename T, typename Fn>
void visit_statistics(DType statistics_dtype, Fn&& fn) {
  visit_dtype(statistics_dtype, [&](auto s_tag) {
    if constexpr (std::is_floating_point_v<compute_type_t<decltype(s_tag)>>) fn(T{}, s_tag);
  });
}

// Calls fn(T{}, S{}) for x's dtype T and the statistics' dtype S (both floating). Two plain
// templates rather than nested generic lambdas: GCC 12 discards an `if constexpr` that depends
// on an enclosing generic lambda's parameter type.
template <typename Fn>
void visit_x_and_statistics(DType x_dtype, DType statistics_dtype, Fn&& fn) {
  visit_dtype(x_dtype, [&](auto x_tag) {
    using T = decltype(x_tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>)
      visit_statistics<T>(statistics_dtype, fn);
  });
}

void layer_norm_kernel(const KernelContext& c) {
  visit_x_and_statistics(c.inputs[0].dtype(), c.outputs[1].dtype(), [&](auto x_tag, auto s_tag) {
    layer_norm_loops<decltype(x_tag), decltype(s_tag)>(c);
  });
}

void layer_norm_backward_kernel(const KernelContext& c) {
  visit_x_and_statistics(c.inputs[1].dtype(), c.inputs[3].dtype(), [&](auto x_tag, auto s_tag) {
    layer_norm_backward_loops<decltype(x_tag), decltype(s_tag)>(c);
  });
}

}  // namespace

void register_layer_norm_kernels(KernelTable& table) {
  table.set(OpKind::layer_norm, layer_norm_kernel, floating_dtypes_mask());
  table.set(OpKind::layer_norm_backward, layer_norm_backward_kernel, floating_dtypes_mask());
}

}  // namespace tandem::cpu
