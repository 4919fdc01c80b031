// CPU kernels for element-wise ops. f32/bf16 tensors large enough to amortise primitive lookup go
// to oneDNN's JIT-compiled eltwise and binary primitives; everything else (other dtypes, small
// tensors, two-sided broadcasting) runs in the loops below, which double as the reference.
#include <array>
#include <cmath>
#include <numbers>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "ops/fused.h"
#include "ops/op_attrs.h"

namespace tandem::cpu {
namespace {

// Below this many elements oneDNN's primitive set-up costs more than the loop.
constexpr std::int64_t kOneDnnMinElements = 16384;

bool use_onednn(const Tensor& tensor) {
  return onednn_float_kernels(tensor.dtype()) && tensor.numel() >= kOneDnnMinElements;
}

// ---- scalar math shared by the loops ----
template <typename C>
C gelu_value(C x, bool approximate) {
  if (approximate) {
    const C inner =
        C(std::numbers::sqrt2 / std::sqrt(std::numbers::pi)) * (x + C(0.044715) * x * x * x);
    return C(0.5) * x * (C(1) + std::tanh(inner));
  }
  return C(0.5) * x * (C(1) + std::erf(x / C(std::numbers::sqrt2)));
}

template <typename C>
C gelu_derivative(C x, bool approximate) {
  if (approximate) {
    const C scale = C(std::numbers::sqrt2 / std::sqrt(std::numbers::pi));
    const C t = std::tanh(scale * (x + C(0.044715) * x * x * x));
    return C(0.5) * (C(1) + t) +
           C(0.5) * x * (C(1) - t * t) * scale * (C(1) + C(3 * 0.044715) * x * x);
  }
  const C cdf = C(0.5) * (C(1) + std::erf(x / C(std::numbers::sqrt2)));
  const C pdf = std::exp(C(-0.5) * x * x) / C(std::sqrt(2 * std::numbers::pi));
  return cdf + x * pdf;
}

// The formulas of the ops a fused loop may chain (ops/fused.h), shared by their own loops and the
// fused one so that both give the same bits. x is the first operand (dy for relu_backward), y
// the second (relu_backward's saved input; ignored by the unary ops).
template <OpKind kKind, typename C>
[[gnu::always_inline]] inline C fusible_value(C x, C y) {
  static_assert(fusible_elementwise(kKind));
  if constexpr (kKind == OpKind::neg) return C(-x);
  if constexpr (kKind == OpKind::abs) return x < C(0) ? C(-x) : x;
  if constexpr (kKind == OpKind::sqrt) return std::sqrt(x);
  if constexpr (kKind == OpKind::square) return C(x * x);
  if constexpr (kKind == OpKind::relu) return x > C(0) ? x : C(0);
  // dy * 0 where y is not positive, as oneDNN's kernel (the ops' own above 16384 elements)
  // computes it: -0 for a negative dy.
  if constexpr (kKind == OpKind::relu_backward) return y > C(0) ? x : C(x * C(0));
  if constexpr (kKind == OpKind::add) return C(x + y);
  if constexpr (kKind == OpKind::sub) return C(x - y);
  if constexpr (kKind == OpKind::mul) return C(x * y);
  if constexpr (kKind == OpKind::div) {
    if constexpr (std::is_integral_v<C>) {
      return y == C(0) ? C(0) : C(x / y);  // integer division by zero yields 0, never a trap
    } else {
      return C(x / y);
    }
  }
  if constexpr (kKind == OpKind::maximum) return x > y ? x : y;
  if constexpr (kKind == OpKind::minimum) return x < y ? x : y;
}

// y[i] = fn(x[i]) in the compute type of x's dtype.
template <typename Fn>
void map_unary(const Tensor& x, const Tensor& y, Fn fn) {
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      using C = compute_type_t<T>;
      const T* in = static_cast<const T*>(x.raw_data());
      T* out = static_cast<T*>(y.raw_data());
      parallel_for(x.numel(), 4, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          out[i] = convert_element<T>(fn(static_cast<C>(in[i])));
        }
      });
    }
  });
}

