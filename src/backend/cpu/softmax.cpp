// CPU softmax and log-softmax, forward and backward: oneDNN's softmax_v2 primitives (accurate and
// log algorithms) for f32/bf16, numerically stable loops (the maximum is subtracted before exp)
// for f64/f16 that also serve as the reference.
#include <cmath>
#include <limits>
#include <optional>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/primitive_cache.h"
#include "ops/kernel_geometry.h"
#include "ops/op_attrs.h"

namespace tandem::cpu {
namespace {

bool is_log(OpKind kind) {
  return kind == OpKind::log_softmax || kind == OpKind::log_softmax_backward;
}

// ---- loops (f64, f16; the reference for the oneDNN path) ----
// Calls line(offset) for the start of every (outer, inner) line; its elements are `inner` apart.
template <typename Line>
void for_each_line(const AxisView& view, Line line) {
  parallel_for(view.outer * view.inner, view.length * 4, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t index = begin; index < end; ++index) {
      const std::int64_t outer = index / view.inner;
      const std::int64_t inner = index % view.inner;
      line(outer * view.length * view.inner + inner);
    }
  });
}

template <typename T>
void softmax_loops(const KernelContext& c, const AxisView& view) {
  using C = compute_type_t<T>;
  const T* x = static_cast<const T*>(c.inputs[0].raw_data());
  T* y = static_cast<T*>(c.outputs[0].raw_data());
  const std::int64_t stride = view.inner;
  const bool log_output = is_log(c.kind);
  for_each_line(view, [&](std::int64_t start) {
    const T* x_line = x + start;
    T* y_line = y + start;
    C max = -std::numeric_limits<C>::infinity();
    for (std::int64_t l = 0; l < view.length; ++l)
      max = std::max(max, static_cast<C>(x_line[l * stride]));
    C total = 0;
    for (std::int64_t l = 0; l < view.length; ++l)
      total += std::exp(static_cast<C>(x_line[l * stride]) - max);
    if (log_output) {
      const C log_total = max + std::log(total);
      for (std::int64_t l = 0; l < view.length; ++l) {
        y_line[l * stride] = convert_element<T>(static_cast<C>(x_line[l * stride]) - log_total);
      }
    } else {
      const C inverse_total = C(1) / total;
      for (std::int64_t l = 0; l < view.length; ++l) {
        y_line[l * stride] =
            convert_element<T>(std::exp(static_cast<C>(x_line[l * stride]) - max) * inverse_total);
      }
    }
  });
}

// softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - exp(y) sum(dy).
template <typename T>
void softmax_backward_loops(const KernelContext& c, const AxisView& view) {
  using C = compute_type_t<T>;
  const T* dy = static_cast<const T*>(c.inputs[0].raw_data());
  const T* y = static_cast<const T*>(c.inputs[1].raw_data());
  T* dx = static_cast<T*>(c.outputs[0].raw_data());
  const std::int64_t stride = view.inner;
  const bool log_output = is_log(c.kind);
  for_each_line(view, [&](std::int64_t start) {
    const T* dy_line = dy + start;
    const T* y_line = y + start;
    T* dx_line = dx + start;
    C total = 0;
    for (std::int64_t l = 0; l < view.length; ++l) {
      const C g = static_cast<C>(dy_line[l * stride]);
      total += log_output ? g : g * static_cast<C>(y_line[l * stride]);
    }
    for (std::int64_t l = 0; l < view.length; ++l) {
      const C g = static_cast<C>(dy_line[l * stride]);
      const C out = static_cast<C>(y_line[l * stride]);
      dx_line[l * stride] =
          convert_element<T>(log_output ? g - std::exp(out) * total : out * (g - total));
    }
  });
}

// ---- oneDNN (f32, bf16) ----
struct OneDnnSoftmax {
  std::optional<dnnl::primitive> primitive;  // empty: oneDNN has no implementation here
  dnnl::memory::desc desc;
};

OneDnnSoftmax build_softmax(bool backward, bool log_output, const AxisView& view, DType dtype) {
  OneDnnSoftmax result;
  // A 2-D (outer, length) view where the axis is last picks oneDNN's fastest implementation.
  const Shape shape =
      view.inner == 1 ? Shape{view.outer, view.length} : Shape{view.outer, view.length, view.inner};
  result.desc = plain_desc(shape, dtype);
  const dnnl::algorithm algorithm =
      log_output ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
  const dnnl::softmax_v2_forward::primitive_desc forward_pd(
      dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_training, algorithm, result.desc,
                                     result.desc, 1),
      onednn_engine(), /*allow_empty=*/true);
  if (!forward_pd) return result;
  if (!backward) {
    result.primitive.emplace(dnnl::softmax_v2_forward(forward_pd));
    return result;
  }
  const dnnl::softmax_v2_backward::primitive_desc backward_pd(
      dnnl::softmax_v2_backward::desc(algorithm, result.desc, result.desc, result.desc, 1),
      onednn_engine(), forward_pd, /*allow_empty=*/true);
  if (backward_pd) result.primitive.emplace(dnnl::softmax_v2_backward(backward_pd));
  return result;
}

// Returns false when oneDNN has no implementation and the loops must run.
bool softmax_onednn(const KernelContext& c, const AxisView& view, bool backward) {
  static PrimitiveCache<OneDnnSoftmax> cache(128);
  const bool log_output = is_log(c.kind);
  const DType dtype = c.inputs[0].dtype();
  const PrimitiveKey key{backward,   log_output,  static_cast<std::int64_t>(dtype),
                         view.outer, view.length, view.inner};
  const auto entry =
      cache.get(key, [&] { return build_softmax(backward, log_output, view, dtype); });
  if (!entry->primitive) return false;
  const dnnl::memory::desc& desc = entry->desc;
  if (backward) {
    execute(*entry->primitive, {{DNNL_ARG_DIFF_DST, wrap(desc, c.inputs[0])},
                                {DNNL_ARG_DST, wrap(desc, c.inputs[1])},
                                {DNNL_ARG_DIFF_SRC, wrap(desc, c.outputs[0])}});
  } else {
    execute(*entry->primitive,
            {{DNNL_ARG_SRC, wrap(desc, c.inputs[0])}, {DNNL_ARG_DST, wrap(desc, c.outputs[0])}});
  }
  return true;
}

bool use_onednn(const Tensor& x) {
  return onednn_float_kernels(x.dtype()) && x.numel() > 0;
}

template <bool kBackward>
void softmax_kernel(const KernelContext& c) {
  const Tensor& out = c.outputs[0];  // x, y, dy and dx all share its shape
  if (out.numel() == 0) return;
  const AxisView view = axis_view(out, read_attrs<AxisAttrs>(c.attrs).axis);
  if (use_onednn(out) && softmax_onednn(c, view, kBackward)) return;
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      if constexpr (kBackward) {
        softmax_backward_loops<T>(c, view);
      } else {
        softmax_loops<T>(c, view);
      }
    }
  });
}

}  // namespace

void register_softmax_kernels(KernelTable& table) {
  using K = OpKind;
  const std::uint32_t floating = floating_dtypes_mask();
  table.set(K::softmax, softmax_kernel<false>, floating);
  table.set(K::log_softmax, softmax_kernel<false>, floating);
  table.set(K::softmax_backward, softmax_kernel<true>, floating);
  table.set(K::log_softmax_backward, softmax_kernel<true>, floating);
}

}  // namespace tandem::cpu
