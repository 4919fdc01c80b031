// CPU matmul: oneDNN's matmul primitive for f32/bf16 (bias fused, transposes expressed through
// the strides of the memory descriptors, so nothing is copied, except where AMX bf16 products
// get zero-padded copies: onednn_matmul_extents), templated loops for the other
// dtypes, which are also the reference the oneDNN path is tested against.
#include <optional>
#include <type_traits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/primitive_cache.h"
#include "backend/cpu/strided_copy.h"
#include "ops/kernel_geometry.h"
#include "tandem/runtime.h"

namespace tandem::cpu {
namespace {

// The matrices B holds: one per batch entry, or one for all.
std::int64_t b_entries(const MatmulShape& s) {
  return s.b_batched ? s.batch : 1;
}

// B stored transposed, (entries, N, K), copied into (entries, K, N) rows.
template <typename T>
void transposed_b_rows(const MatmulShape& s, const T* b, T* rows) {
  const std::int64_t entries = b_entries(s);
  for (std::int64_t e = 0; e < entries; ++e) {
    for (std::int64_t j = 0; j < s.n; ++j) {
      for (std::int64_t p = 0; p < s.k; ++p)
        rows[(e * s.k + p) * s.n + j] = b[(e * s.n + j) * s.k + p];
    }
  }
}

// ---- loops (f64, f16, integers; the reference for the oneDNN path) ----
template <typename T>
void matmul_loops(const KernelContext& c, const MatmulShape& s) {
  // Integers accumulate in 64 bits, so an i32 or u8 product overflows only when its result does.
  using Acc = std::conditional_t<std::is_integral_v<T>, std::int64_t, compute_type_t<T>>;
  const T* a = static_cast<const T*>(c.inputs[0].raw_data());
  const T* b = static_cast<const T*>(c.inputs[1].raw_data());
  const T* bias = s.has_bias ? static_cast<const T*>(c.inputs[2].raw_data()) : nullptr;
  T* out = static_cast<T*>(c.outputs[0].raw_data());
  // Element (i, p) of op(A) sits at i * a_row_stride + p * a_depth_stride of its batch entry.
  const std::int64_t a_row_stride = s.transpose_a ? 1 : s.k;
  const std::int64_t a_depth_stride = s.transpose_a ? s.m : 1;
  const std::int64_t a_batch_stride = s.m * s.k;
  const std::int64_t b_batch_stride = s.b_batched ? s.k * s.n : 0;
  // A transposed B is first copied into (K, N) rows, so the inner loop below reads it
  // contiguously (deterministic mode runs every f32 product here); each sum still adds its
  // terms in the same order.
  std::vector<T> b_rows;
  if (s.transpose_b) {
    b_rows.resize(static_cast<std::size_t>(b_entries(s) * s.k * s.n));
    transposed_b_rows(s, b, b_rows.data());
    b = b_rows.data();
  }
  parallel_for(s.batch * s.m, s.k * s.n, [&](std::int64_t begin, std::int64_t end) {
    std::vector<Acc> row(static_cast<std::size_t>(s.n));  // (N,)
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t entry = r / s.m;
      const std::int64_t i = r % s.m;
      const T* a_entry = a + entry * a_batch_stride;
      const T* b_entry = b + entry * b_batch_stride;
      for (std::int64_t j = 0; j < s.n; ++j)
        row[j] = bias ? static_cast<Acc>(bias[j]) : Acc(0);
      for (std::int64_t p = 0; p < s.k; ++p) {
        const Acc a_value = static_cast<Acc>(a_entry[i * a_row_stride + p * a_depth_stride]);
        const T* b_row = b_entry + p * s.n;
        for (std::int64_t j = 0; j < s.n; ++j)
          row[j] += a_value * static_cast<Acc>(b_row[j]);
      }
      T* out_row = out + r * s.n;
      for (std::int64_t j = 0; j < s.n; ++j) {
        // A fused relu as the relu kernel has it, before rounding to T (they commute); after a
        // fused residual, which comes first, add_residual applies it.
        const bool relu = s.fused_relu && !s.fused_add;
        const Acc value = relu ? (row[j] > Acc(0) ? row[j] : Acc(0)) : row[j];
        out_row[j] = convert_element<T>(value);
      }
    }
  });
}

// ---- oneDNN (f32, bf16) ----
struct OneDnnMatmul {
  std::optional<dnnl::matmul> primitive;  // empty: oneDNN has no implementation for this case
  dnnl::memory::desc a_desc;
  dnnl::memory::desc b_desc;
  dnnl::memory::desc bias_desc;
  dnnl::memory::desc out_desc;
  // A fused residual oneDNN could not take as a post-op (as ConvForward::residual_after).
  bool residual_after = false;
  // K and N as oneDNN computes them (onednn_matmul_extents): where larger, A, B and the bias are
  // given padded with zeros and the result is copied out of a padded buffer.
  MatmulExtents extents{};
};

// What matmul_onednn keeps for a compiled node (KernelContext::state): the entry it looked up by
// `key`, and the primitive's arguments on the node's buffers.
struct MatmulState final : KernelState {
  PrimitiveKey key;
  std::shared_ptr<const OneDnnMatmul> entry;
  PrimitiveArguments args;
};

// The strides of a (batch, rows, cols) view of a stored operand; `transposed` reads the stored
// (batch, cols, rows) matrix through swapped strides.
dnnl::memory::dims matrix_strides(std::int64_t rows, std::int64_t cols, bool transposed) {
  return transposed ? dnnl::memory::dims{rows * cols, 1, rows}
                    : dnnl::memory::dims{rows * cols, cols, 1};
}

dnnl::memory::desc matrix_desc(std::int64_t batch, std::int64_t rows, std::int64_t cols,
                               bool transposed, dnnl::memory::data_type type) {
  return dnnl::memory::desc({batch, rows, cols}, type, matrix_strides(rows, cols, transposed));
}

OneDnnMatmul build_matmul(const MatmulShape& s, DType dtype) {
  const dnnl::memory::data_type type = *onednn_data_type(dtype);
  OneDnnMatmul result;
  result.extents = onednn_matmul_extents(s.k, s.n, dtype);
  const MatmulExtents& padded = result.extents;
  // A padded operand is a copy in plain rows.
  const bool a_copied = padded.k != s.k;
  const bool b_copied = padded.k != s.k || padded.n != s.n;
  result.a_desc = matrix_desc(s.batch, s.m, padded.k, s.transpose_a && !a_copied, type);
  result.b_desc = matrix_desc(b_entries(s), padded.k, padded.n, s.transpose_b && !b_copied, type);
  result.out_desc = matrix_desc(s.batch, s.m, padded.n, false, type);
  if (s.has_bias) result.bias_desc = matrix_desc(1, 1, padded.n, false, type);
  const dnnl::matmul::desc desc =
      s.has_bias
          ? dnnl::matmul::desc(result.a_desc, result.b_desc, result.bias_desc, result.out_desc)
          : dnnl::matmul::desc(result.a_desc, result.b_desc, result.out_desc);
  // A fused residual and relu are post-ops.
  const auto build = [&](bool add, bool relu) {
    return dnnl::matmul::primitive_desc(
        desc, fused_post_ops(add ? Residual::operand : Residual::none, result.out_desc, relu),
        onednn_engine(), /*allow_empty=*/true);
  };
  // Every 16-bit product, the padded ones among them, adds its residual after the copy out.
  result.residual_after = s.fused_add && dtype != DType::f32;
  auto pd = build(s.fused_add && !result.residual_after, s.fused_relu && !result.residual_after);
  if (s.fused_add && !result.residual_after &&
      (!pd || is_reference_implementation(pd.impl_info_str()))) {
    result.residual_after = true;
    pd = build(false, false);
  }
  if (pd) result.primitive.emplace(pd);
  return result;
}

// Returns false when oneDNN cannot do this product and the loops must.
bool matmul_onednn(const KernelContext& c, const MatmulShape& s) {
  static PrimitiveCache<OneDnnMatmul> cache(256);
  const DType dtype = c.inputs[0].dtype();
  const std::int64_t flags = s.b_batched | s.transpose_a << 1 | s.transpose_b << 2 |
                             s.has_bias << 3 | s.fused_relu << 4 | s.fused_add << 5;
  PrimitiveKey key{static_cast<std::int64_t>(dtype), s.batch, s.m, s.k, s.n, flags};
  MatmulState eager;
  MatmulState* const kept = kept_state<MatmulState>(c);
  MatmulState& state = kept != nullptr ? *kept : eager;
  if (state.entry == nullptr || state.key != key) {
    state.entry = cache.get(key, [&] { return build_matmul(s, dtype); });
    state.key = std::move(key);
    state.args.clear();
  }
  const OneDnnMatmul& entry = *state.entry;
  if (!entry.primitive) return false;
  const MatmulExtents& padded = entry.extents;
  Tensor a = c.inputs[0];
  Tensor b = c.inputs[1];
  Tensor bias = s.has_bias ? c.inputs[2] : Tensor();
  Tensor out = c.outputs[0];
  if (padded.k != s.k) {
    a = zero_padded(a, {s.batch, s.m, s.k}, matrix_strides(s.m, s.k, s.transpose_a),
                    {s.batch, s.m, padded.k});
  }
  if (padded.k != s.k || padded.n != s.n) {
    const std::int64_t entries = b_entries(s);
    b = zero_padded(b, {entries, s.k, s.n}, matrix_strides(s.k, s.n, s.transpose_b),
                    {entries, padded.k, padded.n});
  }
  if (padded.n != s.n) {
    if (s.has_bias) bias = zero_padded(bias, {s.n}, {1}, {padded.n});
    out = Tensor::empty({s.batch, s.m, padded.n}, dtype, Device::cpu());
  }
  PrimitiveArguments& args = state.args;
  args.bind(DNNL_ARG_SRC, entry.a_desc, a);
  args.bind(DNNL_ARG_WEIGHTS, entry.b_desc, b);
  args.bind(DNNL_ARG_DST, entry.out_desc, out);
  if (s.has_bias) args.bind(DNNL_ARG_BIAS, entry.bias_desc, bias);
  if (s.fused_add && !entry.residual_after)
    args.bind(kResidualArg, entry.out_desc, c.inputs.back());
  args.execute(*entry.primitive);
  if (padded.n != s.n) copy_leading_columns(out, c.outputs[0]);
  if (entry.residual_after) add_residual(c.inputs.back(), c.outputs[0], s.fused_relu);
  return true;
}

}  // namespace

