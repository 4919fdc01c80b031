#pragma once
// Device-side building blocks shared by the .cu kernel families: Tandem's dtypes as CUDA types,
// conversions through the compute type (float for bf16/f16, as on the CPU), indexing of
// broadcast and strided views, and block-wide reductions.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "ops/kernel_geometry.h"

namespace tandem::cuda {

// ---- types ----
template <typename T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<__half> {
  using type = float;
};
template <>
struct ComputeOf<__nv_bfloat16> {
  using type = float;
};
template <>
struct ComputeOf<bool> {
  using type = int;
};
template <>
struct ComputeOf<std::uint8_t> {
  using type = int;
};
// The type arithmetic happens in: float for the 16-bit floats, the type itself otherwise.
template <typename T>
using compute_t = typename ComputeOf<T>::type;

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
inline constexpr bool is_floating_v = is_half_v<T> || std::is_floating_point_v<T>;

template <typename To, typename From>
__host__ __device__ inline To convert_to(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (is_half_v<From>) {
    return convert_to<To>(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else {
    return static_cast<To>(value);
  }
}

template <typename T>
__device__ inline compute_t<T> load(const T* data, std::int64_t index) {
  return convert_to<compute_t<T>>(data[index]);
}

// Calls fn(T{}) for the CUDA type of `dtype` among the floating dtypes the kernels cover.
template <typename Fn>
void visit_floating(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      fn(float{});
      return;
    case DType::bf16:
      fn(__nv_bfloat16{});
      return;
    case DType::f16:
      fn(__half{});
      return;
    default:
      TANDEM_ASSERT(false, std::string("no CUDA floating kernel for ") + dtype_name(dtype));
  }
}

// Floating dtypes and i32/i64.
template <typename Fn>
void visit_numeric(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::i32:
      fn(std::int32_t{});
      return;
    case DType::i64:
      fn(std::int64_t{});
      return;
    default:
      visit_floating(dtype, fn);
  }
}

// Every dtype, f64 included (casts and copies).
template <typename Fn>
void visit_any(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f64:
      fn(double{});
      return;
    case DType::u8:
      fn(std::uint8_t{});
      return;
    case DType::i8:
      fn(std::int8_t{});
      return;
    case DType::boolean:
      fn(bool{});
      return;
    default:
      visit_numeric(dtype, fn);
  }
}

// An unsigned integer of an element's size, for kernels that only move elements.
template <typename Fn>
void visit_element_size(std::size_t size, Fn&& fn) {
  switch (size) {
    case 1:
      fn(std::uint8_t{});
      return;
    case 2:
      fn(std::uint16_t{});
      return;
    case 4:
      fn(std::uint32_t{});
      return;
    case 8:
      fn(std::uint64_t{});
      return;
    default:
      TANDEM_ASSERT(false, "no element type of " + std::to_string(size) + " bytes");
  }
}

// ---- indexing ----
inline constexpr int kMaxRank = 8;

// An output of up to kMaxRank (coalesced) axes and the element strides of up to three inputs
// along them, 0 where an input is broadcast.
template <int kInputs>
struct BroadcastIndex {
  int rank = 0;
  std::int64_t extents[kMaxRank] = {};
  std::int64_t strides[kInputs][kMaxRank] = {};

  __device__ void offsets(std::int64_t linear, std::int64_t (&out)[kInputs]) const {
    for (int k = 0; k < kInputs; ++k)
      out[k] = 0;
    for (int axis = rank - 1; axis >= 0; --axis) {
      const std::int64_t index = linear % extents[axis];
      linear /= extents[axis];
      for (int k = 0; k < kInputs; ++k)
        out[k] += index * strides[k][axis];
    }
  }
};

// The device-side index of an output shape and its inputs' shapes (NumPy broadcasting), with
// adjacent axes merged (coalesce_broadcast) so the rank stays small.
template <int kInputs>
BroadcastIndex<kInputs> broadcast_index(const Shape& out_shape,
                                        const std::array<const Shape*, kInputs>& shapes) {
  const CoalescedBroadcast<kInputs> coalesced = coalesce_broadcast<kInputs>(out_shape, shapes);
  const std::vector<std::int64_t>& extents = coalesced.extents;
  const std::vector<std::array<std::int64_t, kInputs>>& merged = coalesced.strides;
  if (extents.size() > static_cast<std::size_t>(kMaxRank)) {
    throw InvalidArgument("the CUDA backend broadcasts up to " + std::to_string(kMaxRank) +
                          " distinct axes, got the output shape " + shape_str(out_shape));
  }
  BroadcastIndex<kInputs> index;
  index.rank = static_cast<int>(extents.size());
  for (int axis = 0; axis < index.rank; ++axis) {
    index.extents[axis] = extents[static_cast<std::size_t>(axis)];
    for (int k = 0; k < kInputs; ++k)
      index.strides[k][axis] = merged[static_cast<std::size_t>(axis)][k];
  }
  return index;
}

// ---- reductions within a block ----
template <typename C>
struct SumOp {
  __device__ C operator()(C a, C b) const { return a + b; }
  __device__ static C identity() { return C(0); }
};

template <typename C>
struct MaxOp {
  __device__ C operator()(C a, C b) const { return a > b ? a : b; }
  __device__ static C identity() {
    if constexpr (std::is_floating_point_v<C>) {
      return -std::numeric_limits<C>::infinity();
    } else {
      return std::numeric_limits<C>::lowest();
    }
  }
};

template <typename C, typename Op>
__device__ inline C warp_reduce(C value, Op op) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
  return value;
}

// Reduces one value per thread of a 1-D block (blockDim.x a multiple of 32, at most 1024) and
// returns the result to every thread.
template <typename C, typename Op>
__device__ inline C block_reduce(C value, Op op) {
  __shared__ C partial[32];
  __shared__ C result;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  value = warp_reduce(value, op);
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) / 32;
    C total = lane < warps ? partial[lane] : Op::identity();
    total = warp_reduce(total, op);
    if (lane == 0) result = total;
  }
  __syncthreads();
  const C reduced = result;
  __syncthreads();  // partial and result may be reused by the next call
  return reduced;
}

// A block size for rows of `length` elements: a multiple of 32 up to 256.
inline unsigned row_threads(std::int64_t length) {
  unsigned threads = 32;
  while (threads < 256 && threads < length)
    threads *= 2;
  return threads;
}

}  // namespace tandem::cuda
