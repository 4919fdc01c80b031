// CUDA layer normalisation over the last axis. Forward: one block per row, statistics in float
// (two passes, so the variance does not cancel). Backward: one block per 16 rows computes dx
// row by row and sums the rows' d_gamma and d_beta contributions in shared memory, then adds
// them to float totals with one atomic per feature and block.
#include "backend/cuda/device_math.cuh"
#include "ops/kernel_geometry.h"
#include "ops/op_attrs.h"

namespace tandem::cuda {
namespace {

constexpr int kRowsPerBlock = 16;
// Features whose block totals fit in shared memory (two float arrays in 48 KiB).
constexpr std::int64_t kSharedFeatures = 6144;

template <typename T, typename S>
__global__ void layer_norm_kernel(const T* x, const S* gamma, const S* beta, T* y, S* mean_out,
                                  S* rstd_out, std::int64_t features, float epsilon) {
  const std::int64_t start = blockIdx.x * features;
  float total = 0;
  for (std::int64_t k = threadIdx.x; k < features; k += blockDim.x)
    total += load(x, start + k);
  const float mean = block_reduce(total, SumOp<float>()) / static_cast<float>(features);
  float squares = 0;
  for (std::int64_t k = threadIdx.x; k < features; k += blockDim.x) {
    const float centered = load(x, start + k) - mean;
    squares += centered * centered;
  }
  const float variance = block_reduce(squares, SumOp<float>()) / static_cast<float>(features);
  const float rstd = rsqrtf(variance + epsilon);
  for (std::int64_t k = threadIdx.x; k < features; k += blockDim.x) {
    const float normalized = (load(x, start + k) - mean) * rstd;
    y[start + k] = convert_to<T>(normalized * load(gamma, k) + load(beta, k));
  }
  if (threadIdx.x == 0) {
    mean_out[blockIdx.x] = convert_to<S>(mean);
    rstd_out[blockIdx.x] = convert_to<S>(rstd);
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy gamma, per row; the rows' dy xhat and
// dy summed into d_gamma_total and d_beta_total (float, zeroed before).
template <typename T, typename S, bool kShared>
__global__ void layer_norm_backward_kernel(const T* dy, const T* x, const S* gamma, const S* mean,
                                           const S* rstd, T* dx, float* d_gamma_total,
                                           float* d_beta_total, std::int64_t rows,
                                           std::int64_t features) {
  extern __shared__ float block_totals[];  // (2, features) when kShared
  if constexpr (kShared) {
    for (std::int64_t k = threadIdx.x; k < 2 * features; k += blockDim.x)
      block_totals[k] = 0;
    __syncthreads();
  }
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(kRowsPerBlock);
  const std::int64_t last = first + kRowsPerBlock < rows ? first + kRowsPerBlock : rows;
  for (std::int64_t row = first; row < last; ++row) {
    const std::int64_t start = row * features;
    const float row_mean = load(mean, row);
    const float row_rstd = load(rstd, row);
    float g_total = 0;
    float g_xhat_total = 0;
    for (std::int64_t k = threadIdx.x; k < features; k += blockDim.x) {
      const float upstream = load(dy, start + k);
      const float normalized = (load(x, start + k) - row_mean) * row_rstd;
      const float g = upstream * load(gamma, k);
      g_total += g;
      g_xhat_total += g * normalized;
      if constexpr (kShared) {
        block_totals[k] += upstream * normalized;
        block_totals[features + k] += upstream;
      } else {
        atomicAdd(d_gamma_total + k, upstream * normalized);
        atomicAdd(d_beta_total + k, upstream);
      }
    }
    const float g_mean = block_reduce(g_total, SumOp<float>()) / static_cast<float>(features);
    const float g_xhat_mean =
        block_reduce(g_xhat_total, SumOp<float>()) / static_cast<float>(features);
    for (std::int64_t k = threadIdx.x; k < features; k += blockDim.x) {
      const float normalized = (load(x, start + k) - row_mean) * row_rstd;
      const float g = load(dy, start + k) * load(gamma, k);
      dx[start + k] = convert_to<T>(row_rstd * (g - g_mean - normalized * g_xhat_mean));
    }
  }
  if constexpr (kShared) {
    __syncthreads();
    for (std::int64_t k = threadIdx.x; k < features; k += blockDim.x) {
      atomicAdd(d_gamma_total + k, block_totals[k]);
      atomicAdd(d_beta_total + k, block_totals[features + k]);
    }
  }
}

// Calls fn(T{}, S{}) for x's dtype and the parameters' (f32, or x's own).
template <typename Fn>
void visit_x_and_parameters(DType x_dtype, DType parameter_dtype, Fn&& fn) {
  visit_floating(x_dtype, [&](auto x_tag) {
    using T = decltype(x_tag);
    if (parameter_dtype == DType::f32) {
      fn(x_tag, float{});
    } else {
      fn(x_tag, T{});
    }
  });
}

void run_layer_norm(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& x = c.inputs[0];
  const LastAxisRows view = last_axis_rows(x);
  const std::int64_t rows = view.rows;
  const std::int64_t features = view.length;
  if (rows == 0) return;
  const auto epsilon = static_cast<float>(op_attrs<OpKind::layer_norm>(c.attrs).epsilon);
  visit_x_and_parameters(x.dtype(), c.inputs[1].dtype(), [&](auto x_tag, auto s_tag) {
    using T = decltype(x_tag);
    using S = decltype(s_tag);
    layer_norm_kernel<T, S>
        <<<static_cast<unsigned>(rows), row_threads(features), 0, context.stream>>>(
            static_cast<const T*>(x.raw_data()), static_cast<const S*>(c.inputs[1].raw_data()),
            static_cast<const S*>(c.inputs[2].raw_data()), static_cast<T*>(c.outputs[0].raw_data()),
            static_cast<S*>(c.outputs[1].raw_data()), static_cast<S*>(c.outputs[2].raw_data()),
            features, epsilon);
  });
}

void run_layer_norm_backward(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& x = c.inputs[1];
  const LastAxisRows view = last_axis_rows(x);
  const std::int64_t rows = view.rows;
  const std::int64_t features = view.length;
  // d_gamma and d_beta totals, (2, features) float, zeroed.
  Tensor totals = Tensor::empty({2, features}, DType::f32, x.device());
  check(cudaMemsetAsync(totals.raw_data(), 0, totals.nbytes(), context.stream), "cudaMemsetAsync");
  float* d_gamma_total = static_cast<float*>(totals.raw_data());
  float* d_beta_total = d_gamma_total + features;
  if (rows > 0) {
    const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    const bool shared = features <= kSharedFeatures;
    const std::size_t shared_bytes =
        shared ? 2 * static_cast<std::size_t>(features) * sizeof(float) : 0;
    visit_x_and_parameters(x.dtype(), c.inputs[2].dtype(), [&](auto x_tag, auto s_tag) {
      using T = decltype(x_tag);
      using S = decltype(s_tag);
      auto launch = [&](auto shared_tag) {
        constexpr bool kShared = decltype(shared_tag)::value;
        layer_norm_backward_kernel<T, S, kShared>
            <<<blocks, row_threads(features), shared_bytes, context.stream>>>(
                static_cast<const T*>(c.inputs[0].raw_data()), static_cast<const T*>(x.raw_data()),
                static_cast<const S*>(c.inputs[2].raw_data()),
                static_cast<const S*>(c.inputs[3].raw_data()),
                static_cast<const S*>(c.inputs[4].raw_data()),
                static_cast<T*>(c.outputs[0].raw_data()), d_gamma_total, d_beta_total, rows,
                features);
      };
      if (shared) {
        launch(std::true_type{});
      } else {
        launch(std::false_type{});
      }
    });
  }
  convert(context, d_gamma_total, DType::f32, c.outputs[1].raw_data(), c.outputs[1].dtype(),
          features);
  convert(context, d_beta_total, DType::f32, c.outputs[2].raw_data(), c.outputs[2].dtype(),
          features);
}

}  // namespace

void register_layer_norm_kernels(KernelTable& table) {
  table.set(OpKind::layer_norm, run_layer_norm, floating_mask());
  // gamma's and beta's gradients are totalled with one atomic per feature and block.
  table.set(OpKind::layer_norm_backward, run_layer_norm_backward, floating_mask(),
            kSumsWithAtomics);
}

}  // namespace tandem::cuda
