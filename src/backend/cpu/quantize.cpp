// CPU fake_quantize: one pass, each element divided by its scale (not multiplied by a
// reciprocal, which rounds differently), rounded ties-to-even, shifted, clamped and scaled back,
// every step in the compute type (f32; f64 for f64) as the StableHLO lowering does.
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "ops/op_attrs.h"

namespace tandem::cpu {
namespace {

template <typename T>
void fake_quantize_loops(const KernelContext& c) {
  using C = compute_type_t<T>;
  const auto [quant_min, quant_max] = op_attrs<OpKind::fake_quantize>(c.attrs);
  const auto low = static_cast<C>(quant_min);
  const auto high = static_cast<C>(quant_max);
  const T* x = static_cast<const T*>(c.inputs[0].raw_data());
  const float* scale = c.inputs[1].data<float>();
  const float* zero_point = c.inputs[2].data<float>();
  // Per tensor: one scale; per channel: one per element of the last axis.
  const std::int64_t channels = c.inputs[1].numel();
  T* y = static_cast<T*>(c.outputs[0].raw_data());
  T* in_range = static_cast<T*>(c.outputs[1].raw_data());
  parallel_for(c.inputs[0].numel(), 64, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t channel = channels == 1 ? 0 : i % channels;
      const auto step = static_cast<C>(scale[channel]);
      const auto zero = static_cast<C>(zero_point[channel]);
      const C q = std::nearbyint(static_cast<C>(x[i]) / step) + zero;
      in_range[i] = convert_element<T>(q >= low && q <= high ? C(1) : C(0));
      y[i] = convert_element<T>((std::fmin(std::fmax(q, low), high) - zero) * step);
    }
  });
}

void fake_quantize_kernel(const KernelContext& c) {
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) fake_quantize_loops<T>(c);
  });
}

}  // namespace

void register_quantize_kernels(KernelTable& table) {
  table.set(OpKind::fake_quantize, fake_quantize_kernel, floating_dtypes_mask());
}

}  // namespace tandem::cpu
