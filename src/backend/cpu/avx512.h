#pragma once
// What the CPU backend's AVX-512 loops share (x86-64 only): whether the CPU has AVX-512F, and
// masks of a vector's first lanes for the partial vector at the end of a channel row.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

namespace tandem::cpu {

inline constexpr std::int64_t kAvx512Lanes = 16;  // floats in an AVX-512 vector

// Whether the loops built for AVX-512 (gnu::target("avx512f")) may run on this CPU.
inline bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

// The first `count` lanes of a vector of floats (none for count <= 0, all for count >= 16).
inline __mmask16 lane_mask(std::int64_t count) {
  if (count <= 0) return 0;
  if (count >= kAvx512Lanes) return 0xFFFF;
  return static_cast<__mmask16>((1u << count) - 1);
}

// relu of each lane, keeping NaN (a lane not <= 0 stays), as oneDNN's relu post-op does.
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 relu_lanes(__m512 values) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(values, _mm512_setzero_ps(), _CMP_NLE_UQ), values);
}

}  // namespace tandem::cpu
#endif
