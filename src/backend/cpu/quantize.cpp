// CPU fake_quantize: one pass, each element divided by its scale (not multiplied by a
// reciprocal, which rounds differently), rounded ties-to-even, shifted, clamped and scaled back,
// every step in the compute type (f32; f64 for f64) as the StableHLO lowering does.
//
// quantized_conv2d and quantized_matmul: x quantised by the same division into a u8/s8 buffer,
// then oneDNN's int8 primitives (AMX or VNNI where the CPU has them) with the per-channel scale
// product as output scales and the bias, residual and relu as post-ops, so the f32 result is
// scale * sum + bias as the op defines it. The scales are baked into a primitive, so each layer
// (its geometry and scales) gets its own cache entry; for constant weights (Tensor::is_constant:
// an int8 model's) the entry, keyed by the weights tensor too, also keeps them reordered into the
// primitive's layout, which other weights are reordered into on every call.
// Integer loops (exact int32 sums) run where oneDNN has no int8 primitive but its reference one.
// On a CPU without VNNI, where oneDNN's int8 kernels saturate, the products run in f32 on the
// dequantised operands (OnednnIsa::exact_int8). The oneDNN path is tested against the simulation
// (fake_quantize around conv2d/matmul) and against XLA's lowering of the ops.
#include <bit>
#include <cmath>
#include <optional>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/primitive_cache.h"
#include "backend/cpu/strided_copy.h"
#include "backend/cpu/window_kernels.h"
#include "ops/op_attrs.h"
#include "tandem/runtime.h"

namespace tandem::cpu {
namespace {

// Elements [begin, end) of a fake_quantize, `channels` scales along the last axis (1: per
// tensor). Compiled for AVX-512 and AVX2 too, clamping with comparisons (std::fmin/fmax are
// library calls per element); a NaN q clamps to quant_min as fmax(NaN, low) would put it.
template <typename T, typename C>
TANDEM_VECTOR_CLONES void fake_quantize_range(const T* __restrict x, const float* scale,
                                              const float* zero_point, std::int64_t channels, C low,
                                              C high, std::int64_t begin, std::int64_t end,
                                              T* __restrict y, T* __restrict in_range) {
  for (std::int64_t i = begin; i < end; ++i) {
    const std::int64_t channel = channels == 1 ? 0 : i % channels;
    const auto step = static_cast<C>(scale[channel]);
    const auto zero = static_cast<C>(zero_point[channel]);
    const C q = std::nearbyint(static_cast<C>(x[i]) / step) + zero;
    in_range[i] = convert_element<T>(q >= low && q <= high ? C(1) : C(0));
    const C clamped = q > low ? (q < high ? q : high) : low;
    y[i] = convert_element<T>((clamped - zero) * step);
  }
}

template <typename T>
void fake_quantize_loops(const KernelContext& c) {
  using C = compute_type_t<T>;
  const auto [quant_min, quant_max] = op_attrs<OpKind::fake_quantize>(c.attrs);
  const T* x = static_cast<const T*>(c.inputs[0].raw_data());
  const float* scale = c.inputs[1].data<float>();
  const float* zero_point = c.inputs[2].data<float>();
  // Per tensor: one scale; per channel: one per element of the last axis.
  const std::int64_t channels = c.inputs[1].numel();
  T* y = static_cast<T*>(c.outputs[0].raw_data());
  T* in_range = static_cast<T*>(c.outputs[1].raw_data());
  parallel_for(c.inputs[0].numel(), 64, [&](std::int64_t begin, std::int64_t end) {
    fake_quantize_range<T, C>(x, scale, zero_point, channels, static_cast<C>(quant_min),
                              static_cast<C>(quant_max), begin, end, y, in_range);
  });
}

void fake_quantize_kernel(const KernelContext& c) {
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) fake_quantize_loops<T>(c);
  });
}

// ---- integer products ----
using dnnl::memory;

// What both products share: the quantised input's range and the per-channel output scales.
struct QuantizedProduct {
  bool input_unsigned = false;
  bool fused_relu = false;
  bool fused_add = false;
  float input_scale = 1.0f;
  std::vector<float> output_scales;  // input_scale * weight_scale[c]: (C_out,)
};

