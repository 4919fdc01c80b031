// CUDA batch normalisation over every axis but the last. Training forward and backward run
// cuDNN's NHWC batch normalisation (the persistent kernels when cuDNN offers them without a
// reserve space, since the forward and backward ops do not share one); cuDNN keeps the inverse
// standard deviation where Tandem's op keeps the biased variance, so small kernels convert
// between them. Inference forward and backward are per-channel affine maps, done here.
#include "backend/cuda/device_math.cuh"
#include "ops/op_attrs.h"

namespace tandem::cuda {
namespace {

// x (..., C) as cuDNN's NHWC: (N, C, H, W) for an image batch, (rows, C, 1, 1) otherwise.
struct Descriptors {
  cudnnTensorDescriptor_t data = nullptr;
  cudnnTensorDescriptor_t channels = nullptr;
  Descriptors(const Tensor& x, cudnnBatchNormMode_t mode) {
    const CudnnLibrary& api = cudnn();
    check(api.cudnnCreateTensorDescriptor(&data), "cudnnCreateTensorDescriptor");
    check(api.cudnnCreateTensorDescriptor(&channels), "cudnnCreateTensorDescriptor");
    const std::int64_t c = x.dim(-1);
    std::int64_t n = x.numel() / c;
    std::int64_t h = 1;
    std::int64_t w = 1;
    if (x.rank() == 4) {
      n = x.dim(0);
      h = x.dim(1);
      w = x.dim(2);
    }
    const cudnnDataType_t type = x.dtype() == DType::f32    ? CUDNN_DATA_FLOAT
                                 : x.dtype() == DType::bf16 ? CUDNN_DATA_BFLOAT16
                                                            : CUDNN_DATA_HALF;
    check(api.cudnnSetTensor4dDescriptor(data, CUDNN_TENSOR_NHWC, type, static_cast<int>(n),
                                         static_cast<int>(c), static_cast<int>(h),
                                         static_cast<int>(w)),
          "cudnnSetTensor4dDescriptor");
    check(api.cudnnDeriveBNTensorDescriptor(channels, data, mode), "cudnnDeriveBNTensorDescriptor");
  }
  ~Descriptors() {
    cudnn().cudnnDestroyTensorDescriptor(data);
    cudnn().cudnnDestroyTensorDescriptor(channels);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

// to_inverse_std: out = 1 / sqrt(in + epsilon); else out = 1 / in^2 - epsilon.
__global__ void statistics_kernel(const float* in, float* out, std::int64_t count, float epsilon,
                                  bool to_inverse_std) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  out[i] = to_inverse_std ? rsqrtf(in[i] + epsilon) : 1.0f / (in[i] * in[i]) - epsilon;
}

template <typename T, typename P>
__global__ void inference_kernel(const T* x, const P* gamma, const P* beta, const P* mean,
                                 const P* variance, T* y, std::int64_t count, std::int64_t channels,
                                 float epsilon) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const std::int64_t c = i % channels;
  const float scale = load(gamma, c) * rsqrtf(load(variance, c) + epsilon);
  y[i] = convert_to<T>((load(x, i) - load(mean, c)) * scale + load(beta, c));
}

// dx = gamma rstd dy; xhat_dy = dy (x - mean) rstd for d_gamma's sum.
template <typename T, typename P>
__global__ void inference_backward_kernel(const T* dy, const T* x, const P* gamma, const P* mean,
                                          const P* variance, T* dx, float* xhat_dy,
                                          std::int64_t count, std::int64_t channels,
                                          float epsilon) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const std::int64_t c = i % channels;
  const float rstd = rsqrtf(load(variance, c) + epsilon);
  const float upstream = load(dy, i);
  dx[i] = convert_to<T>(load(gamma, c) * rstd * upstream);
  xhat_dy[i] = upstream * (load(x, i) - load(mean, c)) * rstd;
}

// The f32 tensor cuDNN needs for a per-channel input: the tensor itself or an f32 copy.
Tensor as_f32(DeviceContext& context, const Tensor& tensor) {
  if (tensor.dtype() == DType::f32) return tensor;
  Tensor copy = Tensor::empty(tensor.shape(), DType::f32, tensor.device());
  convert(context, tensor.raw_data(), tensor.dtype(), copy.raw_data(), DType::f32, tensor.numel());
  return copy;
}

// An f32 buffer for a per-channel output: the output itself or a scratch to convert from.
Tensor f32_target(const Tensor& output) {
  return output.dtype() == DType::f32 ? output
                                      : Tensor::empty(output.shape(), DType::f32, output.device());
}

void copy_back(DeviceContext& context, const Tensor& f32, const Tensor& output) {
  if (f32.raw_data() != output.raw_data()) {
    convert(context, f32.raw_data(), DType::f32, output.raw_data(), output.dtype(), output.numel());
  }
}

void statistics(DeviceContext& context, const Tensor& in, const Tensor& out, double epsilon,
                bool to_inverse_std) {
  const std::int64_t count = in.numel();
  statistics_kernel<<<blocks_for(count), 256, 0, context.stream>>>(
      static_cast<const float*>(in.raw_data()), static_cast<float*>(out.raw_data()), count,
      static_cast<float>(epsilon), to_inverse_std);
}

// Persistent NHWC kernels when cuDNN runs them without a reserve space, else the plain ones.
cudnnBatchNormMode_t training_mode(DeviceContext& context, const Descriptors& persistent) {
  std::size_t reserve = 0;
  const cudnnStatus_t status = cudnn().cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
      context.cudnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN, nullptr,
      persistent.data, &reserve);
  return status == CUDNN_STATUS_SUCCESS && reserve == 0 ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT
                                                        : CUDNN_BATCHNORM_SPATIAL;
}