// out[i] = fn(a[i], b[i]) for two same-shape inputs (backward kernels).
template <typename Fn>
void map_pairwise(const Tensor& a, const Tensor& b, const Tensor& out, Fn fn) {
  visit_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      using C = compute_type_t<T>;
      const T* pa = static_cast<const T*>(a.raw_data());
      const T* pb = static_cast<const T*>(b.raw_data());
      T* po = static_cast<T*>(out.raw_data());
      parallel_for(a.numel(), 4, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          po[i] = convert_element<T>(fn(static_cast<C>(pa[i]), static_cast<C>(pb[i])));
        }
      });
    }
  });
}

// out = fn(a, b) with NumPy broadcasting; In is the input type, Out the output type.
template <typename In, typename Out, typename Fn>
void broadcast_binary_typed(const Tensor& a, const Tensor& b, const Tensor& out, Fn fn) {
  using C = compute_type_t<In>;
  const BroadcastPlan<2> plan(out.shape(), {&a.shape(), &b.shape()});
  const In* pa = static_cast<const In*>(a.raw_data());
  const In* pb = static_cast<const In*>(b.raw_data());
  Out* po = static_cast<Out*>(out.raw_data());
  const std::int64_t length = plan.row_length();
  const std::int64_t stride_a = plan.row_stride(0);
  const std::int64_t stride_b = plan.row_stride(1);
  parallel_for(plan.rows(), length, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const auto offsets = plan.row_offsets(row);
      const In* ra = pa + offsets[0];
      const In* rb = pb + offsets[1];
      Out* ro = po + row * length;
      if (stride_a == 1 && stride_b == 1) {
        for (std::int64_t i = 0; i < length; ++i) {
          ro[i] = convert_element<Out>(fn(static_cast<C>(ra[i]), static_cast<C>(rb[i])));
        }
      } else if (stride_a == 1) {
        const C scalar_b = static_cast<C>(rb[0]);
        for (std::int64_t i = 0; i < length; ++i) {
          ro[i] = convert_element<Out>(fn(static_cast<C>(ra[i]), scalar_b));
        }
      } else {
        const C scalar_a = static_cast<C>(ra[0]);
        for (std::int64_t i = 0; i < length; ++i) {
          ro[i] = convert_element<Out>(fn(scalar_a, static_cast<C>(rb[i * stride_b])));
        }
      }
    }
  });
}

template <typename Fn>
void broadcast_arithmetic(const KernelContext& c, Fn fn) {
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      broadcast_binary_typed<T, T>(c.inputs[0], c.inputs[1], c.outputs[0], fn);
    }
  });
}

template <typename Fn>
void broadcast_comparison(const KernelContext& c, Fn fn) {
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    broadcast_binary_typed<T, bool>(c.inputs[0], c.inputs[1], c.outputs[0], fn);
  });
}

// ---- oneDNN paths ----
struct EltwiseAlgorithm {
  dnnl::algorithm algorithm;
  float alpha = 0;
  float beta = 0;
};

EltwiseAlgorithm eltwise_algorithm(OpKind kind, const Attrs& attrs) {
  using a = dnnl::algorithm;
  const bool approximate = gelu_approximation(kind, attrs);
  switch (kind) {
    case OpKind::neg:
      return {a::eltwise_linear, -1.0f, 0.0f};
    case OpKind::abs:
      return {a::eltwise_abs};
    case OpKind::exp:
      return {a::eltwise_exp};
    case OpKind::log:
      return {a::eltwise_log};
    case OpKind::sqrt:
      return {a::eltwise_sqrt};
    case OpKind::rsqrt:
      return {a::eltwise_pow, 1.0f, -0.5f};
    case OpKind::square:
      return {a::eltwise_square};
    case OpKind::relu:
    case OpKind::relu_backward:
      return {a::eltwise_relu};
    case OpKind::gelu:
    case OpKind::gelu_backward:
      return {approximate ? a::eltwise_gelu_tanh : a::eltwise_gelu_erf};
    case OpKind::sigmoid:
    case OpKind::sigmoid_backward:
      return {a::eltwise_logistic_use_dst_for_bwd};
    case OpKind::tanh:
    case OpKind::tanh_backward:
      return {a::eltwise_tanh_use_dst_for_bwd};
    default:
      TANDEM_ASSERT(false, std::string("no oneDNN eltwise for ") + op_name(kind));
  }
  return {a::eltwise_relu};
}

