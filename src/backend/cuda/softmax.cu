// CUDA softmax and log-softmax along one axis, their backward kernels, and sparse softmax
// cross-entropy. A tensor is an (outer, length, inner) view with the axis in the middle: with
// the axis last (inner 1, the usual case) one block works on each row with block-wide
// reductions; otherwise one thread walks each (outer, inner) line. The maximum is subtracted
// before exp, as on the CPU.
#include "backend/cuda/device_math.cuh"
#include "ops/kernel_geometry.h"
#include "ops/op_attrs.h"

namespace tandem::cuda {
namespace {

template <typename T, bool kLog>
__global__ void softmax_rows_kernel(const T* x, T* y, std::int64_t length) {
  const T* row = x + blockIdx.x * length;
  T* out = y + blockIdx.x * length;
  float max = MaxOp<float>::identity();
  for (std::int64_t i = threadIdx.x; i < length; i += blockDim.x)
    max = fmaxf(max, load(row, i));
  max = block_reduce(max, MaxOp<float>());
  float total = 0;
  for (std::int64_t i = threadIdx.x; i < length; i += blockDim.x)
    total += expf(load(row, i) - max);
  total = block_reduce(total, SumOp<float>());
  if constexpr (kLog) {
    const float log_total = max + logf(total);
    for (std::int64_t i = threadIdx.x; i < length; i += blockDim.x) {
      out[i] = convert_to<T>(load(row, i) - log_total);
    }
  } else {
    const float inverse_total = 1.0f / total;
    for (std::int64_t i = threadIdx.x; i < length; i += blockDim.x) {
      out[i] = convert_to<T>(expf(load(row, i) - max) * inverse_total);
    }
  }
}

// softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - exp(y) sum(dy).
template <typename T, bool kLog>
__global__ void softmax_backward_rows_kernel(const T* dy, const T* y, T* dx, std::int64_t length) {
  const std::int64_t start = blockIdx.x * length;
  float total = 0;
  for (std::int64_t i = threadIdx.x; i < length; i += blockDim.x) {
    total += kLog ? load(dy, start + i) : load(dy, start + i) * load(y, start + i);
  }
  total = block_reduce(total, SumOp<float>());
  for (std::int64_t i = threadIdx.x; i < length; i += blockDim.x) {
    const float g = load(dy, start + i);
    const float out = load(y, start + i);
    dx[start + i] = convert_to<T>(kLog ? g - expf(out) * total : out * (g - total));
  }
}

template <typename T, bool kLog>
__global__ void softmax_lines_kernel(const T* x, T* y, AxisView view) {
  const std::int64_t line = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (line >= view.outer * view.inner) return;
  const std::int64_t start = (line / view.inner) * view.length * view.inner + line % view.inner;
  const std::int64_t stride = view.inner;
  float max = MaxOp<float>::identity();
  for (std::int64_t l = 0; l < view.length; ++l)
    max = fmaxf(max, load(x, start + l * stride));
  float total = 0;
  for (std::int64_t l = 0; l < view.length; ++l)
    total += expf(load(x, start + l * stride) - max);
  const float log_total = max + logf(total);
  for (std::int64_t l = 0; l < view.length; ++l) {
    const float value = load(x, start + l * stride);
    y[start + l * stride] = convert_to<T>(kLog ? value - log_total : expf(value - max) / total);
  }
}

template <typename T, bool kLog>
__global__ void softmax_backward_lines_kernel(const T* dy, const T* y, T* dx, AxisView view) {
  const std::int64_t line = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (line >= view.outer * view.inner) return;
  const std::int64_t start = (line / view.inner) * view.length * view.inner + line % view.inner;
  const std::int64_t stride = view.inner;
  float total = 0;
  for (std::int64_t l = 0; l < view.length; ++l) {
    const std::int64_t i = start + l * stride;
    total += kLog ? load(dy, i) : load(dy, i) * load(y, i);
  }
  for (std::int64_t l = 0; l < view.length; ++l) {
    const std::int64_t i = start + l * stride;
    const float g = load(dy, i);
    const float out = load(y, i);
    dx[i] = convert_to<T>(kLog ? g - expf(out) * total : out * (g - total));
  }
}

// One block per example: loss = log(sum exp(logits - max)) + (max - logits[label]) and
// backprop = softmax - one_hot. A label outside [0, classes) is recorded in `bad`.
template <typename T, typename Label>
__global__ void cross_entropy_kernel(const T* logits, const Label* labels, T* loss, T* backprop,
                                     std::int64_t classes, unsigned long long* bad) {
  const std::int64_t example = blockIdx.x;
  const T* row = logits + example * classes;
  T* backprop_row = backprop + example * classes;
  const auto label = static_cast<std::int64_t>(labels[example]);
  const bool valid = label >= 0 && label < classes;
  if (!valid) {
    if (threadIdx.x == 0) atomicMin(bad, static_cast<unsigned long long>(example));
    return;
  }
  float max = MaxOp<float>::identity();
  for (std::int64_t k = threadIdx.x; k < classes; k += blockDim.x)
    max = fmaxf(max, load(row, k));
  max = block_reduce(max, MaxOp<float>());
  float total = 0;
  for (std::int64_t k = threadIdx.x; k < classes; k += blockDim.x)
    total += expf(load(row, k) - max);
  total = block_reduce(total, SumOp<float>());
  const float inverse_total = 1.0f / total;
  for (std::int64_t k = threadIdx.x; k < classes; k += blockDim.x) {
    const float probability = expf(load(row, k) - max) * inverse_total;
    backprop_row[k] = convert_to<T>(k == label ? probability - 1.0f : probability);
  }
  if (threadIdx.x == 0) loss[example] = convert_to<T>(logf(total) + (max - load(row, label)));
}

template <bool kBackward>
void run_softmax(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& out = c.outputs[0];
  if (out.numel() == 0) return;
  const AxisView view = axis_view(out, read_attrs<AxisAttrs>(c.attrs).axis);
  const bool log_output = c.kind == OpKind::log_softmax || c.kind == OpKind::log_softmax_backward;
  visit_floating(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto launch = [&](auto log_tag) {
      constexpr bool kLog = decltype(log_tag)::value;
      const T* first = static_cast<const T*>(c.inputs[0].raw_data());
      T* result = static_cast<T*>(out.raw_data());
      if (view.inner == 1) {
        const unsigned threads = row_threads(view.length);
        const auto rows = static_cast<unsigned>(view.outer);
        if constexpr (kBackward) {
          softmax_backward_rows_kernel<T, kLog><<<rows, threads, 0, context.stream>>>(
              first, static_cast<const T*>(c.inputs[1].raw_data()), result, view.length);
        } else {
          softmax_rows_kernel<T, kLog>
              <<<rows, threads, 0, context.stream>>>(first, result, view.length);
        }
      } else {
        const unsigned blocks = blocks_for(view.outer * view.inner);
        if constexpr (kBackward) {
          softmax_backward_lines_kernel<T, kLog><<<blocks, 256, 0, context.stream>>>(
              first, static_cast<const T*>(c.inputs[1].raw_data()), result, view);
        } else {
          softmax_lines_kernel<T, kLog><<<blocks, 256, 0, context.stream>>>(first, result, view);
        }
      }
    };
    if (log_output) {
      launch(std::true_type{});
    } else {
      launch(std::false_type{});
    }
  });
}

void run_cross_entropy(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& logits = c.inputs[0];  // (N, C)
  const Tensor& labels = c.inputs[1];  // (N,)
  const std::int64_t rows = logits.dim(0);
  const std::int64_t classes = logits.dim(1);
  if (rows == 0) return;
  BadValueCheck bad(context);
  visit_floating(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto launch = [&](auto label_tag) {
      using Label = decltype(label_tag);
      cross_entropy_kernel<T, Label>
          <<<static_cast<unsigned>(rows), row_threads(classes), 0, context.stream>>>(
              static_cast<const T*>(logits.raw_data()),
              static_cast<const Label*>(labels.raw_data()),
              static_cast<T*>(c.outputs[0].raw_data()), static_cast<T*>(c.outputs[1].raw_data()),
              classes, bad.slot());
    };
    if (labels.dtype() == DType::i32) {
      launch(std::int32_t{});
    } else {
      launch(std::int64_t{});
    }
  });
  check(cudaGetLastError(), "sparse_softmax_cross_entropy");
  const auto recorded_message = [classes](std::int64_t example) {
    return "sparse_softmax_cross_entropy: the label of example " + std::to_string(example) +
           " is outside [0, " + std::to_string(classes) + "), the " + std::to_string(classes) +
           " classes of the logits (found after the step ran as a CUDA graph; --jit off stops "
           "at the op with the label); check the labels or the model's output size";
  };
  if (const std::int64_t example = bad.first(recorded_message); example >= 0) {
    std::int64_t label = 0;
    check(cudaMemcpy(
              &label,
              static_cast<const char*>(labels.raw_data()) + example * dtype_size(labels.dtype()),
              dtype_size(labels.dtype()), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
    if (labels.dtype() == DType::i32) label = static_cast<std::int32_t>(label);
    throw InvalidArgument("sparse_softmax_cross_entropy: label " + std::to_string(label) +
                          " of example " + std::to_string(example) + " is outside [0, " +
                          std::to_string(classes) + "), the " + std::to_string(classes) +
                          " classes of the logits; check the labels or the model's output size");
  }
}

}  // namespace

void register_softmax_kernels(KernelTable& table) {
  using K = OpKind;
  const std::uint32_t floating = floating_mask();
  table.set(K::softmax, run_softmax<false>, floating);
  table.set(K::log_softmax, run_softmax<false>, floating);
  table.set(K::softmax_backward, run_softmax<true>, floating);
  table.set(K::log_softmax_backward, run_softmax<true>, floating);
  table.set(K::sparse_softmax_cross_entropy, run_cross_entropy, floating);
}

}  // namespace tandem::cuda
