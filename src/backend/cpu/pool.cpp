// CPU kernels for pooling. Max pooling's forward pass in f32 and bf16 is a vectorised loop of our
// own over NHWC tensors (oneDNN 2.6's was 4x slower). Its backward pass and average pooling in
// f32 and bf16 run on oneDNN's pooling primitives over NHWC tensors in place (pooling_max;
// pooling_avg_exclude_padding, which is TensorFlow's average); where max pooling's windows
// overlap, its backward pass recomputes the forward pass with a workspace to find each window's
// argmax, since the op gets x rather than saved indices, and where they do not (2x2 of stride 2)
// one loop of our own finds and scatters in one pass (f32 and bf16). Primitives are cached per
// geometry. f64 and f16 (and empty tensors) run the templated loops below, which are also the
// reference the oneDNN path is tested against; global average pooling is one loop for every dtype
// (a memory-bound channel sum).
#include <algorithm>
#include <optional>
#include <type_traits>
#include <utility>

#include "backend/cpu/avx512.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/max_pool_band.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/window_kernels.h"
#include "ops/op_attrs.h"

namespace tandem::cpu {

bool windows_are_disjoint(const Window2D& g) {
  return g.strides[0] >= g.k_h && g.strides[1] >= g.k_w;
}

std::pair<std::int64_t, std::int64_t> window_span(const Window2D& g, int axis, std::int64_t o) {
  const std::int64_t extent = axis == 0 ? g.in_h : g.in_w;
  const std::int64_t start = o * g.strides[axis] - g.pad_before[axis];
  const std::int64_t size = axis == 0 ? g.k_h : g.k_w;
  return {std::clamp<std::int64_t>(start, 0, extent),
          std::clamp<std::int64_t>(start + size, 0, extent)};
}

namespace {

using dnnl::memory;

// The geometry of whichever pooling op `c` runs; the pooled input is the first input of the
// forward ops, the second of max_pool2d_backward and the output of avg_pool2d_backward.
Window2D pool_geometry(const KernelContext& c) {
  const Pool2DOptions options = read_attrs<Pool2DOptions>(c.attrs);
  const char* op = op_name(c.kind);
  switch (c.kind) {
    case OpKind::max_pool2d_backward:
      return pool_window(op, c.inputs[1].shape(), options);
    case OpKind::avg_pool2d_backward:
      return pool_window(op, c.outputs[0].shape(), options);
    default:
      return pool_window(op, c.inputs[0].shape(), options);
  }
}

// ---- loops (f64, f16; the reference for the oneDNN path) ----
// Calls visit(n, oh, ow, y_cell) for every output position, rows split across threads, with
// y_cell pointing at that position's C channels.
template <typename T, typename Fn>
void for_each_output(const Window2D& g, T* y, Fn&& visit) {
  auto rows = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        visit(row / g.out_h, row % g.out_h, ow, y + (row * g.out_w + ow) * g.out_c);
      }
    }
  };
  parallel_for(g.batch * g.out_h, g.out_w * g.k_h * g.k_w * g.out_c, rows);
}

template <typename T>
const T* input_cell(const Window2D& g, const T* x, std::int64_t n, std::int64_t ih,
                    std::int64_t iw) {
  return x + ((n * g.in_h + ih) * g.in_w + iw) * g.in_c;
}

// Strictly greater replaces, so the first maximum in scan order wins, as in TensorFlow.
template <typename T>
void max_pool_loops(const Window2D& g, const T* x, T* y) {
  for_each_output(g, y, [&](std::int64_t n, std::int64_t oh, std::int64_t ow, T* y_cell) {
    bool first = true;
    for_each_window_cell(g, oh, ow, [&](auto, auto, auto ih, auto iw) {
      const T* x_cell = input_cell(g, x, n, ih, iw);
      for (std::int64_t ch = 0; ch < g.in_c; ++ch) {
        if (first || static_cast<compute_type_t<T>>(x_cell[ch]) >
                         static_cast<compute_type_t<T>>(y_cell[ch])) {
          y_cell[ch] = x_cell[ch];
        }
      }
      first = false;
    });
  });
}

// Each window sends its dy to the first maximum of x in it.
template <typename T>
void max_pool_backward_loops(const Window2D& g, const T* dy, const T* x, T* dx) {
  using C = compute_type_t<T>;
  const std::int64_t cost = g.out_h * g.out_w * g.k_h * g.k_w * g.in_c;
  accumulate_per_image<T, C>(g, cost, dx, [&](std::int64_t n, C* dx_image) {
    std::vector<C> best(static_cast<std::size_t>(g.in_c));                    // (C,)
    std::vector<std::int64_t> best_offset(static_cast<std::size_t>(g.in_c));  // (C,)
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        bool first = true;
        for_each_window_cell(g, oh, ow, [&](auto, auto, auto ih, auto iw) {
          const std::int64_t offset = (ih * g.in_w + iw) * g.in_c;
          const T* x_cell = input_cell(g, x, n, ih, iw);
          for (std::int64_t ch = 0; ch < g.in_c; ++ch) {
            const C value = static_cast<C>(x_cell[ch]);
            if (first || value > best[ch]) {
              best[ch] = value;
              best_offset[ch] = offset + ch;
            }
          }
          first = false;
        });
        const T* dy_cell = dy + ((n * g.out_h + oh) * g.out_w + ow) * g.out_c;
        for (std::int64_t ch = 0; ch < g.in_c; ++ch) {
          dx_image[best_offset[ch]] += static_cast<C>(dy_cell[ch]);
        }
      }
    }
  });
}

