// CUDA element-wise ops: unary math and activations with their backward kernels, binary
// arithmetic and comparisons with NumPy broadcasting, select, and the casts between dtypes. In the
// compute type (float for bf16/f16), with the same formulas as the CPU loops; one thread per
// output element, or per 16 bytes of them where the inputs have the output's shape.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "backend/cuda/device_math.cuh"
#include "ops/op_attrs.h"

namespace tandem::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInverseSqrt2 = 0.7071067811865476f;
constexpr float kInverseSqrt2Pi = 0.3989422804014327f;

template <typename C>
__device__ C gelu_value(C x, bool approximate) {
  if (approximate) {
    const C inner = C(kSqrt2OverPi) * (x + C(0.044715) * x * x * x);
    return C(0.5) * x * (C(1) + ::tanh(inner));
  }
  return C(0.5) * x * (C(1) + ::erf(x * C(kInverseSqrt2)));
}

template <typename C>
__device__ C gelu_derivative(C x, bool approximate) {
  if (approximate) {
    const C inner = C(kSqrt2OverPi) * (x + C(0.044715) * x * x * x);
    const C t = ::tanh(inner);
    const C d_inner = C(kSqrt2OverPi) * (C(1) + C(3 * 0.044715) * x * x);
    return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * d_inner;
  }
  return C(0.5) * (C(1) + ::erf(x * C(kInverseSqrt2))) +
         x * C(kInverseSqrt2Pi) * ::exp(C(-0.5) * x * x);
}

template <OpKind kKind, typename C>
__device__ C unary_value(C v, bool approximate) {
  if constexpr (kKind == OpKind::neg) return -v;
  if constexpr (kKind == OpKind::abs) return v < C(0) ? C(-v) : v;
  if constexpr (kKind == OpKind::sign) return C((C(0) < v) - (v < C(0)));
  if constexpr (kKind == OpKind::exp) return ::exp(v);
  if constexpr (kKind == OpKind::log) return ::log(v);
  if constexpr (kKind == OpKind::sqrt) return ::sqrt(v);
  if constexpr (kKind == OpKind::rsqrt) return C(1) / ::sqrt(v);
  if constexpr (kKind == OpKind::square) return v * v;
  if constexpr (kKind == OpKind::relu) return v > C(0) ? v : C(0);
  if constexpr (kKind == OpKind::gelu) return gelu_value(v, approximate);
  if constexpr (kKind == OpKind::sigmoid) return C(1) / (C(1) + ::exp(-v));
  if constexpr (kKind == OpKind::tanh) return ::tanh(v);
}

template <OpKind kKind, typename C>
__device__ C unary_backward_value(C dy, C saved, bool approximate) {
  if constexpr (kKind == OpKind::relu_backward) return saved > C(0) ? dy : C(0);
  if constexpr (kKind == OpKind::gelu_backward) return dy * gelu_derivative(saved, approximate);
  if constexpr (kKind == OpKind::sigmoid_backward) return dy * saved * (C(1) - saved);
  if constexpr (kKind == OpKind::tanh_backward) return dy * (C(1) - saved * saved);
}

template <OpKind kKind, typename C>
__device__ C binary_value(C x, C y) {
  if constexpr (kKind == OpKind::add) return x + y;
  if constexpr (kKind == OpKind::sub) return x - y;
  if constexpr (kKind == OpKind::mul) return x * y;
  if constexpr (kKind == OpKind::div) {
    if constexpr (std::is_integral_v<C>) {
      return y == C(0) ? C(0) : C(x / y);  // integer division by zero yields 0, as on the CPU
    } else {
      return x / y;
    }
  }
  if constexpr (kKind == OpKind::maximum) return x > y ? x : y;
  if constexpr (kKind == OpKind::minimum) return x < y ? x : y;
  if constexpr (kKind == OpKind::pow) return ::pow(x, y);
}

template <OpKind kKind, typename C>
__device__ bool comparison_value(C x, C y) {
  if constexpr (kKind == OpKind::equal) return x == y;
  if constexpr (kKind == OpKind::greater) return x > y;
  if constexpr (kKind == OpKind::greater_equal) return x >= y;
  if constexpr (kKind == OpKind::less) return x < y;
}

