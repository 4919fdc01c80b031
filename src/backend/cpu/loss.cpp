// CPU sparse softmax cross-entropy: one pass per row computes the log-sum-exp (shifted by the
// row's maximum, so large logits cannot overflow), the loss and softmax - one_hot.
#include <cmath>
#include <limits>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"

namespace tandem::cpu {
namespace {

// Throws InvalidArgument for the first label outside [0, classes), naming the example.
template <typename Label>
void check_labels(const Label* labels, std::int64_t count, std::int64_t classes) {
  for (std::int64_t i = 0; i < count; ++i) {
    const auto label = static_cast<std::int64_t>(labels[i]);
    if (label < 0 || label >= classes) {
      throw InvalidArgument("sparse_softmax_cross_entropy: label " + std::to_string(label) +
                            " of example " + std::to_string(i) + " is outside [0, " +
                            std::to_string(classes) + "), the " + std::to_string(classes) +
                            " classes of the logits; check the labels or the model's output size");
    }
  }
}

template <typename T, typename Label>
void cross_entropy_loops(const KernelContext& c) {
  using C = compute_type_t<T>;
  const Tensor& logits_tensor = c.inputs[0];  // (N, C)
  const std::int64_t rows = logits_tensor.dim(0);
  const std::int64_t classes = logits_tensor.dim(1);
  const T* logits = static_cast<const T*>(logits_tensor.raw_data());
  const Label* labels = static_cast<const Label*>(c.inputs[1].raw_data());
  T* loss = static_cast<T*>(c.outputs[0].raw_data());      // (N,)
  T* backprop = static_cast<T*>(c.outputs[1].raw_data());  // (N, C)
  check_labels(labels, rows, classes);
  parallel_for(rows, classes * 8, [&](std::int64_t begin, std::int64_t end) {
    std::vector<C> shifted_exp(static_cast<std::size_t>(classes));
    for (std::int64_t row = begin; row < end; ++row) {
      const T* logit_row = logits + row * classes;
      T* backprop_row = backprop + row * classes;
      C max = -std::numeric_limits<C>::infinity();
      for (std::int64_t k = 0; k < classes; ++k)
        max = std::max(max, static_cast<C>(logit_row[k]));
      C total = 0;
      for (std::int64_t k = 0; k < classes; ++k) {
        shifted_exp[k] = std::exp(static_cast<C>(logit_row[k]) - max);
        total += shifted_exp[k];
      }
      const C inverse_total = C(1) / total;
      for (std::int64_t k = 0; k < classes; ++k) {
        backprop_row[k] = convert_element<T>(shifted_exp[k] * inverse_total);
      }
      const auto label = static_cast<std::int64_t>(labels[row]);
      // loss = log(sum exp(logits)) - logits[label], with the maximum factored out; the gap
      // to the maximum is taken first so large logits do not cost the loss its precision.
      loss[row] = convert_element<T>(std::log(total) + (max - static_cast<C>(logit_row[label])));
      backprop_row[label] = convert_element<T>(shifted_exp[label] * inverse_total - C(1));
    }
  });
}

void cross_entropy_kernel(const KernelContext& c) {
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      if (c.inputs[1].dtype() == DType::i32) {
        cross_entropy_loops<T, std::int32_t>(c);
      } else {
        cross_entropy_loops<T, std::int64_t>(c);
      }
    }
  });
}

}  // namespace

void register_loss_kernels(KernelTable& table) {
  table.set(OpKind::sparse_softmax_cross_entropy, cross_entropy_kernel, floating_dtypes_mask());
}

}  // namespace tandem::cpu