// best = value where value is strictly larger (in T's compute type; NaN never is), returning
// whether it was, without a branch. bf16 chooses between the bits: a choice between structs kept
// the loops scalar (10x the f32 loop's time on ResNet-50's stem).
template <typename T>
inline bool keep_larger(T& best, const T& value) {
  using C = compute_type_t<T>;
  const bool larger = static_cast<C>(value) > static_cast<C>(best);
  if constexpr (std::is_same_v<T, bfloat16>) {
    best.bits = larger ? value.bits : best.bits;
  } else {
    best = larger ? value : best;
  }
  return larger;
}

// One output row of max pooling (f32, bf16): image n, output row oh. Each window keeps its first
// maximum in scan order, as max_pool_loops does, and the loops over channels choose without
// branches, so they vectorise.
template <typename T>
TANDEM_VECTOR_CLONES void max_pool_row(const Window2D& g, const T* x, T* y, std::int64_t n,
                                       std::int64_t oh) {
  const std::int64_t channels = g.in_c;
  const auto [top, bottom] = window_span(g, 0, oh);
  if (top >= bottom) return;
  const T* x_image = x + n * g.in_h * g.in_w * channels;   // (H, W, C)
  T* y_row = y + (n * g.out_h + oh) * g.out_w * channels;  // (OW, C)
  for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
    const auto [left, right] = window_span(g, 1, ow);
    if (left >= right) continue;
    T* __restrict y_cell = y_row + ow * channels;
    const T* __restrict first = x_image + (top * g.in_w + left) * channels;
    for (std::int64_t ch = 0; ch < channels; ++ch)
      y_cell[ch] = first[ch];
    for (std::int64_t ih = top; ih < bottom; ++ih) {
      for (std::int64_t iw = ih == top ? left + 1 : left; iw < right; ++iw) {
        const T* __restrict x_cell = x_image + (ih * g.in_w + iw) * channels;
        for (std::int64_t ch = 0; ch < channels; ++ch) {
          keep_larger(y_cell[ch], x_cell[ch]);
        }
      }
    }
  }
}

// Max pooling's forward pass in f32 and bf16, split by (image, output row). oneDNN 2.6's pooling
// over NHWC ran at a quarter of this loop's speed on an AVX2 CPU (ResNet-50's 3x3 pooling of
// (8, 56, 56, 64): 0.94 against 0.25 ms; the main job's CNN's 2x2 pooling of (64, 26, 26, 32):
// 0.77 against 0.22 ms), the same maxima bit for bit.
template <typename T>
void max_pool_forward(const Window2D& g, const T* x, T* y) {
  parallel_for(g.batch * g.out_h, g.out_w * g.k_h * g.k_w * g.in_c,
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t unit = begin; unit < end; ++unit) {
                   max_pool_row(g, x, y, unit / g.out_h, unit % g.out_h);
                 }
               });
}

// Zeroes the columns of a band (the input rows window_span(g, 0, oh), (W, C) each) that no window
// of output row oh covers: those past the last window and any between windows.
template <typename T>
void zero_uncovered_columns(const Window2D& g, std::int64_t oh, T* dx_band) {
  const std::int64_t channels = g.in_c;
  const std::int64_t row = g.in_w * channels;
  const auto [top, bottom] = window_span(g, 0, oh);
  std::int64_t covered = 0;
  for (std::int64_t ow = 0; ow <= g.out_w; ++ow) {
    const std::int64_t left = ow < g.out_w ? window_span(g, 1, ow).first : g.in_w;
    for (std::int64_t ih = top; ih < bottom && covered < left; ++ih) {
      std::fill(dx_band + (ih - top) * row + covered * channels,
                dx_band + (ih - top) * row + left * channels, T(0));
    }
    if (ow < g.out_w) covered = std::max(covered, window_span(g, 1, ow).second);
  }
}