template <OpKind Kind>
QuantizedProduct quantized_product(const KernelContext& c) {
  const auto attrs = op_attrs<Kind>(c.attrs);
  QuantizedProduct product{
      attrs.input_unsigned, attrs.fused_relu, attrs.fused_add, c.inputs[1].data<float>()[0], {}};
  const float* weight_scale = c.inputs[3].data<float>();
  for (std::int64_t channel = 0; channel < c.inputs[3].numel(); ++channel)
    product.output_scales.push_back(product.input_scale * weight_scale[channel]);
  return product;
}

// x / scale rounded ties-to-even and clamped to Q's range, as fake_quantize computes q. Comparisons
// rather than fmin/fmax, which are library calls (for their NaN rules); a NaN still ends at the
// low end, as fake_quantize's fmax(NaN, low) puts it.
template <typename Q>
[[gnu::always_inline]] inline float grid_point(float x, float scale) {
  const auto low = static_cast<float>(std::numeric_limits<Q>::lowest());
  const auto high = static_cast<float>(std::numeric_limits<Q>::max());
  const float value = std::nearbyint(x / scale);
  return value > low ? (value < high ? value : high) : low;
}

// q for each x. Compiled for AVX-512 and AVX2 too: the baseline's nearbyint is a library call
// per element, which made quantising ResNet-50's activations cost more than its int8
// convolutions.
template <typename Q>
TANDEM_VECTOR_CLONES void quantize_range(const float* __restrict x, std::int64_t count, float scale,
                                         Q* __restrict q) {
  for (std::int64_t i = 0; i < count; ++i)
    q[i] = static_cast<Q>(grid_point<Q>(x[i], scale));
}

// q * scale for each x: x on its grid, as fake_quantize gives it.
template <typename Q>
TANDEM_VECTOR_CLONES void dequantize_range(const float* __restrict x, std::int64_t count,
                                           float scale, float* __restrict y) {
  for (std::int64_t i = 0; i < count; ++i)
    y[i] = grid_point<Q>(x[i], scale) * scale;
}

// x quantised to u8 or s8 in a buffer of the calling thread, reused from call to call (a kernel
// runs to its end on the thread that called it): no allocation and no fresh pages in the steady
// state. Valid until the thread's next call.
void* quantized_input(const Tensor& x, const QuantizedProduct& product) {
  thread_local std::vector<std::uint8_t> buffer;
  const auto count = static_cast<std::size_t>(x.numel());
  if (buffer.size() < count) buffer.resize(count);
  const float* values = x.data<float>();
  std::uint8_t* q = buffer.data();
  parallel_for(x.numel(), 16, [&](std::int64_t begin, std::int64_t end) {
    if (product.input_unsigned) {
      quantize_range(values + begin, end - begin, product.input_scale, q + begin);
    } else {
      quantize_range(values + begin, end - begin, product.input_scale,
                     reinterpret_cast<std::int8_t*>(q + begin));
    }
  });
  return q;
}

// y = acc * output_scale[c] + bias[c] (+ residual), then relu: the op's definition, in f32.
float finish(std::int32_t acc, std::int64_t channel, std::int64_t index, const QuantizedProduct& p,
             const float* bias, const float* residual) {
  float y =
      static_cast<float>(acc) * p.output_scales[static_cast<std::size_t>(channel)] + bias[channel];
  if (residual != nullptr) y += residual[index];
  return p.fused_relu ? (y > 0.0f ? y : 0.0f) : y;
}

const float* residual_of(const KernelContext& c, const QuantizedProduct& p) {
  return p.fused_add ? c.inputs.back().data<float>() : nullptr;
}