// ---- kernels ----
// Each op's formula on stored values (computed in compute_t<T>, rounded back to T), for the packed
// kernels below.
template <OpKind kKind, typename T>
struct UnaryOp {
  bool approximate;
  __device__ T operator()(T x) const {
    return convert_to<T>(unary_value<kKind>(convert_to<compute_t<T>>(x), approximate));
  }
};
template <OpKind kKind, typename T>
struct UnaryBackwardOp {
  bool approximate;
  __device__ T operator()(T dy, T saved) const {
    return convert_to<T>(unary_backward_value<kKind>(convert_to<compute_t<T>>(dy),
                                                     convert_to<compute_t<T>>(saved), approximate));
  }
};
template <OpKind kKind, typename T>
struct BinaryOp {
  __device__ T operator()(T x, T y) const {
    return convert_to<T>(
        binary_value<kKind>(convert_to<compute_t<T>>(x), convert_to<compute_t<T>>(y)));
  }
};

// 16 consecutive bytes of elements, loaded and stored as one access.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kLanes = 16 / sizeof(T);
  T lane[kLanes];
};

bool aligned_for_packs(std::initializer_list<const void*> pointers) {
  for (const void* pointer : pointers)
    if (reinterpret_cast<std::uintptr_t>(pointer) % alignof(Pack<char>) != 0) return false;
  return true;
}

// out[i] = op(a[i]) (b is nullptr) or op(a[i], b[i]) over inputs of out's shape: whole packs
// first, so each thread moves 16 bytes per access (one element per thread leaves bf16 ops at a
// third of the memory's bandwidth), then the tail element by element. Every pointer is 16-byte
// aligned.
template <typename T, typename Op>
__global__ void packed_kernel(const T* a, const T* b, T* out, std::int64_t count, Op op) {
  using P = Pack<T>;
  constexpr bool kUnary = std::is_invocable_v<Op, T>;
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t packs = count / P::kLanes;
  for (std::int64_t p = first; p < packs; p += stride) {
    const P left = reinterpret_cast<const P*>(a)[p];
    P right;
    if constexpr (!kUnary) right = reinterpret_cast<const P*>(b)[p];
    P result;
#pragma unroll
    for (int k = 0; k < P::kLanes; ++k) {
      if constexpr (kUnary) {
        result.lane[k] = op(left.lane[k]);
      } else {
        result.lane[k] = op(left.lane[k], right.lane[k]);
      }
    }
    reinterpret_cast<P*>(out)[p] = result;
  }
  for (std::int64_t i = packs * P::kLanes + first; i < count; i += stride) {
    if constexpr (kUnary) {
      out[i] = op(a[i]);
    } else {
      out[i] = op(a[i], b[i]);
    }
  }
}

// Blocks for the packed kernels: a thread per pack, at least one block.
template <typename T>
unsigned blocks_for_packs(std::int64_t count) {
  return blocks_for(count / Pack<T>::kLanes);
}

template <OpKind kKind, typename T>
__global__ void unary_kernel(const T* x, T* y, std::int64_t count, bool approximate) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) y[i] = convert_to<T>(unary_value<kKind>(load(x, i), approximate));
}

template <OpKind kKind, typename T>
__global__ void unary_backward_kernel(const T* dy, const T* saved, T* dx, std::int64_t count,
                                      bool approximate) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) {
    dx[i] = convert_to<T>(unary_backward_value<kKind>(load(dy, i), load(saved, i), approximate));
  }
}

template <OpKind kKind, typename T, typename Out>
__global__ void binary_kernel(const T* a, const T* b, Out* out, std::int64_t count,
                              BroadcastIndex<2> index) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  std::int64_t offsets[2];
  index.offsets(i, offsets);
  const compute_t<T> x = load(a, offsets[0]);
  const compute_t<T> y = load(b, offsets[1]);
  if constexpr (std::is_same_v<Out, bool>) {
    out[i] = comparison_value<kKind>(x, y);
  } else {
    out[i] = convert_to<Out>(binary_value<kKind>(x, y));
  }
}

template <typename T>
__global__ void select_kernel(const bool* condition, const T* a, const T* b, T* out,
                              std::int64_t count, BroadcastIndex<3> index) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  std::int64_t offsets[3];
  index.offsets(i, offsets);
  out[i] = condition[offsets[0]] ? a[offsets[1]] : b[offsets[2]];
}

// out[row, c] += bias[c] over the rows of an (..., C) tensor, in place.
template <typename T>
__global__ void add_bias_kernel(T* out, const T* bias, std::int64_t count, std::int64_t channels) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) out[i] = convert_to<T>(load(out, i) + load(bias, i % channels));
}

// out = relu?(out + residual), in place, each step rounded to T as the add and relu ops round.
template <typename T>
__global__ void residual_relu_kernel(T* out, const T* residual, std::int64_t count, bool relu) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  T value = out[i];
  if (residual != nullptr) value = convert_to<T>(load(out, i) + load(residual, i));
  if (relu) {
    const compute_t<T> rounded = convert_to<compute_t<T>>(value);
    value = convert_to<T>(rounded > compute_t<T>(0) ? rounded : compute_t<T>(0));
  }
  out[i] = value;
}