// The input rows of output row oh of max_pool_backward_disjoint: image n, rows
// window_span(g, 0, oh) written into dx_band (those rows, (W, C) each), dy at each window's
// first maximum and 0 everywhere else. `best` and `winner` are (C,) scratch: per channel, the
// window's largest value and the index of its cell in scan order; the loops over channels choose
// without branches, so they vectorise.
template <typename T>
TANDEM_VECTOR_CLONES void max_pool_backward_band_loop(const Window2D& g, const T* dy, const T* x,
                                                      T* dx_band, bool relu_masked, std::int64_t n,
                                                      std::int64_t oh,
                                                      compute_type_t<T>* __restrict best,
                                                      std::int32_t* __restrict winner) {
  using C = compute_type_t<T>;
  const std::int64_t channels = g.in_c;
  const std::int64_t row = g.in_w * channels;  // elements of one input row
  const T* x_image = x + n * g.in_h * row;     // (H, W, C)
  const auto [top, bottom] = window_span(g, 0, oh);
  zero_uncovered_columns(g, oh, dx_band);
  if (top >= bottom) return;
  const T* dy_row = dy + (n * g.out_h + oh) * g.out_w * channels;  // (OW, C)
  for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
    const auto [left, right] = window_span(g, 1, ow);
    if (left >= right) continue;
    const T* __restrict first = x_image + (top * g.in_w + left) * channels;
    for (std::int64_t ch = 0; ch < channels; ++ch) {
      best[ch] = static_cast<C>(first[ch]);
      winner[ch] = 0;
    }
    std::int32_t index = 0;
    for (std::int64_t ih = top; ih < bottom; ++ih) {
      for (std::int64_t iw = ih == top ? left + 1 : left; iw < right; ++iw) {
        ++index;
        const T* __restrict x_cell = x_image + (ih * g.in_w + iw) * channels;
        for (std::int64_t ch = 0; ch < channels; ++ch) {
          const C value = static_cast<C>(x_cell[ch]);
          const bool larger = value > best[ch];  // strictly: the first maximum wins
          best[ch] = larger ? value : best[ch];
          winner[ch] = larger ? index : winner[ch];
        }
      }
    }
    if (relu_masked) {
      // A maximum that is not positive passes nothing: no cell is its winner.
      for (std::int64_t ch = 0; ch < channels; ++ch)
        winner[ch] = best[ch] > C(0) ? winner[ch] : -1;
    }
    const T* __restrict dy_cell = dy_row + ow * channels;
    index = 0;
    for (std::int64_t ih = top; ih < bottom; ++ih) {
      for (std::int64_t iw = left; iw < right; ++iw, ++index) {
        T* __restrict dx_cell = dx_band + (ih - top) * row + iw * channels;
        for (std::int64_t ch = 0; ch < channels; ++ch)
          dx_cell[ch] = winner[ch] == index ? dy_cell[ch] : T(0);
      }
    }
  }
}

// Max pooling's backward pass where windows do not overlap: each input cell is in at most one
// window, so dx is written once per cell, dy at its window's first maximum (scan order, as in
// TensorFlow) and 0 elsewhere, in one pass over x and dy: no forward pass recomputed for an
// argmax workspace (oneDNN's way) and no scratch memory. With relu_masked, a maximum that is not
// positive gets 0 as well, which is relu's backward pass on the same cells when x is a relu's
// output, bit for bit. Work is split by (image, output row).
template <typename T>
void max_pool_backward_disjoint(const Window2D& g, const T* dy, const T* x, T* dx,
                                bool relu_masked) {
  const std::int64_t cost = g.out_w * g.k_h * g.k_w * g.in_c;
  const std::int64_t row = g.in_w * g.in_c;  // elements of one input row
  parallel_for(g.batch * g.out_h, cost, [&](std::int64_t begin, std::int64_t end) {
    std::vector<compute_type_t<T>> best(static_cast<std::size_t>(g.in_c));  // (C,)
    std::vector<std::int32_t> winner(static_cast<std::size_t>(g.in_c));     // (C,)
    for (std::int64_t unit = begin; unit < end; ++unit) {
      const std::int64_t n = unit / g.out_h;
      const std::int64_t oh = unit % g.out_h;
      T* dx_image = dx + n * g.in_h * row;  // (H, W, C)
      const auto zero_rows = [&](std::int64_t first, std::int64_t last) {
        if (first < last) std::fill(dx_image + first * row, dx_image + last * row, T(0));
      };
      // The input rows before this output row's band (for the first) and after it that no
      // window covers.
      const auto [top, bottom] = window_span(g, 0, oh);
      if (oh == 0) zero_rows(0, top);
      zero_rows(bottom, oh + 1 < g.out_h ? window_span(g, 0, oh + 1).first : g.in_h);
      if constexpr (std::is_same_v<T, float>) {
        max_pool_backward_band(g, dy, x, dx_image + top * row, relu_masked, n, oh, best.data(),
                               winner.data());
        continue;
      }
      max_pool_backward_band_loop(g, dy, x, dx_image + top * row, relu_masked, n, oh, best.data(),
                                  winner.data());
    }
  });
}

// dx = x > 0 ? dx : 0, in place: relu's backward pass after a max pooling backward pass that
// could not take it in its own loop.
template <typename T>
void mask_by_positive(const T* x, T* dx, std::int64_t count) {
  using C = compute_type_t<T>;
  parallel_for(count, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      if (!(static_cast<C>(x[i]) > C(0))) dx[i] = T(0);
    }
  });
}

// The number of input cells (padding excluded) in the window of (oh, ow).
std::int64_t window_count(const Window2D& g, std::int64_t oh, std::int64_t ow) {
  std::int64_t count = 0;
  for_each_window_cell(g, oh, ow, [&](auto, auto, auto, auto) { ++count; });
  return count;
}

