// CPU kernels for reductions and broadcasting. Every reduction is brought into the form
// out[a, b] = reduce_r in[a, r, b] (one contiguous block of reduced axes; other patterns are
// transposed into it first), which keeps the inner loop contiguous for the common cases: loss
// means (B = 1), bias gradients (A = 1) and spatial pooling in NHWC (A = N, B = C).
// Large f32/bf16 reductions go to oneDNN's reduction primitive.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/primitive_cache.h"
#include "backend/cpu/strided_copy.h"
#include "ops/op_attrs.h"
#include "tandem/runtime.h"

namespace tandem::cpu {
namespace {

constexpr std::int64_t kOneDnnMinElements = 65536;

struct ReductionBlock {
  std::int64_t outer = 1;    // A
  std::int64_t reduced = 1;  // R
  std::int64_t inner = 1;    // B
};

// The (A, R, B) form of reducing `axes` of `shape`, or nothing when the reduced axes (ignoring
// unit axes) are not one contiguous block.
std::optional<ReductionBlock> contiguous_block(const Shape& shape,
                                               const std::vector<std::int64_t>& axes) {
  ReductionBlock block;
  int phase = 0;  // 0: before the reduced block, 1: inside it, 2: after it
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const bool reduced =
        std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) != axes.end();
    if (shape[i] == 1) continue;
    if (reduced) {
      if (phase == 2) return std::nullopt;
      phase = 1;
      block.reduced *= shape[i];
    } else {
      if (phase == 1) phase = 2;
      (phase == 0 ? block.outer : block.inner) *= shape[i];
    }
  }
  return block;
}

enum class Reduction { sum, mean, max };

template <typename T>
void reduce_block(const T* in, T* out, const ReductionBlock& block, Reduction reduction) {
  using C = compute_type_t<T>;
  const std::int64_t A = block.outer, R = block.reduced, B = block.inner;
  // Divides rather than multiplies by 1/R so integer means truncate like TensorFlow's.
  const C divisor = reduction == Reduction::mean ? static_cast<C>(R) : C(1);
  if (B == 1) {
    parallel_for(A, R, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t a = begin; a < end; ++a) {
        const T* row = in + a * R;
        C accumulator = reduction == Reduction::max ? static_cast<C>(row[0]) : C(0);
        if (reduction == Reduction::max) {
          for (std::int64_t r = 1; r < R; ++r)
            accumulator = std::max(accumulator, static_cast<C>(row[r]));
        } else {
          for (std::int64_t r = 0; r < R; ++r)
            accumulator += static_cast<C>(row[r]);
        }
        out[a] = convert_element<T>(C(accumulator / divisor));
      }
    });
    return;
  }
  // Split the B axis across threads when A alone gives too little parallel work.
  const std::int64_t chunk = 256;
  const std::int64_t chunks = (B + chunk - 1) / chunk;
  parallel_for(A * chunks, R * std::min(B, chunk), [&](std::int64_t begin, std::int64_t end) {
    std::vector<C> accumulator(static_cast<std::size_t>(std::min(B, chunk)));
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t a = item / chunks;
      const std::int64_t b0 = (item % chunks) * chunk;
      const std::int64_t width = std::min(chunk, B - b0);
      const T* base = in + a * R * B + b0;
      for (std::int64_t b = 0; b < width; ++b)
        accumulator[b] = reduction == Reduction::max ? static_cast<C>(base[b]) : C(0);
      for (std::int64_t r = reduction == Reduction::max ? 1 : 0; r < R; ++r) {
        const T* row = base + r * B;
        if (reduction == Reduction::max) {
          for (std::int64_t b = 0; b < width; ++b)
            accumulator[b] = std::max(accumulator[b], static_cast<C>(row[b]));
        } else {
          for (std::int64_t b = 0; b < width; ++b)
            accumulator[b] += static_cast<C>(row[b]);
        }
      }
      T* destination = out + a * B + b0;
      for (std::int64_t b = 0; b < width; ++b)
        destination[b] = convert_element<T>(C(accumulator[b] / divisor));
    }
  });
}

// Moves the reduced axes to the end (a copy) so any reduction becomes (A, R, 1).
Tensor reduced_axes_last(const Tensor& x, const std::vector<std::int64_t>& axes,
                         ReductionBlock& block) {
  std::vector<std::int64_t> permutation;
  block = {};
  for (std::int64_t i = 0; i < x.rank(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) {
      permutation.push_back(i);
      block.outer *= x.shape()[static_cast<std::size_t>(i)];
    }
  }
  for (std::int64_t axis : axes) {
    permutation.push_back(axis);
    block.reduced *= x.shape()[static_cast<std::size_t>(axis)];
  }
  Shape permuted_shape;
  std::vector<std::int64_t> source_strides;
  const std::vector<std::int64_t> strides = dense_strides(x.shape());
  for (std::int64_t axis : permutation) {
    permuted_shape.push_back(x.shape()[static_cast<std::size_t>(axis)]);
    source_strides.push_back(strides[static_cast<std::size_t>(axis)]);
  }
  Tensor permuted = Tensor::empty(permuted_shape, x.dtype());
  strided_copy(permuted.raw_data(), dense_strides(permuted_shape), x.raw_data(), source_strides,
               permuted_shape, dtype_size(x.dtype()));
  return permuted;
}

// oneDNN's reduction, where it is faster than the loops. Measured on 2 threads (2026-12-02,
// oneDNN 2.6.3): it is several times faster for long runs over trailing axes (all of a
// (21632, 32) tensor: 78 us against the loops' 340, which sum a single output on one thread;
// the rows of (1024, 1024): 124 us against 241), but for a leading axis it has only its
// reference implementation (the columns of (1024, 1024): 7.3 ms against 155 us), and for short
// runs it is slow too (the rows of (21632, 32): 1.5 ms against 54 us).
struct OneDnnReduction {
  std::optional<dnnl::reduction> primitive;  // empty: only oneDNN's reference implementation
  dnnl::memory::desc src;
  dnnl::memory::desc dst;
};

