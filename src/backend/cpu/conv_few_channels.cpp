// The f32 filter gradient of convolutions with small windows over few input channels, on
// AVX-512. oneDNN 2.6 computes the main job's first layer's (x (32, 28, 28, 1), a 3x3 filter to
// 32 channels) at 80 GFLOP/s on a 2-core AVX-512 Xeon, a fifth of the machine's FMA peak: the
// sum runs over the 21,632 output positions, and its kernels block it for many input channels.
// These loops keep the gradient's 32 output channels of nine window entries in 18 vector
// registers while they stream over the positions of an output row: dy's two vectors are loaded
// once a position for the nine entries, and each window value is broadcast from a copy of the
// input rows the output row reads, padded with zeros, so no loop tests for padding.
// Multiplies and adds are fused (FMA), as oneDNN's are.
#include "backend/cpu/conv_few_channels.h"

#if defined(__x86_64__)
#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cpu/avx512.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/max_pool_band.h"

namespace tandem::cpu {
namespace {

// Windows up to which these loops run: a 3x3 window of up to three channels (RGB), a 5x5 one of
// one. Measured against oneDNN on a 2-core AVX-512 Xeon (bench/RESULTS.md, 2026-12-05): 1.3-2.4x
// faster on such windows, except for 16 output channels over more than one pass of kEntryTile
// entries (3x3 RGB: 0.83x), where a pass has one dy vector to load for each nine broadcasts; and
// slower (0.78x at 64x64) on ResNet-50's 7x7 RGB stem.
constexpr std::int64_t kMaxWindowEntries = 27;
constexpr std::int64_t kChannelBlock =
    2 * kAvx512Lanes;          // output channels a pass keeps in registers
constexpr int kEntryTile = 9;  // window entries per filter-gradient or forward pass
// Output positions whose sums a forward pass keeps in registers at a time: with two halves, 8
// vectors beside the 18 of nine entries' filter rows.
constexpr std::int64_t kForwardPositions = 4;

// The input rows that one output row (n, oh) reads, padded with zeros: row kh holds input row
// oh * stride - pad_top + kh * dilation, from input column -pad_left on, C_in values a column,
// and zeros where that row or column lies outside the input. Entry p = (kh, kw, ci) of the
// window at output column ow (the filter's layout (KH, KW, C_in) flattened) is
// data()[offsets()[p] + ow * column_step()].
class WindowRows {
 public:
  explicit WindowRows(const Window2D& g)
      : g_(g),
        columns_((g.out_w - 1) * g.strides[1] + (g.k_w - 1) * g.dilations[1] + 1),
        width_(columns_ * g.in_c),
        data_(static_cast<std::size_t>(g.k_h * width_)),
        offsets_(static_cast<std::size_t>(g.window_entries())) {
    for (std::int64_t kh = 0; kh < g.k_h; ++kh) {
      for (std::int64_t kw = 0; kw < g.k_w; ++kw) {
        for (std::int64_t ci = 0; ci < g.in_c; ++ci) {
          offsets_[static_cast<std::size_t>((kh * g.k_w + kw) * g.in_c + ci)] =
              kh * width_ + kw * g.dilations[1] * g.in_c + ci;
        }
      }
    }
  }

  void load(const float* x, std::int64_t n, std::int64_t oh) {
    // The columns that hold input: [pad_left, pad_left + W), as far as the windows reach.
    const std::int64_t first = std::min(g_.pad_before[1], columns_);
    const std::int64_t last = std::min(g_.pad_before[1] + g_.in_w, columns_);
    for (std::int64_t kh = 0; kh < g_.k_h; ++kh) {
      float* row = data_.data() + kh * width_;
      const std::int64_t ih = oh * g_.strides[0] - g_.pad_before[0] + kh * g_.dilations[0];
      if (ih < 0 || ih >= g_.in_h || first >= last) {
        std::fill(row, row + width_, 0.0f);
        continue;
      }
      std::fill(row, row + first * g_.in_c, 0.0f);
      std::memcpy(row + first * g_.in_c, x + (n * g_.in_h + ih) * g_.in_w * g_.in_c,
                  static_cast<std::size_t>((last - first) * g_.in_c) * sizeof(float));
      std::fill(row + last * g_.in_c, row + width_, 0.0f);
    }
  }