template <typename T>
void avg_pool_loops(const Window2D& g, const T* x, T* y) {
  using C = compute_type_t<T>;
  for_each_output(g, y, [&](std::int64_t n, std::int64_t oh, std::int64_t ow, T* y_cell) {
    std::vector<C> sum(static_cast<std::size_t>(g.in_c), C(0));  // (C,)
    for_each_window_cell(g, oh, ow, [&](auto, auto, auto ih, auto iw) {
      const T* x_cell = input_cell(g, x, n, ih, iw);
      for (std::int64_t ch = 0; ch < g.in_c; ++ch) {
        sum[ch] += static_cast<C>(x_cell[ch]);
      }
    });
    const C count = static_cast<C>(window_count(g, oh, ow));
    for (std::int64_t ch = 0; ch < g.in_c; ++ch) {
      y_cell[ch] = convert_element<T>(sum[ch] / count);
    }
  });
}

template <typename T>
void avg_pool_backward_loops(const Window2D& g, const T* dy, T* dx) {
  using C = compute_type_t<T>;
  const std::int64_t cost = g.out_h * g.out_w * g.k_h * g.k_w * g.in_c;
  accumulate_per_image<T, C>(g, cost, dx, [&](std::int64_t n, C* dx_image) {
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        const T* dy_cell = dy + ((n * g.out_h + oh) * g.out_w + ow) * g.out_c;
        const C scale = C(1) / static_cast<C>(window_count(g, oh, ow));
        for_each_window_cell(g, oh, ow, [&](auto, auto, auto ih, auto iw) {
          C* dx_cell = dx_image + (ih * g.in_w + iw) * g.in_c;
          for (std::int64_t ch = 0; ch < g.in_c; ++ch) {
            dx_cell[ch] += static_cast<C>(dy_cell[ch]) * scale;
          }
        });
      }
    }
  });
}

void pool_loops(const KernelContext& c, const Window2D& g) {
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      const T* in0 = static_cast<const T*>(c.inputs[0].raw_data());
      T* out = static_cast<T*>(c.outputs[0].raw_data());
      switch (c.kind) {
        case OpKind::max_pool2d:
          return max_pool_loops(g, in0, out);
        case OpKind::max_pool2d_backward:
          return max_pool_backward_loops(g, in0, static_cast<const T*>(c.inputs[1].raw_data()),
                                         out);
        case OpKind::avg_pool2d:
          return avg_pool_loops(g, in0, out);
        default:
          return avg_pool_backward_loops(g, in0, out);
      }
    }
  });
}

// ---- oneDNN (f32, bf16) ----
struct PoolDescs {
  memory::desc x;  // (N, H, W, C) as nhwc
  memory::desc y;  // (N, OH, OW, C) as nhwc
};

dnnl::algorithm pool_algorithm(OpKind kind) {
  return kind == OpKind::max_pool2d || kind == OpKind::max_pool2d_backward
             ? dnnl::algorithm::pooling_max
             : dnnl::algorithm::pooling_avg_exclude_padding;
}

// Training forward passes keep max pooling's argmax in a workspace for the backward pass.
dnnl::pooling_forward::primitive_desc pool_forward_pd(const Window2D& g, const PoolDescs& d,
                                                      dnnl::algorithm algorithm,
                                                      dnnl::prop_kind prop) {
  return {dnnl::pooling_forward::desc(prop, algorithm, d.x, d.y, onednn_strides(g), {g.k_h, g.k_w},
                                      onednn_padding_l(g), onednn_padding_r(g)),
          onednn_engine()};
}

struct PoolForward {
  dnnl::pooling_forward primitive;
  PoolDescs descs;
};

// For max pooling, `forward` recomputes the argmax workspace; average pooling needs none.
struct PoolBackward {
  std::optional<dnnl::pooling_forward> forward;
  memory::desc workspace;
  dnnl::pooling_backward primitive;
  PoolDescs descs;
};

PoolDescs pool_descs(const Window2D& g, DType dtype) {
  return {nhwc_desc(g.input_shape(), dtype), nhwc_desc(g.output_shape(), dtype)};
}

PoolForward build_forward(const Window2D& g, DType dtype, dnnl::algorithm algorithm) {
  const PoolDescs descs = pool_descs(g, dtype);
  return {dnnl::pooling_forward(
              pool_forward_pd(g, descs, algorithm, dnnl::prop_kind::forward_inference)),
          descs};
}

PoolBackward build_backward(const Window2D& g, DType dtype, dnnl::algorithm algorithm) {
  const PoolDescs descs = pool_descs(g, dtype);
  const auto hint = pool_forward_pd(g, descs, algorithm, dnnl::prop_kind::forward_training);
  const dnnl::pooling_backward::primitive_desc pd(
      dnnl::pooling_backward::desc(algorithm, descs.x, descs.y, onednn_strides(g), {g.k_h, g.k_w},
                                   onednn_padding_l(g), onednn_padding_r(g)),
      onednn_engine(), hint);
  PoolBackward result{std::nullopt, hint.workspace_desc(), dnnl::pooling_backward(pd), descs};
  if (algorithm == dnnl::algorithm::pooling_max) result.forward.emplace(hint);
  return result;
}

// Primitives per direction: a model's distinct shapes, twice over when the automatic thread count
// changes the team size (thread_budget.h).
constexpr std::size_t kCacheCapacity = 128;