constexpr std::int64_t kOneDnnMinRun = 1024;  // reduced elements per output

OneDnnReduction build_reduction(const Shape& shape, const std::vector<std::int64_t>& axes,
                                DType dtype, Reduction reduction) {
  Shape kept_shape = shape;
  for (std::int64_t axis : axes)
    kept_shape[static_cast<std::size_t>(axis)] = 1;
  OneDnnReduction result{std::nullopt, plain_desc(shape, dtype), plain_desc(kept_shape, dtype)};
  const dnnl::algorithm algorithm = reduction == Reduction::sum    ? dnnl::algorithm::reduction_sum
                                    : reduction == Reduction::mean ? dnnl::algorithm::reduction_mean
                                                                   : dnnl::algorithm::reduction_max;
  const auto pd = dnnl::reduction::primitive_desc(
      dnnl::reduction::desc(algorithm, result.src, result.dst, 0.0f, 0.0f), onednn_engine());
  if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) result.primitive.emplace(pd);
  return result;
}

// Runs the reduction on oneDNN and returns true, or returns false where the loops should.
bool onednn_reduction(const KernelContext& c, Reduction reduction, const ReductionBlock& block) {
  if (block.inner != 1 || block.reduced < kOneDnnMinRun) return false;
  static PrimitiveCache<OneDnnReduction> cache(128);
  const Tensor& x = c.inputs[0];
  const std::vector<std::int64_t> axes = read_attrs<ReduceAttrs>(c.attrs).axes;
  PrimitiveKey key{static_cast<std::int64_t>(x.dtype()), static_cast<std::int64_t>(reduction)};
  key.insert(key.end(), x.shape().begin(), x.shape().end());
  key.push_back(-1);
  key.insert(key.end(), axes.begin(), axes.end());
  const auto entry =
      cache.get(key, [&] { return build_reduction(x.shape(), axes, x.dtype(), reduction); });
  if (!entry->primitive) return false;
  execute(*entry->primitive,
          {{DNNL_ARG_SRC, wrap(entry->src, x)}, {DNNL_ARG_DST, wrap(entry->dst, c.outputs[0])}});
  return true;
}

template <Reduction kReduction>
void reduce_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const std::vector<std::int64_t> axes = read_attrs<ReduceAttrs>(c.attrs).axes;
  Tensor source = x;
  std::optional<ReductionBlock> block = contiguous_block(x.shape(), axes);
  // oneDNN's reduction splits large sums across threads; deterministic mode keeps the loops,
  // where one thread sums each output element.
  if (block && onednn_float_kernels(x.dtype()) && x.numel() >= kOneDnnMinElements &&
      x.rank() <= DNNL_MAX_NDIMS && !deterministic() && onednn_reduction(c, kReduction, *block)) {
    return;
  }
  if (!block) {
    block.emplace();
    source = reduced_axes_last(x, axes, *block);
  }
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      reduce_block(static_cast<const T*>(source.raw_data()),
                   static_cast<T*>(c.outputs[0].raw_data()), *block, kReduction);
    }
  });
}

void argmax_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const auto axis = static_cast<std::size_t>(op_attrs<OpKind::argmax>(c.attrs).axis);
  ReductionBlock block;
  for (std::size_t i = 0; i < x.shape().size(); ++i) {
    (i < axis ? block.outer : i == axis ? block.reduced : block.inner) *= x.shape()[i];
  }
  std::int64_t* out = static_cast<std::int64_t*>(c.outputs[0].raw_data());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_type_t<T>;
    const T* in = static_cast<const T*>(x.raw_data());
    parallel_for(block.outer * block.inner, block.reduced,
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t item = begin; item < end; ++item) {
                     const std::int64_t a = item / block.inner;
                     const std::int64_t b = item % block.inner;
                     const T* column = in + a * block.reduced * block.inner + b;
                     std::int64_t best = 0;
                     C best_value = static_cast<C>(column[0]);
                     for (std::int64_t r = 1; r < block.reduced; ++r) {
                       const C value = static_cast<C>(column[r * block.inner]);
                       if (value > best_value) {  // first maximum wins, as in TensorFlow
                         best_value = value;
                         best = r;
                       }
                     }
                     out[item] = best;
                   }
                 });
  });
}

void broadcast_to_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  const std::size_t offset = y.shape().size() - x.shape().size();
  const std::vector<std::int64_t> input_strides = dense_strides(x.shape());
  std::vector<std::int64_t> source_strides(y.shape().size(), 0);
  for (std::size_t i = 0; i < x.shape().size(); ++i) {
    if (x.shape()[i] != 1) source_strides[i + offset] = input_strides[i];
  }
  strided_copy(y.raw_data(), dense_strides(y.shape()), x.raw_data(), source_strides, y.shape(),
               dtype_size(x.dtype()));
}

}  // namespace

void register_reduction_kernels(KernelTable& table) {
  const std::uint32_t numeric = all_dtypes_mask() & ~dtype_mask({DType::boolean});
  table.set(OpKind::sum, reduce_kernel<Reduction::sum>, numeric);
  table.set(OpKind::mean, reduce_kernel<Reduction::mean>, numeric);
  table.set(OpKind::max, reduce_kernel<Reduction::max>, numeric);
  table.set(OpKind::argmax, argmax_kernel, numeric);
  table.set(OpKind::broadcast_to, broadcast_to_kernel, all_dtypes_mask());
}

}  // namespace tandem::cpu
