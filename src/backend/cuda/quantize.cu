// CUDA fake_quantize: the CPU kernel's steps, each in f32 with IEEE division and rint (ties to
// even), so both backends give the same bits. (floating_mask() has no f64: neither has the
// rest of the CUDA backend.)
#include "backend/cuda/device_math.cuh"
#include "ops/op_attrs.h"

namespace tandem::cuda {
namespace {

template <typename T>
__global__ void fake_quantize_kernel(const T* x, const float* scale, const float* zero_point, T* y,
                                     T* in_range, std::int64_t count, std::int64_t channels,
                                     float low, float high) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const std::int64_t channel = channels == 1 ? 0 : i % channels;
  const float q = rintf(__fdiv_rn(load(x, i), scale[channel])) + zero_point[channel];
  in_range[i] = convert_to<T>(q >= low && q <= high ? 1.0f : 0.0f);
  y[i] = convert_to<T>(__fmul_rn(fminf(fmaxf(q, low), high) - zero_point[channel], scale[channel]));
}

void run_fake_quantize(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const std::int64_t count = c.inputs[0].numel();
  if (count == 0) return;
  const auto [quant_min, quant_max] = op_attrs<OpKind::fake_quantize>(c.attrs);
  visit_floating(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    fake_quantize_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<const T*>(c.inputs[0].raw_data()),
        static_cast<const float*>(c.inputs[1].raw_data()),
        static_cast<const float*>(c.inputs[2].raw_data()), static_cast<T*>(c.outputs[0].raw_data()),
        static_cast<T*>(c.outputs[1].raw_data()), count, c.inputs[1].numel(),
        static_cast<float>(quant_min), static_cast<float>(quant_max));
  });
}

}  // namespace

void register_quantize_kernels(KernelTable& table) {
  table.set(OpKind::fake_quantize, run_fake_quantize, floating_mask());
}

}  // namespace tandem::cuda