void pool_forward_onednn(const KernelContext& c, const Window2D& g) {
  static PrimitiveCache<PoolForward> cache(kCacheCapacity);
  const DType dtype = c.inputs[0].dtype();
  const auto entry = cache.get(window_key(c.kind, dtype, g),
                               [&] { return build_forward(g, dtype, pool_algorithm(c.kind)); });
  execute(entry->primitive, {{DNNL_ARG_SRC, wrap(entry->descs.x, c.inputs[0])},
                             {DNNL_ARG_DST, wrap(entry->descs.y, c.outputs[0])}});
}

void pool_backward_onednn(const KernelContext& c, const Window2D& g) {
  static PrimitiveCache<PoolBackward> cache(kCacheCapacity);
  const DType dtype = c.inputs[0].dtype();
  const auto entry = cache.get(window_key(c.kind, dtype, g),
                               [&] { return build_backward(g, dtype, pool_algorithm(c.kind)); });
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, wrap(entry->descs.y, c.inputs[0])},
                                       {DNNL_ARG_DIFF_SRC, wrap(entry->descs.x, c.outputs[0])}};
  if (entry->forward) {
    const memory workspace(entry->workspace, onednn_engine());
    execute(*entry->forward, {{DNNL_ARG_SRC, wrap(entry->descs.x, c.inputs[1])},
                              {DNNL_ARG_DST, memory(entry->descs.y, onednn_engine())},
                              {DNNL_ARG_WORKSPACE, workspace}});
    args.emplace(DNNL_ARG_WORKSPACE, workspace);
  }
  execute(entry->primitive, args);
}

void pool_kernel(const KernelContext& c) {
  const Window2D g = pool_geometry(c);
  const DType dtype = c.inputs[0].dtype();
  if (c.kind == OpKind::max_pool2d && (dtype == DType::f32 || dtype == DType::bf16)) {
    return visit_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16>) {
        max_pool_forward(g, static_cast<const T*>(c.inputs[0].raw_data()),
                         static_cast<T*>(c.outputs[0].raw_data()));
      }
    });
  }
  // oneDNN rejects zero-sized tensors; the loops write the zeros (or nothing) they call for.
  const bool empty = shape_numel(g.input_shape()) == 0 || shape_numel(g.output_shape()) == 0;
  if (onednn_float_kernels(dtype) && !empty) {
    const bool backward =
        c.kind == OpKind::max_pool2d_backward || c.kind == OpKind::avg_pool2d_backward;
    return backward ? pool_backward_onednn(c, g) : pool_forward_onednn(c, g);
  }
  pool_loops(c, g);
}

// (N, H, W, C) -> (N, C): the mean over each image's cells, summed in the compute type.
void global_avg_pool_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const std::int64_t cells = x.dim(1) * x.dim(2);
  const std::int64_t channels = x.dim(3);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      using C = compute_type_t<T>;
      const T* in = static_cast<const T*>(x.raw_data());
      T* out = static_cast<T*>(c.outputs[0].raw_data());
      parallel_for(x.dim(0), cells * channels, [&](std::int64_t begin, std::int64_t end) {
        std::vector<C> sum(static_cast<std::size_t>(channels));  // (C,)
        for (std::int64_t n = begin; n < end; ++n) {
          std::fill(sum.begin(), sum.end(), C(0));
          const T* image = in + n * cells * channels;
          for (std::int64_t cell = 0; cell < cells; ++cell) {
            for (std::int64_t ch = 0; ch < channels; ++ch) {
              sum[ch] += static_cast<C>(image[cell * channels + ch]);
            }
          }
          // An empty image averages to NaN, like NumPy's mean of nothing.
          for (std::int64_t ch = 0; ch < channels; ++ch) {
            out[n * channels + ch] = convert_element<T>(sum[ch] / static_cast<C>(cells));
          }
        }
      });
    }
  });
}

}  // namespace

// inputs: dy (N, OH, OW, C), x (N, H, W, C); output dx (N, H, W, C).
void max_pool_backward_kernel(const KernelContext& c) {
  const Window2D g = pool_geometry(c);
  const bool relu_masked = op_attrs<OpKind::max_pool2d_backward>(c.attrs).relu_masked;
  const bool empty = shape_numel(g.input_shape()) == 0 || shape_numel(g.output_shape()) == 0;
  const DType dtype = c.inputs[0].dtype();
  // f64 and f16 keep the loops, the reference this path is tested against.
  const bool disjoint = windows_are_disjoint(g) && !empty && onednn_float_kernels(dtype);
  if (!disjoint) pool_kernel(c);
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      const T* dy = static_cast<const T*>(c.inputs[0].raw_data());
      const T* x = static_cast<const T*>(c.inputs[1].raw_data());
      T* dx = static_cast<T*>(c.outputs[0].raw_data());
      if (disjoint) {
        max_pool_backward_disjoint(g, dy, x, dx, relu_masked);
      } else if (relu_masked) {
        mask_by_positive(x, dx, c.inputs[1].numel());
      }
    }
  });
}