void run_training_forward(const KernelContext& c, DeviceContext& context) {
  const auto attrs = op_attrs<OpKind::batch_norm>(c.attrs);
  const Tensor& x = c.inputs[0];
  const double epsilon = attrs.epsilon;
  const Descriptors probe(x, CUDNN_BATCHNORM_SPATIAL_PERSISTENT);
  const cudnnBatchNormMode_t mode = training_mode(context, probe);
  const Descriptors descriptors(x, mode);
  const CudnnLibrary& api = cudnn();
  std::size_t workspace_bytes = 0;
  check(api.cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
            context.cudnn, mode, CUDNN_BATCHNORM_OPS_BN, descriptors.data, nullptr,
            descriptors.data, descriptors.channels, nullptr, &workspace_bytes),
        "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize");
  const Tensor workspace =
      Tensor::empty({static_cast<std::int64_t>(workspace_bytes)}, DType::u8, x.device());
  const Tensor gamma = as_f32(context, c.inputs[1]);
  const Tensor beta = as_f32(context, c.inputs[2]);
  const Tensor mean = f32_target(c.outputs[1]);
  const Tensor inverse_std = Tensor::empty(mean.shape(), DType::f32, x.device());
  const float one = 1.0f;
  const float zero = 0.0f;
  check(api.cudnnBatchNormalizationForwardTrainingEx(
            context.cudnn, mode, CUDNN_BATCHNORM_OPS_BN, &one, &zero, descriptors.data,
            x.raw_data(), nullptr, nullptr, descriptors.data, c.outputs[0].raw_data(),
            descriptors.channels, gamma.raw_data(), beta.raw_data(), 0.0, nullptr, nullptr, epsilon,
            mean.raw_data(), inverse_std.raw_data(), nullptr,
            workspace_bytes ? workspace.raw_data() : nullptr, workspace_bytes, nullptr, 0),
        "cudnnBatchNormalizationForwardTrainingEx");
  const Tensor variance = f32_target(c.outputs[2]);
  statistics(context, inverse_std, variance, epsilon, false);
  copy_back(context, mean, c.outputs[1]);
  copy_back(context, variance, c.outputs[2]);
}

void run_training_backward(const KernelContext& c, DeviceContext& context) {
  const auto attrs = op_attrs<OpKind::batch_norm_backward>(c.attrs);
  const Tensor& dy = c.inputs[0];
  const Tensor& x = c.inputs[1];
  const double epsilon = attrs.epsilon;
  const Descriptors probe(x, CUDNN_BATCHNORM_SPATIAL_PERSISTENT);
  const cudnnBatchNormMode_t mode = training_mode(context, probe);
  const Descriptors descriptors(x, mode);
  const CudnnLibrary& api = cudnn();
  std::size_t workspace_bytes = 0;
  check(
      api.cudnnGetBatchNormalizationBackwardExWorkspaceSize(
          context.cudnn, mode, CUDNN_BATCHNORM_OPS_BN, descriptors.data, nullptr, descriptors.data,
          nullptr, descriptors.data, descriptors.channels, nullptr, &workspace_bytes),
      "cudnnGetBatchNormalizationBackwardExWorkspaceSize");
  const Tensor workspace =
      Tensor::empty({static_cast<std::int64_t>(workspace_bytes)}, DType::u8, x.device());
  const Tensor gamma = as_f32(context, c.inputs[2]);
  const Tensor mean = as_f32(context, c.inputs[3]);
  const Tensor variance = as_f32(context, c.inputs[4]);
  const Tensor inverse_std = Tensor::empty(variance.shape(), DType::f32, x.device());
  statistics(context, variance, inverse_std, epsilon, true);
  const Tensor d_gamma = f32_target(c.outputs[1]);
  const Tensor d_beta = f32_target(c.outputs[2]);
  const float one = 1.0f;
  const float zero = 0.0f;
  check(api.cudnnBatchNormalizationBackwardEx(
            context.cudnn, mode, CUDNN_BATCHNORM_OPS_BN, &one, &zero, &one, &zero, descriptors.data,
            x.raw_data(), nullptr, nullptr, descriptors.data, dy.raw_data(), nullptr, nullptr,
            descriptors.data, c.outputs[0].raw_data(), descriptors.channels, gamma.raw_data(),
            nullptr, d_gamma.raw_data(), d_beta.raw_data(), epsilon, mean.raw_data(),
            inverse_std.raw_data(), nullptr, workspace_bytes ? workspace.raw_data() : nullptr,
            workspace_bytes, nullptr, 0),
        "cudnnBatchNormalizationBackwardEx");
  copy_back(context, d_gamma, c.outputs[1]);
  copy_back(context, d_beta, c.outputs[2]);
}

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

