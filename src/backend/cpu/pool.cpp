// CPU kernels for pooling. Max and average pooling in f32 and bf16 run on oneDNN's pooling
// primitives over NHWC tensors in place (pooling_max; pooling_avg_exclude_padding, which is
// TensorFlow's average); max pooling's backward recomputes the forward pass with a workspace to
// find each window's argmax, since the op gets x rather than saved indices. Primitives are
// cached per geometry. f64 and f16 (and empty tensors) run the templated loops below, which are
// also the reference the oneDNN path is tested against; global average pooling is one loop for
// every dtype (a memory-bound channel sum).
#include <optional>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/window_kernels.h"
#include "ops/op_attrs.h"

namespace tandem::cpu {
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

constexpr std::size_t kCacheCapacity = 64;

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
  // oneDNN rejects zero-sized tensors; the loops write the zeros (or nothing) they call for.
  const bool empty = shape_numel(g.input_shape()) == 0 || shape_numel(g.output_shape()) == 0;
  if ((dtype == DType::f32 || dtype == DType::bf16) && !empty) {
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

void register_pool_kernels(KernelTable& table) {
  const std::uint32_t floating = floating_dtypes_mask();
  for (OpKind kind : {OpKind::max_pool2d, OpKind::max_pool2d_backward, OpKind::avg_pool2d,
                      OpKind::avg_pool2d_backward}) {
    table.set(kind, pool_kernel, floating);
  }
  table.set(OpKind::global_avg_pool2d, global_avg_pool_kernel, floating);
}

}  // namespace tandem::cpu