template <typename Q>
void quantized_conv_loops(const KernelContext& c, const Window2D& g, const QuantizedProduct& p,
                          const Q* q) {
  const std::int8_t* filter = c.inputs[2].data<std::int8_t>();  // (KH, KW, C_in, C_out)
  const float* bias = c.inputs[4].data<float>();
  const float* residual = residual_of(c, p);
  float* y = c.outputs[0].data<float>();  // (N, OH, OW, C_out)
  const std::int64_t cell_stride = g.in_c * g.out_c;
  parallel_for(g.batch * g.out_h, g.out_w * g.k_h * g.k_w * cell_stride,
               [&](std::int64_t begin, std::int64_t end) {
                 std::vector<std::int32_t> acc(static_cast<std::size_t>(g.out_c));  // (C_out,)
                 for (std::int64_t row = begin; row < end; ++row) {
                   const std::int64_t n = row / g.out_h;
                   const std::int64_t oh = row % g.out_h;
                   for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
                     std::fill(acc.begin(), acc.end(), 0);
                     for_each_window_cell(g, oh, ow, [&](auto kh, auto kw, auto ih, auto iw) {
                       const Q* x_cell = q + ((n * g.in_h + ih) * g.in_w + iw) * g.in_c;
                       const std::int8_t* f_cell = filter + (kh * g.k_w + kw) * cell_stride;
                       for (std::int64_t ci = 0; ci < g.in_c; ++ci) {
                         const std::int32_t x_value = x_cell[ci];
                         for (std::int64_t co = 0; co < g.out_c; ++co)
                           acc[co] += x_value * f_cell[ci * g.out_c + co];
                       }
                     });
                     const std::int64_t base = (row * g.out_w + ow) * g.out_c;
                     for (std::int64_t co = 0; co < g.out_c; ++co)
                       y[base + co] = finish(acc[co], co, base + co, p, bias, residual);
                   }
                 }
               });
}

template <typename Q>
void quantized_matmul_loops(const KernelContext& c, const QuantizedProduct& p, const Q* q) {
  const std::int8_t* weights = c.inputs[2].data<std::int8_t>();  // (K, N)
  const std::int64_t k = c.inputs[2].dim(0);
  const std::int64_t columns = c.inputs[2].dim(1);
  const float* bias = c.inputs[4].data<float>();
  const float* residual = residual_of(c, p);
  float* y = c.outputs[0].data<float>();  // (rows, N)
  const std::int64_t rows = k == 0 ? 0 : c.inputs[0].numel() / k;
  parallel_for(rows, k * columns, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::int32_t> acc(static_cast<std::size_t>(columns));  // (N,)
    for (std::int64_t row = begin; row < end; ++row) {
      std::fill(acc.begin(), acc.end(), 0);
      for (std::int64_t i = 0; i < k; ++i) {
        const std::int32_t x_value = q[row * k + i];
        for (std::int64_t column = 0; column < columns; ++column)
          acc[column] += x_value * weights[i * columns + column];
      }
      for (std::int64_t column = 0; column < columns; ++column)
        y[row * columns + column] =
            finish(acc[column], column, row * columns + column, p, bias, residual);
    }
  });
}

// A primitive for one layer with its weights in the primitive's layout.
struct QuantizedPrimitive {
  dnnl::primitive primitive;
  memory::desc x;
  memory::desc y;
  memory::desc bias;  // the binary post-op's operand: one value per output channel
  memory::desc weights_ours;
  memory::desc weights_chosen;
  std::optional<memory> constant_weights;  // reordered once, for constant weights
  bool reference = false;  // oneDNN has no int8 kernel but its reference one: the loops run
  // A product's summed length as oneDNN's is built with (onednn_matmul_extents), where longer
  // than the op's (0 elsewhere): the quantised input gets zero columns and the weights zero rows
  // up to it.
  std::int64_t padded_k = 0;
};

// The weights (K, N) as `layer` reads them: with zero rows up to its padded summed length.
Tensor padded_weights(const QuantizedPrimitive& layer, const Tensor& weights) {
  if (layer.padded_k == 0) return weights;
  const std::int64_t k = weights.dim(0);
  const std::int64_t n = weights.dim(1);
  return zero_padded(weights, {k, n}, {n, 1}, {layer.padded_k, n});
}