#if defined(__x86_64__)
namespace {

// Whether output row oh of `g` is 2x2 windows of stride 2 lying whole inside the image, for
// which the AVX-512 loops here take the four cells at fixed offsets.
bool whole_2x2_row(const Window2D& g, std::int64_t oh) {
  return g.k_h == 2 && g.k_w == 2 && g.strides[0] == 2 && g.strides[1] == 2 &&
         g.pad_before[0] == 0 && g.pad_before[1] == 0 && 2 * oh + 2 <= g.in_h &&
         2 * g.out_w <= g.in_w;
}

// The four cells of the 2x2 window `ow` of a whole_2x2_row at channel ch, as offsets into the
// band of its two input rows ((W, C) each) in scan order, and the lanes of the 16 channels from
// ch on that exist.
struct Window2x2Lanes {
  std::int64_t cells[4];
  __mmask16 lanes;
};
Window2x2Lanes window_2x2_lanes(const Window2D& g, std::int64_t ow, std::int64_t ch) {
  const std::int64_t channels = g.in_c;
  const std::int64_t row = g.in_w * channels;
  const std::int64_t left = 2 * ow * channels + ch;
  return {{left, left + channels, row + left, row + left + channels}, lane_mask(channels - ch)};
}

// max_pool_backward_band_loop's result for f32 2x2 windows of stride 2 whose band lies whole
// inside the image, on AVX-512, 16 channels of one window at a time: the loop's per-window
// overhead (a third of its time on the main job's first pooling, whose windows have 32
// channels) goes, which matters where the band is used at once from the cache
// (pooled_conv2d_backward_filter). Each of cells 1-3 replaces the best so far where strictly
// larger (an ordered comparison: NaN never replaces), so the winner is the last cell that did,
// or cell 0: the loop's first maximum in scan order.
[[gnu::target("avx512f")]] void max_pool_2x2_backward_band(const Window2D& g, const float* dy,
                                                           const float* x, float* dx_band,
                                                           bool relu_masked, std::int64_t n,
                                                           std::int64_t oh) {
  const std::int64_t channels = g.in_c;
  const std::int64_t row = g.in_w * channels;                          // elements of one input row
  const float* x_band = x + (n * g.in_h + 2 * oh) * row;               // (2, W, C)
  const float* dy_row = dy + (n * g.out_h + oh) * g.out_w * channels;  // (OW, C)
  for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
    for (std::int64_t ch = 0; ch < channels; ch += kAvx512Lanes) {
      const auto [cells, lanes] = window_2x2_lanes(g, ow, ch);
      __m512 best = _mm512_maskz_loadu_ps(lanes, x_band + cells[0]);
      __mmask16 replaced[4] = {0, 0, 0, 0};
      for (int k = 1; k < 4; ++k) {
        const __m512 value = _mm512_maskz_loadu_ps(lanes, x_band + cells[k]);
        replaced[k] = _mm512_cmp_ps_mask(value, best, _CMP_GT_OQ);
        best = _mm512_mask_mov_ps(best, replaced[k], value);
      }
      // Lanes whose gradient has gone to a cell (or, relu-masked, goes to none).
      __mmask16 placed =
          relu_masked
              ? static_cast<__mmask16>(~_mm512_cmp_ps_mask(best, _mm512_setzero_ps(), _CMP_GT_OQ))
              : 0;
      const __m512 gradient = _mm512_maskz_loadu_ps(lanes, dy_row + ow * channels + ch);
      for (int k = 3; k >= 0; --k) {
        const auto wins = static_cast<__mmask16>((k == 0 ? 0xFFFF : replaced[k]) & ~placed);
        _mm512_mask_storeu_ps(dx_band + cells[k], lanes, _mm512_maskz_mov_ps(wins, gradient));
        placed |= wins;
      }
    }
  }
  // The columns past the last window (an odd width): no window covers them.
  for (std::int64_t band_row = 0; band_row < 2; ++band_row) {
    std::fill(dx_band + band_row * row + 2 * g.out_w * channels, dx_band + (band_row + 1) * row,
              0.0f);
  }
}

}  // namespace
#endif

void max_pool_backward_band(const Window2D& g, const float* dy, const float* x, float* dx_band,
                            bool relu_masked, std::int64_t n, std::int64_t oh, float* best,
                            std::int32_t* winner) {
#if defined(__x86_64__)
  if (cpu_has_avx512() && whole_2x2_row(g, oh))
    return max_pool_2x2_backward_band(g, dy, x, dx_band, relu_masked, n, oh);
#endif
  max_pool_backward_band_loop(g, dy, x, dx_band, relu_masked, n, oh, best, winner);
}