dnnl::eltwise_forward::primitive_desc eltwise_forward_pd(const EltwiseAlgorithm& algorithm,
                                                         const dnnl::memory::desc& desc) {
  return dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algorithm.algorithm, desc,
                                  algorithm.alpha, algorithm.beta),
      onednn_engine());
}

void onednn_eltwise_forward(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const dnnl::memory::desc desc = plain_desc(x.shape(), x.dtype());
  const auto pd = eltwise_forward_pd(eltwise_algorithm(c.kind, c.attrs), desc);
  execute(dnnl::eltwise_forward(pd),
          {{DNNL_ARG_SRC, wrap(desc, x)}, {DNNL_ARG_DST, wrap(desc, c.outputs[0])}});
}

// inputs (dy, x) for relu/gelu, (dy, y) for sigmoid/tanh (the *_use_dst_for_bwd algorithms).
void onednn_eltwise_backward(const KernelContext& c) {
  const Tensor& dy = c.inputs[0];
  const Tensor& saved = c.inputs[1];
  const dnnl::memory::desc desc = plain_desc(dy.shape(), dy.dtype());
  const EltwiseAlgorithm algorithm = eltwise_algorithm(c.kind, c.attrs);
  const auto forward_pd = eltwise_forward_pd(algorithm, desc);
  const auto pd = dnnl::eltwise_backward::primitive_desc(
      dnnl::eltwise_backward::desc(algorithm.algorithm, desc, desc, algorithm.alpha,
                                   algorithm.beta),
      onednn_engine(), forward_pd);
  const bool uses_dst = c.kind == OpKind::sigmoid_backward || c.kind == OpKind::tanh_backward;
  execute(dnnl::eltwise_backward(pd), {{DNNL_ARG_DIFF_DST, wrap(desc, dy)},
                                       {uses_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, wrap(desc, saved)},
                                       {DNNL_ARG_DIFF_SRC, wrap(desc, c.outputs[0])}});
}

// oneDNN's binary primitive broadcasts only its second input into the first's shape.
bool onednn_binary_applies(const KernelContext& c) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  return use_onednn(a) && a.shape() == c.outputs[0].shape() && b.rank() <= a.rank();
}

void onednn_binary(const KernelContext& c, dnnl::algorithm algorithm) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  Shape b_shape(static_cast<std::size_t>(a.rank() - b.rank()), 1);
  b_shape.insert(b_shape.end(), b.shape().begin(), b.shape().end());
  const dnnl::memory::desc a_desc = plain_desc(a.shape(), a.dtype());
  const dnnl::memory::desc b_desc = plain_desc(b_shape, b.dtype());
  const auto pd = dnnl::binary::primitive_desc(
      dnnl::binary::desc(algorithm, a_desc, b_desc, a_desc), onednn_engine());
  execute(dnnl::binary(pd), {{DNNL_ARG_SRC_0, wrap(a_desc, a)},
                             {DNNL_ARG_SRC_1, wrap(b_desc, b)},
                             {DNNL_ARG_DST, wrap(a_desc, c.outputs[0])}});
}

// ---- kernels ----
template <OpKind kKind>
void unary_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  if constexpr (kKind != OpKind::sign) {
    if (use_onednn(x)) return onednn_eltwise_forward(c);
  }
  const bool approximate = gelu_approximation(kKind, c.attrs);
  map_unary(x, c.outputs[0], [approximate](auto v) {
    using C = decltype(v);
    if constexpr (fusible_elementwise(kKind)) return fusible_value<kKind>(v, v);
    if constexpr (kKind == OpKind::sign) return C((C(0) < v) - (v < C(0)));
    if constexpr (kKind == OpKind::exp) return std::exp(v);
    if constexpr (kKind == OpKind::log) return std::log(v);
    if constexpr (kKind == OpKind::rsqrt) return C(1) / std::sqrt(v);
    if constexpr (kKind == OpKind::gelu) return gelu_value(v, approximate);
    if constexpr (kKind == OpKind::sigmoid) return C(1) / (C(1) + std::exp(-v));
    if constexpr (kKind == OpKind::tanh) return std::tanh(v);
  });
}

