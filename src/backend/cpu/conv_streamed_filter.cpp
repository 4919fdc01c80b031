// Inference convolutions with at most 16 output positions, on AVX-512. At batch 1 the last
// stage of ResNet-50 at 112x112 (4x4 positions, 512-2048 channels) multiplies 16 windows by
// 4-9.4 MB filters: each filter value is used 16 times, so the convolution waits on memory for
// the filter (62 MB a pass, more than this machine's last-level cache keeps between passes).
// oneDNN 2.6's kernels read it at 12.5-15.8 GB/s on two cores of an AVX-512 Xeon whose memory
// gives 17.4 (7.4-7.8 GB/s on one core of 9-10). These loops read the filter once, as panels of 16
// output channels laid out in the order they are read, with a software prefetch 4 KB ahead, and
// keep the up to 16 rows of sums of a panel in vector registers: 17-20 GB/s on two cores (the 3x3
// 512-channel convolution 0.55 against 0.62-0.68 ms, the 1x1 512-to-2048 one 0.21 against
// 0.27-0.34; bench/RESULTS.md, 2026-12-05 (stop 37)). From 49 positions on (7x7) oneDNN's
// kernels were as fast or faster, so they keep those.
#include "backend/cpu/conv_streamed_filter.h"

#if defined(__x86_64__)
#include <array>
#include <cstring>
#include <utility>

#include "backend/cpu/avx512.h"
#include "backend/cpu/loops.h"
#include "core/huge_pages.h"

namespace tandem::cpu {
namespace {

constexpr std::int64_t kMaxPositions = 16;
constexpr std::int64_t kPanelWidth = kAvx512Lanes;  // output channels a panel holds
// How far ahead of the loads the filter is prefetched, in floats (4 KB): without it the loops
// read at 11-12 GB/s on two cores, with 1 KB ahead 16-17.
constexpr std::int64_t kPrefetchDistance = 1024;

using PanelFunction = void (*)(const float* windows, std::int64_t k, const float* panel,
                               const float* bias, const float* residual, bool relu, float* y,
                               std::int64_t y_stride);

// One panel of `Rows` positions: y[m, 0:16] = windows[m, :] . panel[:, 0:16] (+ bias, residual;
// relu), the 16 sums of a row in one vector register, summed over k in order.
template <int Rows>
[[gnu::target("avx512f")]] void panel_product(const float* windows, std::int64_t k,
                                              const float* panel, const float* bias,
                                              const float* residual, bool relu, float* y,
                                              std::int64_t y_stride) {
  __m512 sums[Rows];
  for (int row = 0; row < Rows; ++row)
    sums[row] = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < k; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(panel + (i * kPanelWidth + kPrefetchDistance)),
                 _MM_HINT_T0);
    const __m512 filter_row = _mm512_loadu_ps(panel + i * kPanelWidth);  // (16,)
    for (int row = 0; row < Rows; ++row) {
      sums[row] = _mm512_fmadd_ps(_mm512_set1_ps(windows[row * k + i]), filter_row, sums[row]);
    }
  }
  const __m512 zero = _mm512_setzero_ps();
  const __m512 bias_row = bias != nullptr ? _mm512_loadu_ps(bias) : zero;
  for (int row = 0; row < Rows; ++row) {
    __m512 out = _mm512_add_ps(sums[row], bias_row);
    if (residual != nullptr) out = _mm512_add_ps(out, _mm512_loadu_ps(residual + row * y_stride));
    if (relu) out = relu_lanes(out);
    _mm512_storeu_ps(y + row * y_stride, out);
  }
}

// panel_product for 1..kMaxPositions rows, by rows - 1.
constexpr auto kPanelFunctions = instances_by_count<kMaxPositions>(
    []<int Rows>() -> PanelFunction { return &panel_product<Rows>; });

}  // namespace

bool streamed_filter_fits(const Window2D& g, DType dtype) {
  const std::int64_t rows = g.positions();
  return dtype == DType::f32 && cpu_has_avx512() && rows > 0 && rows <= kMaxPositions &&
         g.out_c > 0 && g.out_c % kPanelWidth == 0;
}

Tensor filter_panels(const Window2D& g, const Tensor& filter) {
  const std::int64_t depth = g.window_entries();
  const std::int64_t panels = g.out_c / kPanelWidth;
  Tensor result = empty_on_huge_pages({panels, depth, kPanelWidth}, DType::f32);
  const auto* from = static_cast<const float*>(filter.raw_data());  // (K, C_out)
  auto* to = static_cast<float*>(result.raw_data());                // (C_out / 16, K, 16)
  parallel_for(panels, depth * kPanelWidth, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t panel = begin; panel < end; ++panel) {
      for (std::int64_t i = 0; i < depth; ++i) {
        std::memcpy(to + (panel * depth + i) * kPanelWidth,
                    from + i * g.out_c + panel * kPanelWidth, kPanelWidth * sizeof(float));
      }
    }
  });
  return result;
}

void streamed_filter_conv(const Window2D& g, const float* windows, const float* panels,
                          const float* bias, const float* residual, bool relu, float* y) {
  const std::int64_t rows = g.positions();
  const std::int64_t depth = g.window_entries();
  const PanelFunction product = kPanelFunctions[static_cast<std::size_t>(rows - 1)];
  parallel_for(
      g.out_c / kPanelWidth, rows * depth * kPanelWidth, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t panel = begin; panel < end; ++panel) {
          const std::int64_t column = panel * kPanelWidth;
          product(windows, depth, panels + panel * depth * kPanelWidth,
                  bias != nullptr ? bias + column : nullptr,
                  residual != nullptr ? residual + column : nullptr, relu, y + column, g.out_c);
        }
      });
}

}  // namespace tandem::cpu
#endif