template <typename From, typename To>
__global__ void convert_kernel(const From* x, To* out, std::int64_t count) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) out[i] = convert_to<To>(convert_to<compute_t<From>>(x[i]));
}

// ---- host entry points ----
template <OpKind kKind>
void run_unary(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const std::int64_t count = c.outputs[0].numel();
  if (count == 0) return;
  const bool approximate = gelu_approximation(kKind, c.attrs);
  visit_numeric(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr bool kFloatingOnly = kKind == OpKind::exp || kKind == OpKind::log ||
                                   kKind == OpKind::sqrt || kKind == OpKind::rsqrt ||
                                   kKind == OpKind::gelu || kKind == OpKind::sigmoid ||
                                   kKind == OpKind::tanh;
    if constexpr (!kFloatingOnly || is_floating_v<T>) {
      const T* x = static_cast<const T*>(c.inputs[0].raw_data());
      T* y = static_cast<T*>(c.outputs[0].raw_data());
      if (aligned_for_packs({x, y})) {
        packed_kernel<<<blocks_for_packs<T>(count), 256, 0, context.stream>>>(
            x, static_cast<const T*>(nullptr), y, count, UnaryOp<kKind, T>{approximate});
      } else {
        unary_kernel<kKind, T>
            <<<blocks_for(count), 256, 0, context.stream>>>(x, y, count, approximate);
      }
    }
  });
}

template <OpKind kKind>
void run_unary_backward(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const std::int64_t count = c.outputs[0].numel();
  if (count == 0) return;
  const bool approximate = gelu_approximation(kKind, c.attrs);
  visit_floating(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = static_cast<const T*>(c.inputs[0].raw_data());
    const T* saved = static_cast<const T*>(c.inputs[1].raw_data());
    T* dx = static_cast<T*>(c.outputs[0].raw_data());
    if (aligned_for_packs({dy, saved, dx})) {
      packed_kernel<<<blocks_for_packs<T>(count), 256, 0, context.stream>>>(
          dy, saved, dx, count, UnaryBackwardOp<kKind, T>{approximate});
    } else {
      unary_backward_kernel<kKind, T>
          <<<blocks_for(count), 256, 0, context.stream>>>(dy, saved, dx, count, approximate);
    }
  });
}

template <OpKind kKind>
void run_binary(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& out = c.outputs[0];
  const std::int64_t count = out.numel();
  if (count == 0) return;
  constexpr bool kComparison = kKind == OpKind::equal || kKind == OpKind::greater ||
                               kKind == OpKind::greater_equal || kKind == OpKind::less;
  if constexpr (!kComparison) {
    const bool same_shapes =
        c.inputs[0].shape() == out.shape() && c.inputs[1].shape() == out.shape();
    if (same_shapes &&
        aligned_for_packs({c.inputs[0].raw_data(), c.inputs[1].raw_data(), out.raw_data()})) {
      visit_numeric(out.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (kKind != OpKind::pow || is_floating_v<T>) {
          packed_kernel<<<blocks_for_packs<T>(count), 256, 0, context.stream>>>(
              static_cast<const T*>(c.inputs[0].raw_data()),
              static_cast<const T*>(c.inputs[1].raw_data()), static_cast<T*>(out.raw_data()), count,
              BinaryOp<kKind, T>{});
        }
      });
      return;
    }
  }
  const BroadcastIndex<2> index =
      broadcast_index<2>(out.shape(), {&c.inputs[0].shape(), &c.inputs[1].shape()});
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    using Out = std::conditional_t<kComparison, bool, T>;
    if constexpr (kKind != OpKind::pow || is_floating_v<T>) {
      binary_kernel<kKind, T, Out><<<blocks_for(count), 256, 0, context.stream>>>(
          static_cast<const T*>(c.inputs[0].raw_data()),
          static_cast<const T*>(c.inputs[1].raw_data()), static_cast<Out*>(out.raw_data()), count,
          index);
    }
  };
  if constexpr (kComparison) {
    visit_any(c.inputs[0].dtype(), [&](auto tag) {
      if constexpr (!std::is_same_v<decltype(tag), double>) launch(tag);
    });
  } else {
    visit_numeric(c.inputs[0].dtype(), launch);
  }
}