template <OpKind kKind>
void unary_backward_kernel(const KernelContext& c) {
  if (use_onednn(c.inputs[0])) return onednn_eltwise_backward(c);
  const bool approximate = gelu_approximation(kKind, c.attrs);
  map_pairwise(c.inputs[0], c.inputs[1], c.outputs[0], [approximate](auto dy, auto saved) {
    using C = decltype(dy);
    if constexpr (kKind == OpKind::relu_backward) return fusible_value<kKind>(dy, saved);
    if constexpr (kKind == OpKind::gelu_backward)
      return C(dy * gelu_derivative(saved, approximate));
    if constexpr (kKind == OpKind::sigmoid_backward) return C(dy * saved * (C(1) - saved));
    if constexpr (kKind == OpKind::tanh_backward) return C(dy * (C(1) - saved * saved));
  });
}

template <OpKind kKind>
void binary_kernel(const KernelContext& c) {
  using a = dnnl::algorithm;
  constexpr bool kHasOneDnn = kKind == OpKind::add || kKind == OpKind::sub ||
                              kKind == OpKind::mul || kKind == OpKind::div ||
                              kKind == OpKind::maximum || kKind == OpKind::minimum;
  if constexpr (kHasOneDnn) {
    if (onednn_binary_applies(c)) {
      const a algorithm = kKind == OpKind::add       ? a::binary_add
                          : kKind == OpKind::sub     ? a::binary_sub
                          : kKind == OpKind::mul     ? a::binary_mul
                          : kKind == OpKind::div     ? a::binary_div
                          : kKind == OpKind::maximum ? a::binary_max
                                                     : a::binary_min;
      return onednn_binary(c, algorithm);
    }
  }
  broadcast_arithmetic(c, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (fusible_elementwise(kKind)) return fusible_value<kKind>(x, y);
    if constexpr (kKind == OpKind::pow) return C(std::pow(x, y));
  });
}

template <OpKind kKind>
void comparison_kernel(const KernelContext& c) {
  broadcast_comparison(c, [](auto x, auto y) {
    if constexpr (kKind == OpKind::equal) return x == y;
    if constexpr (kKind == OpKind::greater) return x > y;
    if constexpr (kKind == OpKind::greater_equal) return x >= y;
    if constexpr (kKind == OpKind::less) return x < y;
  });
}

void select_kernel(const KernelContext& c) {
  const Tensor& condition = c.inputs[0];
  const Tensor& out = c.outputs[0];
  const BroadcastPlan<3> plan(out.shape(),
                              {&condition.shape(), &c.inputs[1].shape(), &c.inputs[2].shape()});
  visit_dtype(c.inputs[1].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool* pc = static_cast<const bool*>(condition.raw_data());
    const T* pa = static_cast<const T*>(c.inputs[1].raw_data());
    const T* pb = static_cast<const T*>(c.inputs[2].raw_data());
    T* po = static_cast<T*>(out.raw_data());
    const std::int64_t length = plan.row_length();
    parallel_for(plan.rows(), length, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t row = begin; row < end; ++row) {
        const auto offsets = plan.row_offsets(row);
        for (std::int64_t i = 0; i < length; ++i) {
          po[row * length + i] = pc[offsets[0] + i * plan.row_stride(0)]
                                     ? pa[offsets[1] + i * plan.row_stride(1)]
                                     : pb[offsets[2] + i * plan.row_stride(2)];
        }
      }
    });
  });
}

// ---- fused chains (ops/fused.h) ----
// Elements per block: each slot of the program holds a block, all on the kernel's stack.
constexpr std::int64_t kFusedBlock = 128;