// The output scales, the bias as a binary add, a residual as a sum, then relu: applied in that
// order to each result before it is stored.
dnnl::primitive_attr quantized_attr(const QuantizedProduct& p, const memory::desc& bias) {
  dnnl::primitive_attr attr;
  attr.set_output_scales(1 << 1, p.output_scales);
  dnnl::post_ops post_ops;
  post_ops.append_binary(dnnl::algorithm::binary_add, bias);
  if (p.fused_add) post_ops.append_sum(1.0f);
  if (p.fused_relu) post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  attr.set_post_ops(post_ops);
  return attr;
}

// Weights from our layout into the primitive's.
memory reordered_weights(const memory::desc& ours, const memory::desc& chosen,
                         const Tensor& weights) {
  memory source(ours, onednn_engine(), weights.raw_data());
  memory target(chosen, onednn_engine());
  execute(dnnl::reorder(source, target), {{DNNL_ARG_FROM, source}, {DNNL_ARG_TO, target}});
  return target;
}

// What makes a layer's primitive: the op's geometry key, then the fused flags, constant weights'
// identity (0 for other weights) and each output scale's bits.
PrimitiveKey layer_key(PrimitiveKey key, const QuantizedProduct& p, const Tensor& weights) {
  key.push_back(p.input_unsigned);
  key.push_back(p.fused_relu);
  key.push_back(p.fused_add);
  key.push_back(weights.is_constant() ? static_cast<std::int64_t>(weights.id()) : 0);
  for (float scale : p.output_scales)
    key.push_back(std::bit_cast<std::uint32_t>(scale));
  return key;
}

// The entry for `weights`, with them reordered if they are constant.
QuantizedPrimitive with_weights(QuantizedPrimitive layer, const Tensor& weights) {
  if (weights.is_constant() && !layer.reference) {
    layer.constant_weights =
        reordered_weights(layer.weights_ours, layer.weights_chosen, padded_weights(layer, weights));
  }
  return layer;
}

// Enough entries for every layer of a large model at a few batch sizes.
constexpr std::size_t kLayerCacheCapacity = 512;

QuantizedPrimitive build_quantized_conv(const Window2D& g, const QuantizedProduct& p,
                                        const Tensor& filter) {
  const DType input_dtype = p.input_unsigned ? DType::u8 : DType::i8;
  const memory::desc x = nhwc_desc(g.input_shape(), input_dtype);
  const memory::desc y = nhwc_desc(g.output_shape(), DType::f32);
  const memory::desc bias({1, g.out_c, 1, 1}, memory::data_type::f32, memory::format_tag::nchw);
  const memory::dims filter_dims{g.out_c, g.in_c, g.k_h, g.k_w};
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x,
          memory::desc(filter_dims, memory::data_type::s8, memory::format_tag::any), memory::desc(),
          y, onednn_strides(g), onednn_dilates(g), onednn_padding_l(g), onednn_padding_r(g)),
      quantized_attr(p, bias), onednn_engine());
  return with_weights(
      {dnnl::convolution_forward(pd), x, y, bias,
       memory::desc(filter_dims, memory::data_type::s8, memory::format_tag::hwio),
       pd.weights_desc(), std::nullopt, is_reference_implementation(pd.impl_info_str())},
      filter);
}