void run_select(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& out = c.outputs[0];
  const std::int64_t count = out.numel();
  if (count == 0) return;
  const BroadcastIndex<3> index = broadcast_index<3>(
      out.shape(), {&c.inputs[0].shape(), &c.inputs[1].shape(), &c.inputs[2].shape()});
  visit_element_size(dtype_size(out.dtype()), [&](auto tag) {
    using T = decltype(tag);
    select_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<const bool*>(c.inputs[0].raw_data()),
        static_cast<const T*>(c.inputs[1].raw_data()),
        static_cast<const T*>(c.inputs[2].raw_data()), static_cast<T*>(out.raw_data()), count,
        index);
  });
}

void run_cast(const KernelContext& c) {
  DeviceContext& context = enter(c);
  convert(context, c.inputs[0].raw_data(), c.inputs[0].dtype(), c.outputs[0].raw_data(),
          c.outputs[0].dtype(), c.outputs[0].numel());
}

}  // namespace

void convert(DeviceContext& context, const void* x, DType x_dtype, void* out, DType out_dtype,
             std::int64_t count) {
  if (count == 0) return;
  if (x_dtype == out_dtype) {
    check(cudaMemcpyAsync(out, x, static_cast<std::size_t>(count) * dtype_size(x_dtype),
                          cudaMemcpyDeviceToDevice, context.stream),
          "cudaMemcpyAsync");
    return;
  }
  visit_any(x_dtype, [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_any(out_dtype, [&](auto to_tag) {
      using To = decltype(to_tag);
      convert_kernel<From, To><<<blocks_for(count), 256, 0, context.stream>>>(
          static_cast<const From*>(x), static_cast<To*>(out), count);
    });
  });
}

void add_channel_bias(DeviceContext& context, const Tensor& bias, const Tensor& out) {
  const std::int64_t count = out.numel();
  if (count == 0) return;
  visit_floating(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<T*>(out.raw_data()), static_cast<const T*>(bias.raw_data()), count,
        bias.numel());
  });
}

void add_residual_relu(DeviceContext& context, const Tensor* residual, bool relu,
                       const Tensor& out) {
  const std::int64_t count = out.numel();
  if (count == 0 || (residual == nullptr && !relu)) return;
  visit_floating(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    residual_relu_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<T*>(out.raw_data()),
        residual != nullptr ? static_cast<const T*>(residual->raw_data()) : nullptr, count, relu);
  });
}

void register_elementwise_kernels(KernelTable& table) {
  using K = OpKind;
  const std::uint32_t floating = floating_mask();
  const std::uint32_t numeric = numeric_mask();
  table.set(K::neg, run_unary<K::neg>, numeric);
  table.set(K::abs, run_unary<K::abs>, numeric);
  table.set(K::sign, run_unary<K::sign>, numeric);
  table.set(K::exp, run_unary<K::exp>, floating);
  table.set(K::log, run_unary<K::log>, floating);
  table.set(K::sqrt, run_unary<K::sqrt>, floating);
  table.set(K::rsqrt, run_unary<K::rsqrt>, floating);
  table.set(K::square, run_unary<K::square>, numeric);
  table.set(K::relu, run_unary<K::relu>, numeric);
  table.set(K::gelu, run_unary<K::gelu>, floating);
  table.set(K::sigmoid, run_unary<K::sigmoid>, floating);
  table.set(K::tanh, run_unary<K::tanh>, floating);
  table.set(K::relu_backward, run_unary_backward<K::relu_backward>, floating);
  table.set(K::gelu_backward, run_unary_backward<K::gelu_backward>, floating);
  table.set(K::sigmoid_backward, run_unary_backward<K::sigmoid_backward>, floating);
  table.set(K::tanh_backward, run_unary_backward<K::tanh_backward>, floating);
  table.set(K::add, run_binary<K::add>, numeric);
  table.set(K::sub, run_binary<K::sub>, numeric);
  table.set(K::mul, run_binary<K::mul>, numeric);
  table.set(K::div, run_binary<K::div>, numeric);
  table.set(K::maximum, run_binary<K::maximum>, numeric);
  table.set(K::minimum, run_binary<K::minimum>, numeric);
  table.set(K::pow, run_binary<K::pow>, floating);
  const std::uint32_t comparable = numeric | dtype_mask({DType::u8, DType::boolean});
  table.set(K::equal, run_binary<K::equal>, comparable);
  table.set(K::greater, run_binary<K::greater>, comparable);
  table.set(K::greater_equal, run_binary<K::greater_equal>, comparable);
  table.set(K::less, run_binary<K::less>, comparable);
  table.set(K::select, run_select, dtype_mask({DType::boolean}));
  table.set(K::cast, run_cast, every_dtype_mask());
}

}  // namespace tandem::cuda
