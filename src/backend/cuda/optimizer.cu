// CUDA optimizer updates, in place (the outputs alias the parameter and slot inputs): one
// memory-bound pass per variable in float, with the CPU kernels' formulas (src/ops/optimizer.cpp).
#include <cmath>

#include "backend/cuda/device_math.cuh"
#include "ops/op_attrs.h"

namespace tandem::cuda {
namespace {

// The schedule {learning_rate, step[, apply]} is read from device memory by every thread, so a
// captured CUDA graph takes each run's values; a gated schedule (3 values) whose apply is 0
// leaves everything as it is (loss scaling skipping an overflowing step on the device).
__device__ bool skipped(const double* schedule, bool gated) {
  return gated && schedule[2] == 0.0;
}

struct SgdStep {
  float momentum;
  float weight_decay;
  bool nesterov;
};

template <typename T>
__global__ void sgd_kernel(T* param, const T* grad, T* velocity, std::int64_t count,
                           const double* schedule, bool gated, SgdStep step) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count || skipped(schedule, gated)) return;
  const auto learning_rate = static_cast<float>(schedule[0]);
  const float p = load(param, i);
  const float g = load(grad, i) + step.weight_decay * p;
  if (velocity == nullptr) {
    param[i] = convert_to<T>(p - learning_rate * g);
    return;
  }
  const float v = step.momentum * load(velocity, i) - learning_rate * g;
  velocity[i] = convert_to<T>(v);
  param[i] = convert_to<T>(step.nesterov ? p + step.momentum * v - learning_rate * g : p + v);
}

struct AdamStep {
  double beta1;
  double beta2;
  double weight_decay;
  float epsilon;
};

template <typename T>
__global__ void adam_kernel(T* param, const T* grad, T* m, T* v, std::int64_t count,
                            const double* schedule, bool gated, AdamStep step) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count || skipped(schedule, gated)) return;
  const double learning_rate = schedule[0];
  const double t = schedule[1];
  // The bias correction folded into the step size, as Keras does (and the CPU kernel).
  const auto corrected_rate = static_cast<float>(
      learning_rate * ::sqrt(1.0 - ::pow(step.beta2, t)) / (1.0 - ::pow(step.beta1, t)));
  const auto decay = static_cast<float>(1.0 - learning_rate * step.weight_decay);
  const auto m_rate = static_cast<float>(1.0 - step.beta1);
  const auto v_rate = static_cast<float>(1.0 - step.beta2);
  const float g = load(grad, i);
  const float m_old = load(m, i);
  const float v_old = load(v, i);
  const float m_new = m_old + m_rate * (g - m_old);
  const float v_new = v_old + v_rate * (g * g - v_old);
  m[i] = convert_to<T>(m_new);
  v[i] = convert_to<T>(v_new);
  param[i] = convert_to<T>(load(param, i) * decay -
                           corrected_rate * m_new / (sqrtf(v_new) + step.epsilon));
}

void run_sgd(const KernelContext& c) {
  const auto options = op_attrs<OpKind::sgd_update>(c.attrs);
  TANDEM_ASSERT(options.lanes == 1, "a multi-tensor sgd_update reached the CUDA backend");
  DeviceContext& context = enter(c);
  const std::int64_t count = c.inputs[0].numel();
  if (count == 0) return;
  const SgdStep step{static_cast<float>(options.momentum), static_cast<float>(options.weight_decay),
                     options.nesterov};
  const auto* schedule = static_cast<const double*>(c.inputs[2].raw_data());
  const bool gated = c.inputs[2].numel() == 3;
  visit_floating(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* velocity = c.outputs.size() == 2 ? static_cast<T*>(c.outputs[1].raw_data()) : nullptr;
    sgd_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<T*>(c.outputs[0].raw_data()), static_cast<const T*>(c.inputs[1].raw_data()),
        velocity, count, schedule, gated, step);
  });
}

void run_adam(const KernelContext& c) {
  const auto options = op_attrs<OpKind::adam_update>(c.attrs);
  TANDEM_ASSERT(options.lanes == 1, "a multi-tensor adam_update reached the CUDA backend");
  DeviceContext& context = enter(c);
  const std::int64_t count = c.inputs[0].numel();
  if (count == 0) return;
  const AdamStep step{options.beta1, options.beta2, options.weight_decay,
                      static_cast<float>(options.epsilon)};
  const auto* schedule = static_cast<const double*>(c.inputs[2].raw_data());
  const bool gated = c.inputs[2].numel() == 3;
  visit_floating(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    adam_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<T*>(c.outputs[0].raw_data()), static_cast<const T*>(c.inputs[1].raw_data()),
        static_cast<T*>(c.outputs[1].raw_data()), static_cast<T*>(c.outputs[2].raw_data()), count,
        schedule, gated, step);
  });
}

void run_assign(const KernelContext& c) {
  DeviceContext& context = enter(c);
  check(cudaMemcpyAsync(c.outputs[0].raw_data(), c.inputs[1].raw_data(), c.inputs[1].nbytes(),
                        cudaMemcpyDeviceToDevice, context.stream),
        "cudaMemcpyAsync");
}

}  // namespace

void register_optimizer_kernels(KernelTable& table) {
  table.set(OpKind::sgd_update, run_sgd, floating_mask());
  table.set(OpKind::adam_update, run_adam, floating_mask());
  table.set(OpKind::assign, run_assign, every_dtype_mask());
}

}  // namespace tandem::cuda