QuantizedPrimitive build_quantized_matmul(std::int64_t rows, std::int64_t k, std::int64_t columns,
                                          const QuantizedProduct& p, const Tensor& weights) {
  const std::int64_t summed =
      onednn_matmul_extents(k, columns, p.input_unsigned ? DType::u8 : DType::i8).k;
  const memory::desc x({rows, summed},
                       p.input_unsigned ? memory::data_type::u8 : memory::data_type::s8,
                       memory::format_tag::ab);
  const memory::desc y({rows, columns}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc bias({1, columns}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(
          x, memory::desc({summed, columns}, memory::data_type::s8, memory::format_tag::any),
          memory::desc(), y),
      quantized_attr(p, bias), onednn_engine());
  QuantizedPrimitive layer{
      dnnl::matmul(pd),
      x,
      y,
      bias,
      memory::desc({summed, columns}, memory::data_type::s8, memory::format_tag::ab),
      pd.weights_desc(),
      std::nullopt,
      is_reference_implementation(pd.impl_info_str())};
  if (summed != k) layer.padded_k = summed;
  return with_weights(std::move(layer), weights);
}

// build(), or an entry that sends the op to the loops where oneDNN has no int8 primitive for it.
template <typename Build>
QuantizedPrimitive or_loops(Build&& build) {
  try {
    return build();
  } catch (const dnnl::error&) {
    QuantizedPrimitive loops;
    loops.reference = true;
    return loops;
  }
}

// Runs a layer's primitive on the quantised input; the residual, if any, is copied into the
// output first (the sum post-op adds what the output holds) unless a compiled graph wrote the
// output over the residual's buffer (the op's in-place input).
void run_quantized(const KernelContext& c, const QuantizedPrimitive& layer,
                   const QuantizedProduct& p, void* q) {
  const Tensor& y = c.outputs[0];
  if (p.fused_add && y.raw_data() != c.inputs.back().raw_data()) {
    const Tensor& residual = c.inputs.back();
    std::copy_n(residual.data<float>(), residual.numel(), y.data<float>());
  }
  execute(layer.primitive,
          {{DNNL_ARG_SRC, memory(layer.x, onednn_engine(), q)},
           {DNNL_ARG_WEIGHTS, layer.constant_weights
                                  ? *layer.constant_weights
                                  : reordered_weights(layer.weights_ours, layer.weights_chosen,
                                                      padded_weights(layer, c.inputs[2]))},
           {DNNL_ARG_DST, wrap(layer.y, y)},
           {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, wrap(layer.bias, c.inputs[4])}});
}

// ---- CPUs whose oneDNN int8 kernels are inexact (OnednnIsa::exact_int8) ----
// The product runs as the float conv2d or matmul kernel on the dequantised operands: x on its
// grid (q * input scale, as fake_quantize gives it) and the weights times their per-channel
// scales, with the bias, residual (in place too) and relu fused as there. These are the
// simulation's operands, so the results agree with it, and with the exact int32 sums, to f32
// rounding; the speed is f32's.

// The int8 weights (..., C_out) times their scales, as f32. Constant weights (an int8 model's) are
// dequantised once and kept, themselves constant, so the float kernel keeps its own reorder.
Tensor dequantized_weights(const Tensor& weights, const Tensor& scales) {
  const auto dequantize = [&] {
    Tensor result = Tensor::empty(weights.shape(), DType::f32, weights.device());
    const std::int8_t* q = weights.data<std::int8_t>();
    const float* scale = scales.data<float>();
    const std::int64_t channels = scales.numel();
    float* y = result.data<float>();
    parallel_for(weights.numel(), 16, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i)
        y[i] = static_cast<float>(q[i]) * scale[i % channels];
    });
    result.set_constant(weights.is_constant());
    return result;
  };
  if (!weights.is_constant()) return dequantize();
  static PrimitiveCache<Tensor> constants(kLayerCacheCapacity);
  PrimitiveKey key{static_cast<std::int64_t>(weights.id())};
  for (float scale : std::span(scales.data<float>(), static_cast<std::size_t>(scales.numel())))
    key.push_back(std::bit_cast<std::uint32_t>(scale));
  return *constants.get(key, dequantize);
}

// Runs `float_kernel` as `float_kind` with `float_attrs` on the dequantised operands of the
// integer product `c`, into c's output.
void run_dequantized(const KernelContext& c, const QuantizedProduct& p, OpKind float_kind,
                     const Attrs& float_attrs, void (*float_kernel)(const KernelContext&)) {
  const Tensor& x = c.inputs[0];
  Tensor x_on_grid = Tensor::empty(x.shape(), DType::f32, x.device());
  const float* values = x.data<float>();
  float* y = x_on_grid.data<float>();
  parallel_for(x.numel(), 16, [&](std::int64_t begin, std::int64_t end) {
    if (p.input_unsigned) {
      dequantize_range<std::uint8_t>(values + begin, end - begin, p.input_scale, y + begin);
    } else {
      dequantize_range<std::int8_t>(values + begin, end - begin, p.input_scale, y + begin);
    }
  });
  std::vector<Tensor> inputs{x_on_grid, dequantized_weights(c.inputs[2], c.inputs[3]), c.inputs[4]};
  if (p.fused_add) inputs.push_back(c.inputs.back());
  float_kernel(KernelContext{float_kind, inputs, c.outputs, float_attrs});
}