  const float* data() const { return data_.data(); }
  const std::int64_t* offsets() const { return offsets_.data(); }
  std::int64_t entries() const { return static_cast<std::int64_t>(offsets_.size()); }
  std::int64_t column_step() const { return g_.strides[1] * g_.in_c; }

 private:
  const Window2D& g_;
  std::int64_t columns_;
  std::int64_t width_;
  std::vector<float> data_;  // (KH, columns_ * C_in)
  std::vector<std::int64_t> offsets_;
};

// The channel block [block, block + 32) of output channels and its lanes present.
struct ChannelBlock {
  std::int64_t block;
  __mmask16 low;
  __mmask16 high;
};

template <typename Body>
void for_each_channel_block(std::int64_t out_c, Body&& body) {
  for (std::int64_t block = 0; block < out_c; block += kChannelBlock) {
    body(ChannelBlock{block, lane_mask(out_c - block), lane_mask(out_c - block - kAvx512Lanes)});
  }
}

// Adds to sums (Entries, 16 * Halves) (a slice of a (P + 1, padded C_out) buffer, rows
// `stride` apart) the products of window entries offsets[0..Entries) with dy over every position
// of an output row, and, where bias_sums is not null, dy itself to bias_sums (16 * Halves,). A
// block of 16 channels or fewer (c.high empty) runs with one half: its second would be all
// zeros.
template <int Entries, int Halves>
[[gnu::target("avx512f")]] void filter_gradient_pass(
    const WindowRows& rows, const std::int64_t* offsets, const float* dy_row, std::int64_t out_w,
    std::int64_t out_c, const ChannelBlock& c, float* sums, std::int64_t stride, float* bias_sums) {
  const __mmask16 masks[2] = {c.low, c.high};
  __m512 acc[Entries][Halves];
  __m512 bias_acc[Halves];
#pragma GCC unroll 16
  for (int h = 0; h < Halves; ++h) {
    bias_acc[h] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int e = 0; e < Entries; ++e)
      acc[e][h] = _mm512_loadu_ps(sums + e * stride + h * kAvx512Lanes);
  }
  const std::int64_t step = rows.column_step();
  for (std::int64_t ow = 0; ow < out_w; ++ow) {
    const float* dy = dy_row + ow * out_c + c.block;
    const float* windows = rows.data() + ow * step;
    __m512 dy_lanes[Halves];
#pragma GCC unroll 16
    for (int h = 0; h < Halves; ++h) {
      dy_lanes[h] = _mm512_maskz_loadu_ps(masks[h], dy + h * kAvx512Lanes);
      bias_acc[h] = _mm512_add_ps(bias_acc[h], dy_lanes[h]);
    }
#pragma GCC unroll 16
    for (int e = 0; e < Entries; ++e) {
      const __m512 value = _mm512_set1_ps(windows[offsets[e]]);
#pragma GCC unroll 16
      for (int h = 0; h < Halves; ++h)
        acc[e][h] = _mm512_fmadd_ps(value, dy_lanes[h], acc[e][h]);
    }
  }
#pragma GCC unroll 16
  for (int h = 0; h < Halves; ++h) {
#pragma GCC unroll 16
    for (int e = 0; e < Entries; ++e)
      _mm512_storeu_ps(sums + e * stride + h * kAvx512Lanes, acc[e][h]);
    if (bias_sums != nullptr) {
      float* bias = bias_sums + h * kAvx512Lanes;
      _mm512_storeu_ps(bias, _mm512_add_ps(_mm512_loadu_ps(bias), bias_acc[h]));
    }
  }
}

using FilterGradientPass = void (*)(const WindowRows&, const std::int64_t*, const float*,
                                    std::int64_t, std::int64_t, const ChannelBlock&, float*,
                                    std::int64_t, float*);

// The pass for 1..kEntryTile entries at index count - 1, for one half and for two.
constexpr std::array<std::array<FilterGradientPass, kEntryTile>, 2> kFilterGradientPasses = {
    instances_by_count<kEntryTile>(
        []<int Entries>() -> FilterGradientPass { return &filter_gradient_pass<Entries, 1>; }),
    instances_by_count<kEntryTile>(
        []<int Entries>() -> FilterGradientPass { return &filter_gradient_pass<Entries, 2>; })};

// Adds one output row's products to sums (P + 1, padded_c): the filter's P entries, then the
// bias (dy summed).
void filter_gradient_row(const Window2D& g, const WindowRows& rows, const float* dy_row,
                         float* sums, std::int64_t padded_c) {
  const std::int64_t entries = rows.entries();
  for_each_channel_block(g.out_c, [&](const ChannelBlock& c) {
    for (std::int64_t first = 0; first < entries; first += kEntryTile) {
      const auto count = std::min<std::int64_t>(kEntryTile, entries - first);
      float* bias_sums = first == 0 ? sums + entries * padded_c + c.block : nullptr;
      kFilterGradientPasses[c.high != 0][static_cast<std::size_t>(count - 1)](
          rows, rows.offsets() + first, dy_row, g.out_w, g.out_c, c,
          sums + first * padded_c + c.block, padded_c, bias_sums);
    }
  });
}

// The filter gradient summed over the output rows (n, oh), split across threads: each thread gets
// its own adder from make_adder() and calls add(row, rows, sums, padded_c) for each of its rows
// in order, adding that row's products to its sums (P + 1, padded_c) (the filter's P window
// entries, then the bias); the threads' sums are then added in the order of their first rows
// into d_filter and d_bias (where not null).
template <typename MakeAdder>
void sum_filter_gradient(const Window2D& g, MakeAdder&& make_adder, float* d_filter,
                         float* d_bias) {
  const std::int64_t entries = g.window_entries();
  const std::int64_t padded_c = (g.out_c + kChannelBlock - 1) / kChannelBlock * kChannelBlock;
  std::vector<std::pair<std::int64_t, std::vector<float>>> shares;  // (first row, sums)
  std::mutex shares_mutex;
  const auto sum_rows = [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> sums(static_cast<std::size_t>((entries + 1) * padded_c), 0.0f);
    WindowRows rows(g);
    auto add = make_adder();
    for (std::int64_t row = begin; row < end; ++row)
      add(row, rows, sums.data(), padded_c);
    const std::lock_guard lock(shares_mutex);
    shares.emplace_back(begin, std::move(sums));
  };
  parallel_for(g.batch * g.out_h, g.out_w * entries * g.out_c, sum_rows);
  std::sort(shares.begin(), shares.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::int64_t p = 0; p <= entries; ++p) {
    float* out = p < entries ? d_filter + p * g.out_c : d_bias;
    if (out == nullptr) continue;
    for (std::int64_t co = 0; co < g.out_c; ++co) {
      float total = 0.0f;
      for (const auto& share : shares)
        total += share.second[static_cast<std::size_t>(p * padded_c + co)];
      out[co] = total;
    }
  }
}

// y for `Count` positions of an output row from `first` on (forward_pass's): `start` (the bias)
// plus the entries' products, summed in registers, then relu where `relu`.
template <int Count, int Entries, int Halves>
[[gnu::target("avx512f"), gnu::always_inline]] inline void forward_positions(
    const WindowRows& rows, const std::int64_t* offsets, const __m512 (&filter)[Entries][Halves],
    const __m512 (&start)[Halves], const __mmask16 (&masks)[2], std::int64_t out_c, bool relu,
    std::int64_t first, float* y_row) {
  __m512 sums[Count][Halves];
#pragma GCC unroll 16
  for (int i = 0; i < Count; ++i) {
#pragma GCC unroll 16
    for (int h = 0; h < Halves; ++h)
      sums[i][h] = start[h];
  }
  const std::int64_t step = rows.column_step();
  const float* windows = rows.data() + first * step;
#pragma GCC unroll 16
  for (int e = 0; e < Entries; ++e) {
#pragma GCC unroll 16
    for (int i = 0; i < Count; ++i) {
      const __m512 value = _mm512_set1_ps(windows[offsets[e] + i * step]);
#pragma GCC unroll 16
      for (int h = 0; h < Halves; ++h)
        sums[i][h] = _mm512_fmadd_ps(value, filter[e][h], sums[i][h]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < Count; ++i) {
#pragma GCC unroll 16
    for (int h = 0; h < Halves; ++h) {
      const __m512 out = relu ? relu_lanes(sums[i][h]) : sums[i][h];
      _mm512_mask_storeu_ps(y_row + (first + i) * out_c + h * kAvx512Lanes, masks[h], out);
    }
  }
}

// One output row y_row (OW, C_out) in one block of up to 32 output channels (16 * Halves lanes):
// the bias (0 without one) plus the products of the window's entries offsets[0..Entries) with
// the filter's rows for them, in the filter's order, one FMA each, then relu where `relu`. The
// entries' filter rows stay in vector registers for the whole row; positions are taken
// kForwardPositions at a time, their sums in registers.
template <int Entries, int Halves>
[[gnu::target("avx512f")]] void forward_pass(const WindowRows& rows, const std::int64_t* offsets,
                                             const float* filter_rows, std::int64_t out_w,
                                             std::int64_t out_c, const ChannelBlock& c,
                                             const float* bias, bool relu, float* y_row) {
  const __mmask16 masks[2] = {c.low, c.high};
  __m512 filter[Entries][Halves];
  __m512 start[Halves];
#pragma GCC unroll 16
  for (int h = 0; h < Halves; ++h) {
#pragma GCC unroll 16
    for (int e = 0; e < Entries; ++e) {
      filter[e][h] =
          _mm512_maskz_loadu_ps(masks[h], filter_rows + e * out_c + c.block + h * kAvx512Lanes);
    }
    start[h] = bias != nullptr ? _mm512_maskz_loadu_ps(masks[h], bias + c.block + h * kAvx512Lanes)
                               : _mm512_setzero_ps();
  }
  float* y_block = y_row + c.block;
  std::int64_t ow = 0;
  for (; ow + kForwardPositions <= out_w; ow += kForwardPositions)
    forward_positions<kForwardPositions>(rows, offsets, filter, start, masks, out_c, relu, ow,
                                         y_block);
  for (; ow < out_w; ++ow)
    forward_positions<1>(rows, offsets, filter, start, masks, out_c, relu, ow, y_block);
}

using ForwardPass = void (*)(const WindowRows&, const std::int64_t*, const float*, std::int64_t,
                             std::int64_t, const ChannelBlock&, const float*, bool, float*);

// The pass for 1..kEntryTile entries at index count - 1, for one half and for two.
constexpr std::array<std::array<ForwardPass, kEntryTile>, 2> kForwardPasses = {
    instances_by_count<kEntryTile>(
        []<int Entries>() -> ForwardPass { return &forward_pass<Entries, 1>; }),
    instances_by_count<kEntryTile>(
        []<int Entries>() -> ForwardPass { return &forward_pass<Entries, 2>; })};

}  // namespace

bool few_channel_filter_gradient_fits(const Window2D& g) {
  const std::int64_t entries = g.window_entries();
  return cpu_has_avx512() && entries <= kMaxWindowEntries &&
         (entries <= kEntryTile || g.out_c > kAvx512Lanes);
}

bool few_channel_forward_fits(const Window2D& g) {
  return cpu_has_avx512() && g.window_entries() <= kEntryTile;
}

void few_channel_conv_forward(const Window2D& g, const float* x, const float* filter,
                              const float* bias, bool relu, float* y) {
  const std::int64_t entries = g.window_entries();
  parallel_for(g.batch * g.out_h, g.out_w * entries * g.out_c,
               [&](std::int64_t begin, std::int64_t end) {
                 WindowRows rows(g);
                 for (std::int64_t row = begin; row < end; ++row) {
                   rows.load(x, row / g.out_h, row % g.out_h);
                   float* y_row = y + row * g.out_w * g.out_c;
                   for_each_channel_block(g.out_c, [&](const ChannelBlock& c) {
                     kForwardPasses[c.high != 0][static_cast<std::size_t>(entries - 1)](
                         rows, rows.offsets(), filter, g.out_w, g.out_c, c, bias, relu, y_row);
                   });
                 }
               });
}

void few_channel_pooled_conv_forward(const Window2D& g, const Window2D& pool, const float* x,
                                     const float* filter, const float* bias, bool relu,
                                     float* pooled, std::int8_t* winners) {
  const std::int64_t entries = g.window_entries();
  const std::int64_t row_elements = g.out_w * g.out_c;
  parallel_for(g.batch * pool.out_h, pool.k_h * row_elements * entries,
               [&](std::int64_t begin, std::int64_t end) {
                 WindowRows rows(g);
                 // The rows of y (OW, C_out) one pooled row reads, while they are in the cache.
                 std::vector<float> band(static_cast<std::size_t>(pool.k_h * row_elements));
                 std::vector<std::int32_t> winner(static_cast<std::size_t>(g.out_c));  // scratch
                 for (std::int64_t unit = begin; unit < end; ++unit) {
                   const std::int64_t n = unit / pool.out_h;
                   const std::int64_t ph = unit % pool.out_h;
                   const auto [top, bottom] = window_span(pool, 0, ph);
                   for (std::int64_t oh = top; oh < bottom; ++oh) {
                     rows.load(x, n, oh);
                     float* y_row = band.data() + (oh - top) * row_elements;
                     for_each_channel_block(g.out_c, [&](const ChannelBlock& c) {
                       kForwardPasses[c.high != 0][static_cast<std::size_t>(entries - 1)](
                           rows, rows.offsets(), filter, g.out_w, g.out_c, c, bias, relu, y_row);
                     });
                   }
                   const std::int64_t at = unit * pool.out_w * pool.in_c;
                   max_pool_band_with_winners(pool, band.data(), relu, ph, pooled + at,
                                              winners + at, winner.data());
                 }
               });
}

void few_channel_conv_backward_filter(const Window2D& g, const float* x, const float* dy,
                                      float* d_filter, float* d_bias) {
  const auto rows_adder = [&] {
    return [&](std::int64_t row, WindowRows& rows, float* sums, std::int64_t padded_c) {
      rows.load(x, row / g.out_h, row % g.out_h);
      filter_gradient_row(g, rows, dy + row * g.out_w * g.out_c, sums, padded_c);
    };
  };
  sum_filter_gradient(g, rows_adder, d_filter, d_bias);
}

void few_channel_pooled_conv_backward_filter(const Window2D& g, const Window2D& pool,
                                             const float* x, const PooledGradient& gradient,
                                             float* d_filter, float* d_bias) {
  const std::int64_t row_elements = g.out_w * g.out_c;
  const auto band_adder = [&] {
    // This thread's band of dy rows (the one pooled row `band_of` makes), a zero row for those
    // no window covers, and max_pool_backward_band's scratch.
    return [&, band = std::vector<float>(static_cast<std::size_t>(pool.k_h * row_elements)),
            zeros = std::vector<float>(static_cast<std::size_t>(row_elements), 0.0f),
            best = std::vector<float>(static_cast<std::size_t>(g.out_c)),
            winner = std::vector<std::int32_t>(static_cast<std::size_t>(g.out_c)),
            band_of = std::int64_t{-1}](std::int64_t row, WindowRows& rows, float* sums,
                                        std::int64_t padded_c) mutable {
      const std::int64_t n = row / g.out_h;
      const std::int64_t oh = row % g.out_h;
      // The pooled row whose window covers dy row oh, if one does (windows do not overlap).
      const std::int64_t shifted = oh + pool.pad_before[0];
      const std::int64_t ph = shifted / pool.strides[0];
      const bool covered = shifted % pool.strides[0] < pool.k_h && ph < pool.out_h;
      const float* dy_row = zeros.data();
      if (covered) {
        const std::int64_t unit = n * pool.out_h + ph;
        if (band_of != unit) {
          if (gradient.winners != nullptr) {
            winners_backward_band(pool, gradient.pooled_dy, gradient.winners, band.data(), n, ph);
          } else {
            max_pool_backward_band(pool, gradient.pooled_dy, gradient.y, band.data(),
                                   gradient.relu_masked, n, ph, best.data(), winner.data());
          }
          band_of = unit;
        }
        dy_row = band.data() + (oh - window_span(pool, 0, ph).first) * row_elements;
      }
      rows.load(x, n, oh);
      filter_gradient_row(g, rows, dy_row, sums, padded_c);
    };
  };
  // Row by row, as few_channel_conv_backward_filter: the same sums in the same order, so the same
  // bits as the two ops one after the other.
  sum_filter_gradient(g, band_adder, d_filter, d_bias);
}

}  // namespace tandem::cpu

#endif  // defined(__x86_64__)