template <OpKind kKind, typename C>
[[gnu::always_inline]] inline void fused_loop(const C* a, const C* b, C* result, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    result[i] = fusible_value<kKind>(a[i], b[i]);
}

// One instruction over a block: result = kind(a, b) (b is a again for a unary op).
template <typename C>
TANDEM_VECTOR_CLONES void fused_instruction(OpKind kind, const C* a, const C* b, C* result,
                                            std::int64_t n) {
  using K = OpKind;
  switch (kind) {
#define TANDEM_FUSED_CASE(op) \
  case K::op:                 \
    return fused_loop<K::op>(a, b, result, n);
    TANDEM_FUSED_CASE(neg)
    TANDEM_FUSED_CASE(abs)
    TANDEM_FUSED_CASE(sqrt)
    TANDEM_FUSED_CASE(square)
    TANDEM_FUSED_CASE(relu)
    TANDEM_FUSED_CASE(relu_backward)
    TANDEM_FUSED_CASE(add)
    TANDEM_FUSED_CASE(sub)
    TANDEM_FUSED_CASE(mul)
    TANDEM_FUSED_CASE(div)
    TANDEM_FUSED_CASE(maximum)
    TANDEM_FUSED_CASE(minimum)
#undef TANDEM_FUSED_CASE
    default:
      TANDEM_ASSERT(false, std::string("fused_elementwise cannot run ") + op_name(kind));
  }
}

// Elements [begin, begin + n) of an input of `period` elements repeated along the output, in
// runs that do not wrap (a loop the compiler vectorises; a wrap test per element kept a bf16
// chain's loads scalar).
template <typename T, typename C>
void load_repeating(const T* data, std::int64_t period, std::int64_t begin, std::int64_t n,
                    C* block) {
  std::int64_t index = begin % period;
  for (std::int64_t i = 0; i < n; index = 0) {
    const std::int64_t run = std::min(n - i, period - index);
    for (std::int64_t j = 0; j < run; ++j)
      block[i + j] = static_cast<C>(data[index + j]);
    i += run;
  }
}

template <typename T>
void fused_elementwise_typed(const KernelContext& c, const std::vector<FusedInstruction>& program) {
  using C = compute_type_t<T>;
  constexpr bool kRounds = !std::is_same_v<T, C>;  // bf16, f16: round after each instruction
  const std::size_t inputs = c.inputs.size();
  std::array<const T*, kMaxFusedInputs> data{};
  std::array<std::int64_t, kMaxFusedInputs> period{};
  for (std::size_t i = 0; i < inputs; ++i) {
    data[i] = static_cast<const T*>(c.inputs[i].raw_data());
    period[i] = c.inputs[i].numel();
  }
  T* out = static_cast<T*>(c.outputs[0].raw_data());
  const std::int64_t numel = c.outputs[0].numel();
  const std::int64_t blocks = (numel + kFusedBlock - 1) / kFusedBlock;
  const auto cost = static_cast<std::int64_t>(program.size()) * kFusedBlock;
  parallel_for(blocks, cost, [&](std::int64_t first, std::int64_t last) {
    std::array<C, (kMaxFusedInputs + kMaxFusedInstructions) * kFusedBlock> storage;
    std::array<const C*, kMaxFusedInputs + kMaxFusedInstructions> slot{};
    for (std::int64_t block = first; block < last; ++block) {
      const std::int64_t begin = block * kFusedBlock;
      const std::int64_t n = std::min(kFusedBlock, numel - begin);
      for (std::size_t i = 0; i < inputs; ++i) {
        if constexpr (!kRounds) {
          if (period[i] == numel) {
            slot[i] = data[i] + begin;
            continue;
          }
        }
        C* block_of_input = storage.data() + i * kFusedBlock;
        load_repeating(data[i], period[i], begin, n, block_of_input);
        slot[i] = block_of_input;
      }
      for (std::size_t k = 0; k < program.size(); ++k) {
        const FusedInstruction& instruction = program[k];
        const bool last_one = k + 1 == program.size();
        C* result = !kRounds && last_one ? reinterpret_cast<C*>(out + begin)
                                         : storage.data() + (inputs + k) * kFusedBlock;
        const C* a = slot[static_cast<std::size_t>(instruction.a)];
        const C* b = instruction.b >= 0 ? slot[static_cast<std::size_t>(instruction.b)] : a;
        fused_instruction(instruction.kind, a, b, result, n);
        if constexpr (kRounds) {
          if (last_one) {
            for (std::int64_t i = 0; i < n; ++i)
              out[begin + i] = convert_element<T>(result[i]);
          } else {
            for (std::int64_t i = 0; i < n; ++i)
              result[i] = static_cast<C>(convert_element<T>(result[i]));
          }
        }
        slot[inputs + k] = result;
      }
    }
  });
}