void quantized_conv2d_kernel(const KernelContext& c) {
  static PrimitiveCache<QuantizedPrimitive> cache(kLayerCacheCapacity);
  const auto attrs = op_attrs<OpKind::quantized_conv2d>(c.attrs);
  const Window2D g = conv_window(op_name(c.kind), c.inputs[0].shape(), c.inputs[2].shape(), attrs);
  const QuantizedProduct p = quantized_product<OpKind::quantized_conv2d>(c);
  if (!onednn_isa().exact_int8) {
    return run_dequantized(c, p, OpKind::conv2d, write_attrs(Conv2DAttrs(attrs)), conv_kernel);
  }
  void* q = quantized_input(c.inputs[0], p);
  std::shared_ptr<const QuantizedPrimitive> layer;
  if (c.outputs[0].numel() > 0 && g.in_c > 0) {
    layer = cache.get(layer_key(window_key(c.kind, DType::f32, g), p, c.inputs[2]), [&] {
      return or_loops([&] { return build_quantized_conv(g, p, c.inputs[2]); });
    });
  }
  if (layer && !layer->reference) return run_quantized(c, *layer, p, q);
  if (p.input_unsigned) return quantized_conv_loops(c, g, p, static_cast<std::uint8_t*>(q));
  quantized_conv_loops(c, g, p, static_cast<std::int8_t*>(q));
}

void quantized_matmul_kernel(const KernelContext& c) {
  static PrimitiveCache<QuantizedPrimitive> cache(kLayerCacheCapacity);
  const QuantizedProduct p = quantized_product<OpKind::quantized_matmul>(c);
  if (!onednn_isa().exact_int8) {
    return run_dequantized(
        c, p, OpKind::matmul,
        write_attrs(MatmulAttrs{.fused_relu = p.fused_relu, .fused_add = p.fused_add}),
        matmul_kernel);
  }
  void* q = quantized_input(c.inputs[0], p);
  const std::int64_t k = c.inputs[2].dim(0);
  const std::int64_t columns = c.inputs[2].dim(1);
  const std::int64_t rows = k == 0 ? 0 : c.inputs[0].numel() / k;
  std::shared_ptr<const QuantizedPrimitive> layer;
  if (rows > 0 && k > 0 && columns > 0) {
    layer = cache.get(
        layer_key({static_cast<std::int64_t>(c.kind), rows, k, columns}, p, c.inputs[2]), [&] {
          return or_loops([&] { return build_quantized_matmul(rows, k, columns, p, c.inputs[2]); });
        });
  }
  if (layer && !layer->reference) {
    if (layer->padded_k == 0) return run_quantized(c, *layer, p, q);
    const Tensor padded_input =
        Tensor::zeros({rows, layer->padded_k}, DType::u8, Device::cpu());  // (rows, padded K)
    strided_copy(padded_input.raw_data(), {layer->padded_k, 1}, q, {k, 1}, {rows, k}, 1);
    return run_quantized(c, *layer, p, padded_input.raw_data());
  }
  if (p.input_unsigned) return quantized_matmul_loops(c, p, static_cast<std::uint8_t*>(q));
  quantized_matmul_loops(c, p, static_cast<std::int8_t*>(q));
}

}  // namespace

void register_quantize_kernels(KernelTable& table) {
  table.set(OpKind::fake_quantize, fake_quantize_kernel, floating_dtypes_mask());
  table.set(OpKind::quantized_conv2d, quantized_conv2d_kernel, dtype_mask({DType::f32}));
  table.set(OpKind::quantized_matmul, quantized_matmul_kernel, dtype_mask({DType::f32}));
}

}  // namespace tandem::cpu