namespace {

// The window cell kh * KW + kw of input cell (ih, iw) in the window of output cell (oh, ow).
std::int32_t window_cell(const Window2D& g, std::int64_t oh, std::int64_t ow, std::int64_t ih,
                         std::int64_t iw) {
  return static_cast<std::int32_t>((ih - (oh * g.strides[0] - g.pad_before[0])) * g.k_w +
                                   (iw - (ow * g.strides[1] - g.pad_before[1])));
}

#if defined(__x86_64__)
// max_pool_band_with_winners for a whole_2x2_row, 16 channels of one window at a time: each of
// cells 1-3 replaces the best so far where strictly larger (an ordered comparison: NaN never
// replaces), its index with it, so the first maximum in scan order wins, as
// max_pool_2x2_backward_band picks it.
[[gnu::target("avx512f")]] void max_pool_2x2_band_with_winners(const Window2D& g,
                                                               const float* x_band, bool relu,
                                                               float* pooled_row,
                                                               std::int8_t* winners_row) {
  const std::int64_t channels = g.in_c;
  for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
    for (std::int64_t ch = 0; ch < channels; ch += kAvx512Lanes) {
      const auto [cells, lanes] = window_2x2_lanes(g, ow, ch);
      __m512 best = _mm512_maskz_loadu_ps(lanes, x_band + cells[0]);
      __m512i winner = _mm512_setzero_si512();
      for (int k = 1; k < 4; ++k) {
        const __m512 value = _mm512_maskz_loadu_ps(lanes, x_band + cells[k]);
        const __mmask16 larger = _mm512_cmp_ps_mask(value, best, _CMP_GT_OQ);
        best = _mm512_mask_mov_ps(best, larger, value);
        winner = _mm512_mask_mov_epi32(winner, larger, _mm512_set1_epi32(k));
      }
      if (relu) {
        const __mmask16 positive = _mm512_cmp_ps_mask(best, _mm512_setzero_ps(), _CMP_GT_OQ);
        winner = _mm512_mask_mov_epi32(_mm512_set1_epi32(-1), positive, winner);
      }
      _mm512_mask_storeu_ps(pooled_row + ow * channels + ch, lanes, best);
      _mm512_mask_cvtepi32_storeu_epi8(winners_row + ow * channels + ch, lanes, winner);
    }
  }
}

// winners_backward_band for a whole_2x2_row, 16 channels of one window at a time: each of the
// four cells gets dy in the lanes it won and 0 in the others, one store each.
[[gnu::target("avx512f")]] void winners_2x2_backward_band(const Window2D& g, const float* dy_row,
                                                          const std::int8_t* winners_row,
                                                          float* dx_band) {
  const std::int64_t channels = g.in_c;
  for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
    for (std::int64_t ch = 0; ch < channels; ch += kAvx512Lanes) {
      const auto [cells, lanes] = window_2x2_lanes(g, ow, ch);
      const std::int8_t* winners = winners_row + ow * channels + ch;
      // The lanes' winners, -1 (none) past the last channel.
      std::int8_t partial[kAvx512Lanes];
      if (lanes != 0xFFFF) {
        std::fill(std::begin(partial), std::end(partial), std::int8_t{-1});
        std::copy_n(winners, channels - ch, partial);
        winners = partial;
      }
      const __m512i winner =
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(winners)));
      const __m512 gradient = _mm512_maskz_loadu_ps(lanes, dy_row + ow * channels + ch);
      for (int k = 0; k < 4; ++k) {
        const __mmask16 won = _mm512_cmpeq_epi32_mask(winner, _mm512_set1_epi32(k));
        _mm512_mask_storeu_ps(dx_band + cells[k], lanes, _mm512_maskz_mov_ps(won, gradient));
      }
    }
  }
}
#endif

}  // namespace

namespace {

// max_pool_band_with_winners's loop for any floating T, compared in its compute type: the
// pooled cells keep the best so far and `winner` (C,) its cell, and the loops over channels
// choose without branches, so they vectorise, as max_pool_row's do.
template <typename T>
TANDEM_VECTOR_CLONES void max_pool_band_with_winners_loop(const Window2D& g, const T* x_band,
                                                          bool relu, std::int64_t oh, T* pooled_row,
                                                          std::int8_t* winners_row,
                                                          std::int32_t* __restrict winner) {
  using C = compute_type_t<T>;
  const std::int64_t channels = g.in_c;
  const std::int64_t row = g.in_w * channels;
  const auto [top, bottom] = window_span(g, 0, oh);
  for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
    const auto [left, right] = window_span(g, 1, ow);
    T* __restrict best = pooled_row + ow * channels;
    const T* __restrict first = x_band + left * channels;
    const std::int32_t first_cell = window_cell(g, oh, ow, top, left);
    for (std::int64_t ch = 0; ch < channels; ++ch) {
      best[ch] = first[ch];
      winner[ch] = first_cell;
    }
    for (std::int64_t ih = top; ih < bottom; ++ih) {
      for (std::int64_t iw = ih == top ? left + 1 : left; iw < right; ++iw) {
        const T* __restrict x_cell = x_band + (ih - top) * row + iw * channels;
        const std::int32_t cell = window_cell(g, oh, ow, ih, iw);
        for (std::int64_t ch = 0; ch < channels; ++ch) {
          winner[ch] = keep_larger(best[ch], x_cell[ch]) ? cell : winner[ch];
        }
      }
    }
    std::int8_t* __restrict winners = winners_row + ow * channels;
    for (std::int64_t ch = 0; ch < channels; ++ch) {
      const bool passes = !relu || static_cast<C>(best[ch]) > C(0);
      winners[ch] = static_cast<std::int8_t>(passes ? winner[ch] : -1);
    }
  }
}

}  // namespace