void run_inference_forward(const KernelContext& c, DeviceContext& context) {
  const auto attrs = op_attrs<OpKind::batch_norm>(c.attrs);
  const Tensor& x = c.inputs[0];
  const std::int64_t count = x.numel();
  if (count == 0) return;
  const std::int64_t channels = x.dim(-1);
  visit_x_and_parameters(x.dtype(), c.inputs[1].dtype(), [&](auto x_tag, auto p_tag) {
    using T = decltype(x_tag);
    using P = decltype(p_tag);
    inference_kernel<T, P><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<const T*>(x.raw_data()), static_cast<const P*>(c.inputs[1].raw_data()),
        static_cast<const P*>(c.inputs[2].raw_data()),
        static_cast<const P*>(c.inputs[3].raw_data()),
        static_cast<const P*>(c.inputs[4].raw_data()), static_cast<T*>(c.outputs[0].raw_data()),
        count, channels, static_cast<float>(attrs.epsilon));
  });
}

void run_inference_backward(const KernelContext& c, DeviceContext& context) {
  const auto attrs = op_attrs<OpKind::batch_norm_backward>(c.attrs);
  const Tensor& dy = c.inputs[0];
  const Tensor& x = c.inputs[1];
  const std::int64_t count = x.numel();
  const std::int64_t channels = x.dim(-1);
  const std::int64_t rows = channels == 0 ? 0 : count / channels;
  const Tensor xhat_dy = Tensor::empty(x.shape(), DType::f32, x.device());
  if (count > 0) {
    visit_x_and_parameters(x.dtype(), c.inputs[2].dtype(), [&](auto x_tag, auto p_tag) {
      using T = decltype(x_tag);
      using P = decltype(p_tag);
      inference_backward_kernel<T, P><<<blocks_for(count), 256, 0, context.stream>>>(
          static_cast<const T*>(dy.raw_data()), static_cast<const T*>(x.raw_data()),
          static_cast<const P*>(c.inputs[2].raw_data()),
          static_cast<const P*>(c.inputs[3].raw_data()),
          static_cast<const P*>(c.inputs[4].raw_data()), static_cast<T*>(c.outputs[0].raw_data()),
          static_cast<float*>(xhat_dy.raw_data()), count, channels,
          static_cast<float>(attrs.epsilon));
    });
  }
  reduce_middle(context, xhat_dy.raw_data(), DType::f32, c.outputs[1].raw_data(),
                c.outputs[1].dtype(), 1, rows, channels, Reduction::sum, 1.0);
  reduce_middle(context, dy.raw_data(), dy.dtype(), c.outputs[2].raw_data(), c.outputs[2].dtype(),
                1, rows, channels, Reduction::sum, 1.0);
}

void run_batch_norm(const KernelContext& c) {
  DeviceContext& context = enter(c);
  if (c.inputs.size() == 3) {
    run_training_forward(c, context);
  } else {
    run_inference_forward(c, context);
  }
}

void run_batch_norm_backward(const KernelContext& c) {
  const auto attrs = op_attrs<OpKind::batch_norm_backward>(c.attrs);
  DeviceContext& context = enter(c);
  if (attrs.training) {
    run_training_backward(c, context);
  } else {
    run_inference_backward(c, context);
  }
}

}  // namespace

void register_norm_kernels(KernelTable& table) {
  table.set(OpKind::batch_norm, run_batch_norm, floating_mask());
  table.set(OpKind::batch_norm_backward, run_batch_norm_backward, floating_mask());
}

}  // namespace tandem::cuda
