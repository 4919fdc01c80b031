// CUDA optimizer updates, in place (the outputs alias the parameter and slot inputs): one
// memory-bound pass per variable in float, with the CPU kernels' formulas (src/ops/optimizer.cpp).
#include <cmath>

#include "backend/cuda/device_math.cuh"
#include "ops/op_attrs.h"

namespace tandem::cuda {
namespace {

struct SgdStep {
  float learning_rate;
  float momentum;
  float weight_decay;
  bool nesterov;
};

template <typename T>
__global__ void sgd_kernel(T* param, const T* grad, T* velocity, std::int64_t count, SgdStep step) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const float p = load(param, i);
  const float g = load(grad, i) + step.weight_decay * p;
  if (velocity == nullptr) {
    param[i] = convert_to<T>(p - step.learning_rate * g);
    return;
  }
  const float v = step.momentum * load(velocity, i) - step.learning_rate * g;
  velocity[i] = convert_to<T>(v);
  param[i] = convert_to<T>(step.nesterov ? p + step.momentum * v - step.learning_rate * g : p + v);
}

struct AdamStep {
  float corrected_rate;  // lr sqrt(1 - beta2^t) / (1 - beta1^t)
  float decay;           // 1 - lr weight_decay
  float m_rate;          // 1 - beta1
  float v_rate;          // 1 - beta2
  float epsilon;
};

template <typename T>
__global__ void adam_kernel(T* param, const T* grad, T* m, T* v, std::int64_t count,
                            AdamStep step) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const float g = load(grad, i);
  const float m_old = load(m, i);
  const float v_old = load(v, i);
  const float m_new = m_old + step.m_rate * (g - m_old);
  const float v_new = v_old + step.v_rate * (g * g - v_old);
  m[i] = convert_to<T>(m_new);
  v[i] = convert_to<T>(v_new);
  param[i] = convert_to<T>(load(param, i) * step.decay -
                           step.corrected_rate * m_new / (sqrtf(v_new) + step.epsilon));
}

void run_sgd(const KernelContext& c) {
  const auto options = op_attrs<OpKind::sgd_update>(c.attrs);
  DeviceContext& context = enter(c);
  const std::int64_t count = c.inputs[0].numel();
  if (count == 0) return;
  const SgdStep step{static_cast<float>(options.learning_rate),
                     static_cast<float>(options.momentum), static_cast<float>(options.weight_decay),
                     options.nesterov};
  visit_floating(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* velocity = c.outputs.size() == 2 ? static_cast<T*>(c.outputs[1].raw_data()) : nullptr;
    sgd_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<T*>(c.outputs[0].raw_data()), static_cast<const T*>(c.inputs[1].raw_data()),
        velocity, count, step);
  });
}

void run_adam(const KernelContext& c) {
  const auto options = op_attrs<OpKind::adam_update>(c.attrs);
  DeviceContext& context = enter(c);
  const std::int64_t count = c.inputs[0].numel();
  if (count == 0) return;
  const double learning_rate = options.learning_rate;
  const double beta1 = options.beta1;
  const double beta2 = options.beta2;
  const auto t = static_cast<double>(options.step);
  // The bias correction folded into the step size, as Keras does.
  const AdamStep step{static_cast<float>(learning_rate * std::sqrt(1.0 - std::pow(beta2, t)) /
                                         (1.0 - std::pow(beta1, t))),
                      static_cast<float>(1.0 - learning_rate * options.weight_decay),
                      static_cast<float>(1.0 - beta1), static_cast<float>(1.0 - beta2),
                      static_cast<float>(options.epsilon)};
  visit_floating(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    adam_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<T*>(c.outputs[0].raw_data()), static_cast<const T*>(c.inputs[1].raw_data()),
        static_cast<T*>(c.outputs[1].raw_data()), static_cast<T*>(c.outputs[2].raw_data()), count,
        step);
  });
}

}  // namespace

void register_optimizer_kernels(KernelTable& table) {
  table.set(OpKind::sgd_update, run_sgd, floating_mask());
  table.set(OpKind::adam_update, run_adam, floating_mask());
}

}  // namespace tandem::cuda