void max_pool_band_with_winners(const Window2D& g, const float* x_band, bool relu, std::int64_t oh,
                                float* pooled_row, std::int8_t* winners_row, std::int32_t* winner) {
#if defined(__x86_64__)
  if (cpu_has_avx512() && whole_2x2_row(g, oh))
    return max_pool_2x2_band_with_winners(g, x_band, relu, pooled_row, winners_row);
#endif
  max_pool_band_with_winners_loop(g, x_band, relu, oh, pooled_row, winners_row, winner);
}

void winners_backward_band(const Window2D& g, const float* dy, const std::int8_t* winners,
                           float* dx_band, std::int64_t n, std::int64_t oh) {
  const std::int64_t channels = g.in_c;
  const std::int64_t row = g.in_w * channels;
  const auto [top, bottom] = window_span(g, 0, oh);
  const std::int64_t offset = (n * g.out_h + oh) * g.out_w * channels;
  zero_uncovered_columns(g, oh, dx_band);
#if defined(__x86_64__)
  if (cpu_has_avx512() && whole_2x2_row(g, oh))
    return winners_2x2_backward_band(g, dy + offset, winners + offset, dx_band);
#endif
  for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
    const auto [left, right] = window_span(g, 1, ow);
    for (std::int64_t ih = top; ih < bottom; ++ih) {
      for (std::int64_t iw = left; iw < right; ++iw) {
        const std::int32_t cell = window_cell(g, oh, ow, ih, iw);
        for (std::int64_t ch = 0; ch < channels; ++ch) {
          const std::int64_t at = offset + ow * channels + ch;
          dx_band[(ih - top) * row + iw * channels + ch] = winners[at] == cell ? dy[at] : 0.0f;
        }
      }
    }
  }
}

void max_pool_with_winners(const Window2D& g, const Tensor& x, bool relu, const Tensor& pooled,
                           const Tensor& winners) {
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      const auto* x_data = static_cast<const T*>(x.raw_data());  // (N, H, W, C)
      auto* pooled_data = static_cast<T*>(pooled.raw_data());    // (N, OH, OW, C)
      auto* winners_data = static_cast<std::int8_t*>(winners.raw_data());
      const std::int64_t row = g.in_w * g.in_c;
      parallel_for(g.batch * g.out_h, g.out_w * g.k_h * g.k_w * g.in_c,
                   [&](std::int64_t begin, std::int64_t end) {
                     std::vector<std::int32_t> winner(static_cast<std::size_t>(g.in_c));  // (C,)
                     for (std::int64_t unit = begin; unit < end; ++unit) {
                       const std::int64_t n = unit / g.out_h;
                       const std::int64_t oh = unit % g.out_h;
                       const std::int64_t at = unit * g.out_w * g.in_c;
                       const T* band = x_data + (n * g.in_h + window_span(g, 0, oh).first) * row;
                       if constexpr (std::is_same_v<T, float>) {
                         max_pool_band_with_winners(g, band, relu, oh, pooled_data + at,
                                                    winners_data + at, winner.data());
                       } else {
                         max_pool_band_with_winners_loop(g, band, relu, oh, pooled_data + at,
                                                         winners_data + at, winner.data());
                       }
                     }
                   });
    }
  });
}

void winners_backward(const Window2D& g, const Tensor& dy, const Tensor& winners,
                      const Tensor& dx) {
  visit_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      using C = compute_type_t<T>;
      const auto* dy_data = static_cast<const T*>(dy.raw_data());  // (N, OH, OW, C)
      const auto* winner_data = static_cast<const std::int8_t*>(winners.raw_data());
      auto* dx_data = static_cast<T*>(dx.raw_data());  // (N, H, W, C)
      const std::int64_t image = g.in_h * g.in_w * g.in_c;
      const std::int64_t pooled_image = g.out_h * g.out_w * g.in_c;
      parallel_for(g.batch, pooled_image * 2, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
          T* dx_image = dx_data + n * image;
          std::fill(dx_image, dx_image + image, T(0));
          for (std::int64_t cell = 0; cell < pooled_image; ++cell) {
            const std::int8_t winner = winner_data[n * pooled_image + cell];
            if (winner < 0) continue;
            const std::int64_t ch = cell % g.in_c;
            const std::int64_t ow = cell / g.in_c % g.out_w;
            const std::int64_t oh = cell / g.in_c / g.out_w;
            const std::int64_t ih = oh * g.strides[0] - g.pad_before[0] + winner / g.k_w;
            const std::int64_t iw = ow * g.strides[1] - g.pad_before[1] + winner % g.k_w;
            if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
            T& target = dx_image[(ih * g.in_w + iw) * g.in_c + ch];
            target = T(static_cast<C>(target) + static_cast<C>(dy_data[n * pooled_image + cell]));
          }
        }
      });
    }
  });
}

void register_pool_kernels(KernelTable& table) {
  const std::uint32_t floating = floating_dtypes_mask();
  for (OpKind kind : {OpKind::max_pool2d, OpKind::avg_pool2d, OpKind::avg_pool2d_backward})
    table.set(kind, pool_kernel, floating);
  table.set(OpKind::max_pool2d_backward, max_pool_backward_kernel, floating);
  table.set(OpKind::global_avg_pool2d, global_avg_pool_kernel, floating);
}

}  // namespace tandem::cpu
