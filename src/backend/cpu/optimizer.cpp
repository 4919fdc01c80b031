// CPU optimizer updates: one pass over the parameter and its slots, in place (the outputs alias
// the inputs). These loops are memory-bound, so they are written to vectorise and run on all
// threads for large parameters. The formulas are documented in src/ops/optimizer.cpp.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "ops/op_attrs.h"

namespace tandem::cpu {
namespace {

// The loops take restrict-qualified pointer parameters and their constants by value, so the
// compiler keeps the constants in registers and vectorises without aliasing checks.

template <typename C>
struct SgdStep {
  C learning_rate;
  C momentum;
  C weight_decay;
  bool nesterov;
};

template <typename T, typename C>
TANDEM_VECTOR_CLONES void sgd_range(T* __restrict param, const T* __restrict grad,
                                    T* __restrict velocity, std::int64_t begin, std::int64_t end,
                                    SgdStep<C> step) {
  if (velocity == nullptr) {
    for (std::int64_t i = begin; i < end; ++i) {
      const C p = static_cast<C>(param[i]);
      const C g = static_cast<C>(grad[i]) + step.weight_decay * p;
      param[i] = convert_element<T>(p - step.learning_rate * g);
    }
  } else if (step.nesterov) {
    for (std::int64_t i = begin; i < end; ++i) {
      const C p = static_cast<C>(param[i]);
      const C g = static_cast<C>(grad[i]) + step.weight_decay * p;
      const C v = step.momentum * static_cast<C>(velocity[i]) - step.learning_rate * g;
      velocity[i] = convert_element<T>(v);
      param[i] = convert_element<T>(p + step.momentum * v - step.learning_rate * g);
    }
  } else {
    for (std::int64_t i = begin; i < end; ++i) {
      const C p = static_cast<C>(param[i]);
      const C g = static_cast<C>(grad[i]) + step.weight_decay * p;
      const C v = step.momentum * static_cast<C>(velocity[i]) - step.learning_rate * g;
      velocity[i] = convert_element<T>(v);
      param[i] = convert_element<T>(p + v);
    }
  }
}

// A multi-tensor update (attrs lanes > 1) has each lane's inputs and outputs one after another;
// all lanes share the options and the schedule.
// A gated schedule {learning_rate, step, apply} whose apply is 0: the update leaves everything as
// it is (loss scaling skips a step whose gradients overflowed, deciding on the device).
bool update_skipped(const Tensor& schedule) {
  return schedule.numel() == 3 && schedule.data<double>()[2] == 0.0;
}

template <typename T>
void sgd_loops(const KernelContext& c) {
  const auto options = op_attrs<OpKind::sgd_update>(c.attrs);
  using C = compute_type_t<T>;
  const auto lanes = static_cast<std::size_t>(options.lanes);
  const std::size_t inputs = c.inputs.size() / lanes;
  const std::size_t outputs = c.outputs.size() / lanes;
  const double learning_rate = c.inputs[2].data<double>()[0];  // the schedule {lr, step}
  const SgdStep<C> step{static_cast<C>(learning_rate), static_cast<C>(options.momentum),
                        static_cast<C>(options.weight_decay), options.nesterov};
  std::vector<std::int64_t> counts;
  for (std::size_t lane = 0; lane < lanes; ++lane)
    counts.push_back(c.inputs[lane * inputs].numel());
  parallel_for_lanes(counts, 4, [&](std::size_t lane, std::int64_t begin, std::int64_t end) {
    T* param = static_cast<T*>(c.outputs[lane * outputs].raw_data());  // aliases input 0
    const T* grad = static_cast<const T*>(c.inputs[lane * inputs + 1].raw_data());
    T* velocity =
        outputs == 2 ? static_cast<T*>(c.outputs[lane * outputs + 1].raw_data()) : nullptr;
    sgd_range(param, grad, velocity, begin, end, step);
  });
}

template <typename C>
struct AdamStep {
  C corrected_rate;  // lr sqrt(1 - beta2^t) / (1 - beta1^t)
  C decay;           // 1 - lr weight_decay
  C m_rate;          // 1 - beta1
  C v_rate;          // 1 - beta2
  C epsilon;
};

template <typename T, typename C>
TANDEM_VECTOR_CLONES void adam_range(T* __restrict param, const T* __restrict grad, T* __restrict m,
                                     T* __restrict v, std::int64_t begin, std::int64_t end,
                                     AdamStep<C> step) {
  for (std::int64_t i = begin; i < end; ++i) {
    const C g = static_cast<C>(grad[i]);
    const C m_old = static_cast<C>(m[i]);
    const C v_old = static_cast<C>(v[i]);
    const C m_new = m_old + step.m_rate * (g - m_old);
    const C v_new = v_old + step.v_rate * (g * g - v_old);
    m[i] = convert_element<T>(m_new);
    v[i] = convert_element<T>(v_new);
    param[i] = convert_element<T>(static_cast<C>(param[i]) * step.decay -
                                  step.corrected_rate * m_new / (std::sqrt(v_new) + step.epsilon));
  }
}

template <typename T>
void adam_loops(const KernelContext& c) {
  const auto options = op_attrs<OpKind::adam_update>(c.attrs);
  using C = compute_type_t<T>;
  const double* schedule = c.inputs[2].data<double>();  // {learning_rate, step}
  const double learning_rate = schedule[0];
  const double beta1 = options.beta1;
  const double beta2 = options.beta2;
  const double t = schedule[1];
  // The bias correction folded into the step size, as Keras does.
  const AdamStep<C> step{static_cast<C>(learning_rate * std::sqrt(1.0 - std::pow(beta2, t)) /
                                        (1.0 - std::pow(beta1, t))),
                         static_cast<C>(1.0 - learning_rate * options.weight_decay),
                         static_cast<C>(1.0 - beta1), static_cast<C>(1.0 - beta2),
                         static_cast<C>(options.epsilon)};
  const auto lanes = static_cast<std::size_t>(options.lanes);
  std::vector<std::int64_t> counts;
  for (std::size_t lane = 0; lane < lanes; ++lane)
    counts.push_back(c.inputs[lane * 5].numel());
  parallel_for_lanes(counts, 8, [&](std::size_t lane, std::int64_t begin, std::int64_t end) {
    // Inputs (param, grad, schedule, m, v), outputs (param, m, v) aliasing inputs 0, 3 and 4.
    T* param = static_cast<T*>(c.outputs[lane * 3].raw_data());
    const T* grad = static_cast<const T*>(c.inputs[lane * 5 + 1].raw_data());
    T* m = static_cast<T*>(c.outputs[lane * 3 + 1].raw_data());
    T* v = static_cast<T*>(c.outputs[lane * 3 + 2].raw_data());
    adam_range(param, grad, m, v, begin, end, step);
  });
}

void sgd_kernel(const KernelContext& c) {
  if (update_skipped(c.inputs[2])) return;
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) sgd_loops<T>(c);
  });
}

void adam_kernel(const KernelContext& c) {
  if (update_skipped(c.inputs[2])) return;
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) adam_loops<T>(c);
  });
}

void assign_kernel(const KernelContext& c) {
  std::memcpy(c.outputs[0].raw_data(), c.inputs[1].raw_data(), c.inputs[1].nbytes());
}

}  // namespace

void register_optimizer_kernels(KernelTable& table) {
  table.set(OpKind::sgd_update, sgd_kernel, floating_dtypes_mask());
  table.set(OpKind::adam_update, adam_kernel, floating_dtypes_mask());
  table.set(OpKind::assign, assign_kernel, all_dtypes_mask());
}

}  // namespace tandem::cpu