void fused_elementwise_kernel(const KernelContext& c) {
  const std::vector<FusedInstruction> program = fused_program(c.attrs, c.inputs.size());
  visit_dtype(c.outputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      fused_elementwise_typed<T>(c, program);
    }
  });
}

}  // namespace

void add_residual(const Tensor& residual, const Tensor& out, bool relu) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      using C = compute_type_t<T>;
      const T* r = static_cast<const T*>(residual.raw_data());
      T* o = static_cast<T*>(out.raw_data());
      parallel_for(out.numel(), 2, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          const T sum = convert_element<T>(
              fusible_value<OpKind::add>(static_cast<C>(o[i]), static_cast<C>(r[i])));
          o[i] = relu ? convert_element<T>(fusible_value<OpKind::relu>(static_cast<C>(sum), C(0)))
                      : sum;
        }
      });
    }
  });
}

void register_elementwise_kernels(KernelTable& table) {
  using K = OpKind;
  const std::uint32_t numeric = dtype_mask(
      {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::u8});
  const std::uint32_t signed_numeric =
      dtype_mask({DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64});
  const std::uint32_t floating = floating_dtypes_mask();
  table.set(K::neg, unary_kernel<K::neg>, signed_numeric);
  table.set(K::abs, unary_kernel<K::abs>, signed_numeric);
  table.set(K::sign, unary_kernel<K::sign>, signed_numeric);
  table.set(K::exp, unary_kernel<K::exp>, floating);
  table.set(K::log, unary_kernel<K::log>, floating);
  table.set(K::sqrt, unary_kernel<K::sqrt>, floating);
  table.set(K::rsqrt, unary_kernel<K::rsqrt>, floating);
  table.set(K::square, unary_kernel<K::square>, signed_numeric);
  table.set(K::relu, unary_kernel<K::relu>, signed_numeric);
  table.set(K::gelu, unary_kernel<K::gelu>, floating);
  table.set(K::sigmoid, unary_kernel<K::sigmoid>, floating);
  table.set(K::tanh, unary_kernel<K::tanh>, floating);
  table.set(K::relu_backward, unary_backward_kernel<K::relu_backward>, floating);
  table.set(K::gelu_backward, unary_backward_kernel<K::gelu_backward>, floating);
  table.set(K::sigmoid_backward, unary_backward_kernel<K::sigmoid_backward>, floating);
  table.set(K::tanh_backward, unary_backward_kernel<K::tanh_backward>, floating);
  table.set(K::add, binary_kernel<K::add>, numeric);
  table.set(K::sub, binary_kernel<K::sub>, numeric);
  table.set(K::mul, binary_kernel<K::mul>, numeric);
  table.set(K::div, binary_kernel<K::div>, numeric);
  table.set(K::maximum, binary_kernel<K::maximum>, numeric);
  table.set(K::minimum, binary_kernel<K::minimum>, numeric);
  table.set(K::pow, binary_kernel<K::pow>, floating);
  table.set(K::equal, comparison_kernel<K::equal>, all_dtypes_mask());
  table.set(K::greater, comparison_kernel<K::greater>, numeric);
  table.set(K::greater_equal, comparison_kernel<K::greater_equal>, numeric);
  table.set(K::less, comparison_kernel<K::less>, numeric);
  table.set(K::select, select_kernel, dtype_mask({DType::boolean}));
  table.set(K::fused_elementwise, fused_elementwise_kernel, floating);
}

}  // namespace tandem::cpu