void matmul_kernel(const KernelContext& c) {
  const MatmulShape s = matmul_shape(c);
  if (c.outputs[0].numel() == 0) return;
  // Both ways write the product before they read the residual (oneDNN's GEMM, then its post-ops;
  // the loops, then add_residual): a residual in the output's own buffer (an integer product's
  // in-place input, run here on a CPU without VNNI) is kept aside first.
  if (s.fused_add && c.outputs[0].raw_data() == c.inputs.back().raw_data()) {
    std::vector<Tensor> inputs(c.inputs.begin(), c.inputs.end());
    inputs.back() = inputs.back().clone();
    return matmul_kernel(KernelContext{c.kind, inputs, c.outputs, c.attrs});
  }
  const DType dtype = c.inputs[0].dtype();
  // oneDNN rejects empty products (K = 0); the loops give the bias (or zeros) there. Its GEMM
  // may split K across threads (a thread-count-dependent sum), so deterministic mode uses the
  // loops, which give each output row to one thread.
  if (onednn_float_kernels(dtype) && s.k > 0 && !deterministic() && matmul_onednn(c, s)) {
    return;
  }
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) matmul_loops<T>(c, s);
  });
  if (s.fused_add) add_residual(c.inputs.back(), c.outputs[0], s.fused_relu);
}

void register_linalg_kernels(KernelTable& table) {
  table.set(OpKind::matmul, matmul_kernel,
            dtype_mask({DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64,
                        DType::u8}));
}

}  // namespace tandem::cpu
