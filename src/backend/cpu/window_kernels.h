#pragma once
// Pieces shared by the convolution and pooling kernels: walking the input cells a window
// covers, per-image accumulation for the scatter-shaped backward loops, and the oneDNN
// spellings of a window's geometry.
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "backend/cpu/loops.h"
#include "backend/cpu/primitive_cache.h"
#include "ops/window.h"

namespace tandem::cpu {

// Calls cell(kh, kw, ih, iw) for every window cell of output position (oh, ow) that falls
// inside the input (padding cells are skipped), row by row as TensorFlow scans a window.
template <typename Fn>
void for_each_window_cell(const Window2D& g, std::int64_t oh, std::int64_t ow, Fn&& cell) {
  for (std::int64_t kh = 0; kh < g.k_h; ++kh) {
    const std::int64_t ih = oh * g.strides[0] - g.pad_before[0] + kh * g.dilations[0];
    if (ih < 0 || ih >= g.in_h) continue;
    for (std::int64_t kw = 0; kw < g.k_w; ++kw) {
      const std::int64_t iw = ow * g.strides[1] - g.pad_before[1] + kw * g.dilations[1];
      if (iw < 0 || iw >= g.in_w) continue;
      cell(kh, kw, ih, iw);
    }
  }
}

// For backward loops that scatter into the (N, H, W, C_in) input gradient: runs
// accumulate(n, buffer) for each image in parallel with a zeroed (H, W, C_in) buffer of the
// compute type C (so f16 sums stay in float), then stores the buffer into `out`.
template <typename T, typename C, typename Fn>
void accumulate_per_image(const Window2D& g, std::int64_t cost_per_image, T* out, Fn&& accumulate) {
  const std::int64_t image = g.in_h * g.in_w * g.in_c;
  parallel_for(g.batch, cost_per_image, [&](std::int64_t begin, std::int64_t end) {
    std::vector<C> buffer(static_cast<std::size_t>(image));
    for (std::int64_t n = begin; n < end; ++n) {
      std::fill(buffer.begin(), buffer.end(), C(0));
      accumulate(n, buffer.data());
      T* image_out = out + n * image;
      for (std::int64_t i = 0; i < image; ++i) {
        image_out[i] = convert_element<T>(buffer[i]);
      }
    }
  });
}

inline dnnl::memory::dims onednn_strides(const Window2D& g) {
  return {g.strides[0], g.strides[1]};
}
// oneDNN counts dilation from 0 (no gaps); TensorFlow from 1.
inline dnnl::memory::dims onednn_dilates(const Window2D& g) {
  return {g.dilations[0] - 1, g.dilations[1] - 1};
}
inline dnnl::memory::dims onednn_padding_l(const Window2D& g) {
  return {g.pad_before[0], g.pad_before[1]};
}
inline dnnl::memory::dims onednn_padding_r(const Window2D& g) {
  return {g.pad_after[0], g.pad_after[1]};
}

// Everything about a window that shapes a primitive, plus the op and dtype.
inline PrimitiveKey window_key(OpKind kind, DType dtype, const Window2D& g) {
  return {static_cast<std::int64_t>(kind),
          static_cast<std::int64_t>(dtype),
          g.batch,
          g.in_h,
          g.in_w,
          g.in_c,
          g.k_h,
          g.k_w,
          g.out_c,
          g.strides[0],
          g.strides[1],
          g.dilations[0],
          g.dilations[1],
          g.pad_before[0],
          g.pad_before[1],
          g.pad_after[0],
          g.pad_after[1]};
}

}  // namespace tandem::cpu
