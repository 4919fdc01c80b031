// CUDA dropout: element i keeps its value (scaled by 1 / (1 - rate)) exactly when the CPU
// kernel keeps it: word offset + i of the Philox stream (seed), compared as an integer against
// ceil(rate 2^24). The masks of both backends are identical, bit for bit.
#include <cmath>

#include "backend/cuda/device_math.cuh"
#include "ops/op_attrs.h"
#include "tandem/random.h"

namespace tandem::cuda {
namespace {

template <typename T>
__global__ void dropout_kernel(const T* x, T* y, T* mask, std::int64_t count,
                               const std::int64_t* philox, std::uint32_t threshold, float kept) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  // {seed, offset} read from device memory, so a captured CUDA graph draws new masks each run.
  const auto seed = static_cast<std::uint64_t>(philox[0]);
  const auto offset = static_cast<std::uint64_t>(philox[1]);
  const std::uint32_t word = philox_word(seed, offset, static_cast<std::uint64_t>(i));
  const T m = (word >> 8) >= threshold ? convert_to<T>(kept) : convert_to<T>(0.0f);
  mask[i] = m;
  y[i] = convert_to<T>(load(x, i) * convert_to<float>(m));
}

void run_dropout(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const std::int64_t count = c.inputs[0].numel();
  if (count == 0) return;
  const double rate = op_attrs<OpKind::dropout>(c.attrs).rate;
  const auto threshold = static_cast<std::uint32_t>(std::ceil(rate * 16777216.0));
  const auto kept = static_cast<float>(1.0 / (1.0 - rate));
  visit_floating(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<const T*>(c.inputs[0].raw_data()), static_cast<T*>(c.outputs[0].raw_data()),
        static_cast<T*>(c.outputs[1].raw_data()), count,
        static_cast<const std::int64_t*>(c.inputs[1].raw_data()), threshold, kept);
  });
}

}  // namespace

void register_dropout_kernels(KernelTable& table) {
  table.set(OpKind::dropout, run_dropout, floating_mask());
}

}  // namespace tandem::cuda
