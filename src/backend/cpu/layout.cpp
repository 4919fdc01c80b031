// CPU kernels for layout and type ops. Copies are type-agnostic (by element size) through
// strided_copy; cast converts element by element, f32 <-> bf16 on AVX-512 loops where it can.
#include "backend/cpu/avx512.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/strided_copy.h"
#include "ops/op_attrs.h"

namespace tandem::cpu {
namespace {

// The output aliases the input (OpDef output_aliases), so there is nothing to move.
void reshape_kernel(const KernelContext&) {}

void transpose_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const std::vector<std::int64_t> permutation = op_attrs<OpKind::transpose>(c.attrs).perm;
  const std::vector<std::int64_t> input_strides = dense_strides(x.shape());
  std::vector<std::int64_t> source_strides;  // input stride of each output axis
  for (std::int64_t axis : permutation)
    source_strides.push_back(input_strides[static_cast<std::size_t>(axis)]);
  const Tensor& y = c.outputs[0];
  strided_copy(y.raw_data(), dense_strides(y.shape()), x.raw_data(), source_strides, y.shape(),
               dtype_size(x.dtype()));
}

void concat_kernel(const KernelContext& c) {
  const Tensor& y = c.outputs[0];
  const auto axis = static_cast<std::size_t>(op_attrs<OpKind::concat>(c.attrs).axis);
  const std::vector<std::int64_t> output_strides = dense_strides(y.shape());
  const std::size_t element_size = dtype_size(y.dtype());
  std::int64_t offset = 0;
  for (const Tensor& x : c.inputs) {
    char* destination = static_cast<char*>(y.raw_data()) +
                        offset * output_strides[axis] * static_cast<std::int64_t>(element_size);
    strided_copy(destination, output_strides, x.raw_data(), dense_strides(x.shape()), x.shape(),
                 element_size);
    offset += x.shape()[axis];
  }
}

void slice_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  const std::vector<std::int64_t> begin = op_attrs<OpKind::slice>(c.attrs).begin;
  const std::vector<std::int64_t> input_strides = dense_strides(x.shape());
  std::int64_t start = 0;
  for (std::size_t i = 0; i < begin.size(); ++i)
    start += begin[i] * input_strides[i];
  const std::size_t element_size = dtype_size(x.dtype());
  strided_copy(
      y.raw_data(), dense_strides(y.shape()),
      static_cast<const char*>(x.raw_data()) + start * static_cast<std::int64_t>(element_size),
      input_strides, y.shape(), element_size);
}

void pad_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  const double value = op_attrs<OpKind::pad>(c.attrs).value;
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T fill = convert_element<T>(value);
    T* out = static_cast<T*>(y.raw_data());
    parallel_for(y.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i)
        out[i] = fill;
    });
  });
  const std::vector<std::int64_t> paddings = op_attrs<OpKind::pad>(c.attrs).paddings;
  const std::vector<std::int64_t> output_strides = dense_strides(y.shape());
  std::int64_t start = 0;
  for (std::size_t i = 0; i < output_strides.size(); ++i)
    start += paddings[2 * i] * output_strides[i];
  const std::size_t element_size = dtype_size(x.dtype());
  strided_copy(static_cast<char*>(y.raw_data()) + start * static_cast<std::int64_t>(element_size),
               output_strides, x.raw_data(), dense_strides(x.shape()), x.shape(), element_size);
}

#if defined(__x86_64__)
// f32 -> bf16 for whole vectors of 16, the bits of bfloat16(float) (dtype.h): round to nearest
// even on the integer bits, a NaN kept quiet. A mixed_bfloat16 step casts every weight so; the
// element loop (SSE2 in a portable build) took 2.1 ms for a 2.4 M-element filter on 2 threads.
[[gnu::target("avx512f")]] std::int64_t f32_to_bf16_avx512(const float* in, bfloat16* out,
                                                           std::int64_t n) {
  const __m512i rounding = _mm512_set1_epi32(0x7FFF);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i infinity = _mm512_set1_epi32(0x7F800000);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  std::int64_t i = 0;
  for (; i + kAvx512Lanes <= n; i += kAvx512Lanes) {
    const __m512i word = _mm512_loadu_si512(in + i);
    const __m512i upper = _mm512_srli_epi32(word, 16);
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(word, rounding), _mm512_and_si512(upper, one)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(word, magnitude), infinity);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtepi32_epi16(_mm512_mask_or_epi32(rounded, nan, upper, quiet)));
  }
  return i;
}

// bf16 -> f32 for whole vectors of 16: the bits shifted into the upper half.
[[gnu::target("avx512f")]] std::int64_t bf16_to_f32_avx512(const bfloat16* in, float* out,
                                                           std::int64_t n) {
  std::int64_t i = 0;
  for (; i + kAvx512Lanes <= n; i += kAvx512Lanes) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
  return i;
}
#endif

// Converts elements [0, n) of `in` into `out`; returns how many the AVX-512 loops did (the rest
// are the caller's).
template <typename From, typename To>
std::int64_t cast_vectorised(const From* in, To* out, std::int64_t n) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<From, float> && std::is_same_v<To, bfloat16>) {
    if (cpu_has_avx512()) return f32_to_bf16_avx512(in, out, n);
  } else if constexpr (std::is_same_v<From, bfloat16> && std::is_same_v<To, float>) {
    if (cpu_has_avx512()) return bf16_to_f32_avx512(in, out, n);
  }
#endif
  return 0;
}

void cast_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  visit_dtype(x.dtype(), [&](auto source_tag) {
    using From = decltype(source_tag);
    visit_dtype(y.dtype(), [&](auto target_tag) {
      using To = decltype(target_tag);
      const From* in = static_cast<const From*>(x.raw_data());
      To* out = static_cast<To*>(y.raw_data());
      parallel_for(x.numel(), 2, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin + cast_vectorised(in + begin, out + begin, end - begin);
             i < end; ++i)
          out[i] = convert_element<To>(in[i]);
      });
    });
  });
}

}  // namespace

void register_layout_kernels(KernelTable& table) {
  auto set = [&](OpKind kind, KernelFn run) { table.set(kind, run, all_dtypes_mask()); };
  set(OpKind::reshape, reshape_kernel);
  set(OpKind::transpose, transpose_kernel);
  set(OpKind::concat, concat_kernel);
  set(OpKind::slice, slice_kernel);
  set(OpKind::pad, pad_kernel);
  set(OpKind::cast, cast_kernel);
}

}  // namespace tandem::cpu
