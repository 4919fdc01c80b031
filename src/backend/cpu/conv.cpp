// CPU kernels for 2-D convolution and its two backward ops. f32 and bf16 (where the CPU has
// oneDNN's bf16: onednn_float_kernels) run on oneDNN's JIT convolutions: activations stay NHWC
// in place, the bias is fused into the forward pass and its gradient into the weights pass, and
// filters are reordered between Tandem's (KH, KW, C_in, C_out) and whatever blocked layout oneDNN
// picks (format_tag::any). Primitives, descriptors and reorders are cached per geometry. f64 and
// f16 (and empty tensors) run the templated loops below, which are also the reference the oneDNN
// path is tested against.
#include <cstring>
#include <optional>
#include <string>

#include "backend/cpu/conv_few_channels.h"
#include "backend/cpu/conv_streamed_filter.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/max_pool_band.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/strided_copy.h"
#include "backend/cpu/window_kernels.h"
#include "core/huge_pages.h"
#include "ops/fused.h"
#include "ops/op_attrs.h"
#include "tandem/runtime.h"

namespace tandem::cpu {
namespace {

using dnnl::memory;

// The geometry of whichever conv op `c` runs, from its inputs and outputs.
Window2D conv_geometry(const KernelContext& c) {
  const Conv2DOptions options = read_attrs<Conv2DOptions>(c.attrs);
  const char* op = op_name(c.kind);
  switch (c.kind) {
    case OpKind::conv2d:
      return conv_window(op, c.inputs[0].shape(), c.inputs[1].shape(), options);
    case OpKind::conv2d_backward_input:
      return conv_window(op, c.outputs[0].shape(), c.inputs[1].shape(), options);
    default:
      return conv_window(op, c.inputs[0].shape(), c.outputs[0].shape(), options);
  }
}

// ---- loops (f64, f16; the reference for the oneDNN path) ----
template <typename T>
void conv_forward_loops(const Window2D& g, const T* x, const T* filter, const T* bias, bool relu,
                        T* y) {
  using C = compute_type_t<T>;
  const std::int64_t cell_stride = g.in_c * g.out_c;
  // One output row (n, oh) at a time, accumulating each position's channels in `acc`.
  auto rows = [&](std::int64_t begin, std::int64_t end) {
    std::vector<C> acc(static_cast<std::size_t>(g.out_c));  // (C_out,)
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t n = row / g.out_h;
      const std::int64_t oh = row % g.out_h;
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        for (std::int64_t co = 0; co < g.out_c; ++co) {
          acc[co] = bias ? static_cast<C>(bias[co]) : C(0);
        }
        for_each_window_cell(g, oh, ow, [&](auto kh, auto kw, auto ih, auto iw) {
          const T* x_cell = x + ((n * g.in_h + ih) * g.in_w + iw) * g.in_c;
          const T* f_cell = filter + (kh * g.k_w + kw) * cell_stride;
          for (std::int64_t ci = 0; ci < g.in_c; ++ci) {
            const C x_value = static_cast<C>(x_cell[ci]);
            const T* f_row = f_cell + ci * g.out_c;
            for (std::int64_t co = 0; co < g.out_c; ++co) {
              acc[co] += x_value * static_cast<C>(f_row[co]);
            }
          }
        });
        T* y_cell = y + (row * g.out_w + ow) * g.out_c;
        for (std::int64_t co = 0; co < g.out_c; ++co) {
          // A fused relu as the relu kernel has it (NaN becomes 0), before rounding to T, which
          // it commutes with.
          const C value = relu ? (acc[co] > C(0) ? acc[co] : C(0)) : acc[co];
          y_cell[co] = convert_element<T>(value);
        }
      }
    }
  };
  parallel_for(g.batch * g.out_h, g.out_w * g.k_h * g.k_w * cell_stride, rows);
}

// dx[n, ih, iw, ci] = sum of dy[n, oh, ow, co] * filter[kh, kw, ci, co] over the windows
// that cover (ih, iw): a scatter from each output position into its window.
template <typename T>
void conv_backward_input_loops(const Window2D& g, const T* dy, const T* filter, T* dx) {
  using C = compute_type_t<T>;
  const std::int64_t cell_stride = g.in_c * g.out_c;
  const std::int64_t cost = g.out_h * g.out_w * g.k_h * g.k_w * cell_stride;
  accumulate_per_image<T, C>(g, cost, dx, [&](std::int64_t n, C* dx_image) {
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        const T* dy_cell = dy + ((n * g.out_h + oh) * g.out_w + ow) * g.out_c;
        for_each_window_cell(g, oh, ow, [&](auto kh, auto kw, auto ih, auto iw) {
          const T* f_cell = filter + (kh * g.k_w + kw) * cell_stride;
          C* dx_cell = dx_image + (ih * g.in_w + iw) * g.in_c;
          for (std::int64_t ci = 0; ci < g.in_c; ++ci) {
            const T* f_row = f_cell + ci * g.out_c;
            C sum = 0;
            for (std::int64_t co = 0; co < g.out_c; ++co) {
              sum += static_cast<C>(dy_cell[co]) * static_cast<C>(f_row[co]);
            }
            dx_cell[ci] += sum;
          }
        });
      }
    }
  });
}

// d_bias[co] = sum over (n, oh, ow) of dy[n, oh, ow, co].
template <typename T>
void bias_gradient_loops(const Window2D& g, const T* dy, T* d_bias) {
  using C = compute_type_t<T>;
  std::vector<C> bias_acc(static_cast<std::size_t>(g.out_c), C(0));  // (C_out,)
  const std::int64_t positions = g.positions();
  for (std::int64_t p = 0; p < positions; ++p) {
    for (std::int64_t co = 0; co < g.out_c; ++co) {
      bias_acc[co] += static_cast<C>(dy[p * g.out_c + co]);
    }
  }
  for (std::int64_t co = 0; co < g.out_c; ++co) {
    d_bias[co] = convert_element<T>(bias_acc[co]);
  }
}

// d_filter[kh, kw, ci, co] = sum over (n, oh, ow) of x[n, ih, iw, ci] * dy[n, oh, ow, co];
// each thread owns whole window cells (kh, kw), so no two threads write the same element.
template <typename T>
void conv_backward_filter_loops(const Window2D& g, const T* x, const T* dy, T* d_filter,
                                T* d_bias) {
  using C = compute_type_t<T>;
  const std::int64_t cell_stride = g.in_c * g.out_c;
  auto cells = [&](std::int64_t begin, std::int64_t end) {
    std::vector<C> acc(static_cast<std::size_t>(cell_stride));  // (C_in, C_out)
    for (std::int64_t cell = begin; cell < end; ++cell) {
      const std::int64_t kh = cell / g.k_w;
      const std::int64_t kw = cell % g.k_w;
      std::fill(acc.begin(), acc.end(), C(0));
      for (std::int64_t n = 0; n < g.batch; ++n) {
        for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
          const std::int64_t ih = oh * g.strides[0] - g.pad_before[0] + kh * g.dilations[0];
          if (ih < 0 || ih >= g.in_h) continue;
          for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
            const std::int64_t iw = ow * g.strides[1] - g.pad_before[1] + kw * g.dilations[1];
            if (iw < 0 || iw >= g.in_w) continue;
            const T* x_cell = x + ((n * g.in_h + ih) * g.in_w + iw) * g.in_c;
            const T* dy_cell = dy + ((n * g.out_h + oh) * g.out_w + ow) * g.out_c;
            for (std::int64_t ci = 0; ci < g.in_c; ++ci) {
              const C x_value = static_cast<C>(x_cell[ci]);
              C* acc_row = acc.data() + ci * g.out_c;
              for (std::int64_t co = 0; co < g.out_c; ++co) {
                acc_row[co] += x_value * static_cast<C>(dy_cell[co]);
              }
            }
          }
        }
      }
      T* d_cell = d_filter + cell * cell_stride;
      for (std::int64_t i = 0; i < cell_stride; ++i) {
        d_cell[i] = convert_element<T>(acc[i]);
      }
    }
  };
  parallel_for(g.k_h * g.k_w, g.positions() * cell_stride, cells);
  if (d_bias != nullptr) bias_gradient_loops(g, dy, d_bias);
}

template <typename T>
const T* data_or_null(std::span<const Tensor> tensors, std::size_t index) {
  return index < tensors.size() ? static_cast<const T*>(tensors[index].raw_data()) : nullptr;
}

void conv_loops(const KernelContext& c, const Window2D& g) {
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      const T* in0 = static_cast<const T*>(c.inputs[0].raw_data());
      const T* in1 = static_cast<const T*>(c.inputs[1].raw_data());
      T* out0 = static_cast<T*>(c.outputs[0].raw_data());
      switch (c.kind) {
        case OpKind::conv2d: {
          const Conv2DAttrs attrs = op_attrs<OpKind::conv2d>(c.attrs);
          const bool bias = has_bias_input(c.inputs.size(), attrs.fused_add);
          conv_forward_loops(g, in0, in1, bias ? data_or_null<T>(c.inputs, 2) : nullptr,
                             attrs.fused_relu && !attrs.fused_add, out0);
          if (attrs.fused_add) add_residual(c.inputs.back(), c.outputs[0], attrs.fused_relu);
          break;
        }
        case OpKind::conv2d_backward_input:
          conv_backward_input_loops(g, in0, in1, out0);
          break;
        default:
          conv_backward_filter_loops(
              g, in0, in1, out0,
              c.outputs.size() == 2 ? static_cast<T*>(c.outputs[1].raw_data()) : nullptr);
          break;
      }
    }
  });
}

// ---- oneDNN (f32, bf16) ----
// Our filter (KH, KW, C_in, C_out) is oneDNN's hwio layout of logical dims (O, I, H, W).
memory::desc filter_desc(const Window2D& g, memory::data_type type, memory::format_tag tag) {
  return memory::desc({g.out_c, g.in_c, g.k_h, g.k_w}, type, tag);
}

memory::desc bias_desc(const Window2D& g, memory::data_type type) {
  return memory::desc({g.out_c}, type, memory::format_tag::a);
}

// Moves a filter between our layout and the one a primitive chose; nothing to do when they
// agree.
struct FilterReorder {
  memory::desc ours;
  memory::desc chosen;
  std::optional<dnnl::reorder> reorder;
};

FilterReorder make_filter_reorder(const memory::desc& ours, const memory::desc& chosen,
                                  bool into_chosen) {
  FilterReorder result{ours, chosen, std::nullopt};
  if (ours == chosen) return result;
  const memory::desc& from = into_chosen ? ours : chosen;
  const memory::desc& to = into_chosen ? chosen : ours;
  result.reorder.emplace(dnnl::reorder::primitive_desc(onednn_engine(), from, onednn_engine(), to));
  return result;
}

// The filter in the primitive's layout: the tensor itself, or a reordered copy of it.
memory filter_for_primitive(const FilterReorder& layouts, const Tensor& filter) {
  const memory ours = wrap(layouts.ours, filter);
  if (!layouts.reorder) return ours;
  memory chosen(layouts.chosen, onednn_engine());
  execute(*layouts.reorder, {{DNNL_ARG_FROM, ours}, {DNNL_ARG_TO, chosen}});
  return chosen;
}

// A constant filter reordered once into the primitive's layout, in a buffer on huge pages
// (core/huge_pages.h) rather than oneDNN's: these are what a batch-1 inference pass streams.
struct KeptFilter {
  Tensor storage;  // (bytes,) u8
  memory chosen;   // on storage
};

KeptFilter kept_filter(const FilterReorder& layouts, const Tensor& filter) {
  KeptFilter kept{
      empty_on_huge_pages({static_cast<std::int64_t>(layouts.chosen.get_size())}, DType::u8),
      memory()};
  kept.chosen = memory(layouts.chosen, onednn_engine(), kept.storage.raw_data());
  execute(*layouts.reorder,
          {{DNNL_ARG_FROM, wrap(layouts.ours, filter)}, {DNNL_ARG_TO, kept.chosen}});
  return kept;
}

struct ConvDescs {
  memory::desc x;       // (N, H, W, C_in) as nhwc
  memory::desc y;       // (N, OH, OW, C_out) as nhwc
  memory::desc filter;  // format_tag::any: the primitive picks
  memory::desc bias;    // empty without a bias
  memory::desc ours;    // our (KH, KW, C_in, C_out) filter
};

ConvDescs conv_descs(const Window2D& g, DType dtype, bool with_bias) {
  const memory::data_type type = *onednn_data_type(dtype);
  return {nhwc_desc(g.input_shape(), dtype), nhwc_desc(g.output_shape(), dtype),
          filter_desc(g, type, memory::format_tag::any),
          with_bias ? bias_desc(g, type) : memory::desc(),
          filter_desc(g, type, memory::format_tag::hwio)};
}

// Also the hint the backward primitives are built against.
dnnl::convolution_forward::primitive_desc forward_pd(const Window2D& g, const ConvDescs& d) {
  return {dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                          dnnl::algorithm::convolution_direct, d.x, d.filter,
                                          d.bias, d.y, onednn_strides(g), onednn_dilates(g),
                                          onednn_padding_l(g), onednn_padding_r(g)),
          onednn_engine()};
}

// A forward convolution: oneDNN's convolution primitive, or a matrix product of x's unrolled
// windows with the filter (build_forward_product), whose descs are then 2-D: x the windows
// (N*OH*OW, KH*KW*C_in), y (N*OH*OW, C_out), the filter (KH*KW*C_in, C_out) as it stands.
struct ConvForward {
  dnnl::primitive primitive;
  ConvDescs descs;
  FilterReorder filter;
  // A fused residual oneDNN could not take as a post-op (bf16, where adding before rounding
  // would change the bits, or only its reference kernel): added, and relu applied, afterwards.
  bool residual_after = false;
  // Set where the primitive reads the windows of x in this geometry unrolled into rows
  // (unroll_windows into descs.x) rather than x: the positions a strided 1x1 convolution reads,
  // packed for the unit-stride convolution of them, or a product's windows.
  std::optional<Window2D> unrolls;
};

// What conv_forward_onednn keeps for a compiled node (KernelContext::state): the entry it looked
// up by `key`, and the primitive's arguments on the node's buffers, a constant filter's reordered
// copy among them.
struct ConvForwardState final : KernelState {
  PrimitiveKey key;
  std::shared_ptr<const ConvForward> entry;
  std::optional<std::uint64_t> constant_filter;   // the constant whose copy args holds
  std::shared_ptr<const KeptFilter> kept_filter;  // that copy
  PrimitiveArguments args;
};

// An input gradient: oneDNN's primitive, or the product dy (N*OH*OW, C_out) x filter^T
// (C_out, KH*KW*C_in), the filter read transposed where it stands (build_backward_input_product).
struct ConvBackwardInput {
  dnnl::primitive primitive;
  ConvDescs descs;
  FilterReorder filter;
  // Set where the primitive computes the gradient of x's windows in this geometry, unrolled
  // (descs.x), which fold_windows sums into dx afterwards: the packed positions of a strided 1x1
  // convolution, or a product's windows.
  std::optional<Window2D> folds_into;
  // Set where the primitive runs on one output channel more than the convolution has, which the
  // caller appends to dy and the filter as zeros (build_backward_input_as_given).
  bool zero_channel = false;
};

// A filter gradient as one matrix product over the whole batch, its windows unrolled into rows:
// d_filter (KH*KW*C_in, C_out) = patches^T (KH*KW*C_in, N*OH*OW) x dy (N*OH*OW, C_out), whose
// result is our filter layout as it stands. Where onednn_matmul_extents pads the product (the
// summed N*OH*OW to padded.k, C_out to padded.n), the patches and dy get zero rows and columns and
// d_filter is copied out of a padded buffer.
struct FilterGradientProduct {
  dnnl::matmul primitive;
  memory::desc patches;             // (padded.k, KH*KW*C_in), row-major
  memory::desc patches_transposed;  // the same buffer read as (KH*KW*C_in, padded.k)
  memory::desc dy;                  // (padded.k, padded.n)
  memory::desc d_filter;            // (KH*KW*C_in, padded.n)
  MatmulExtents padded;
};

struct ConvBackwardFilter {
  dnnl::convolution_backward_weights primitive;
  ConvDescs descs;
  FilterReorder filter;
  // Set where the gradient runs as one product instead of the primitive (build_backward_filter).
  std::optional<FilterGradientProduct> product;
};

// The primitive descriptor build(residual, relu) makes with a fused residual and relu as post-ops,
// applied to each result before it is stored; without either where `residual_after` is set or
// only oneDNN's reference kernel takes the residual (residual_after is then set: the caller adds
// it, and applies relu, afterwards).
template <typename Build>
auto build_with_post_ops(Build build, Residual residual, bool fused_relu, bool& residual_after) {
  auto pd = build(residual_after ? Residual::none : residual, fused_relu && !residual_after);
  if (residual != Residual::none && !residual_after &&
      is_reference_implementation(pd.impl_info_str())) {
    residual_after = true;
    pd = build(Residual::none, false);
  }
  return pd;
}

ConvForward build_forward_as_given(const Window2D& g, DType dtype, bool with_bias, bool fused_relu,
                                   Residual residual) {
  const ConvDescs descs = conv_descs(g, dtype, with_bias);
  const auto build = [&](Residual post_op, bool relu) {
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                        dnnl::algorithm::convolution_direct, descs.x, descs.filter,
                                        descs.bias, descs.y, onednn_strides(g), onednn_dilates(g),
                                        onednn_padding_l(g), onednn_padding_r(g)),
        fused_post_ops(post_op, descs.y, relu), onednn_engine());
  };
  bool residual_after = residual != Residual::none && dtype != DType::f32;
  const auto pd = build_with_post_ops(build, residual, fused_relu, residual_after);
  return {dnnl::convolution_forward(pd), descs,
          make_filter_reorder(descs.ours, pd.weights_desc(), true), residual_after, std::nullopt};
}

// Whether `g` is a strided 1x1 convolution that reads only input positions at multiples of its
// strides (no padding before, none read past the end): the same as a unit-stride 1x1
// convolution of those positions.
bool reads_strided_positions_only(const Window2D& g) {
  return g.k_h == 1 && g.k_w == 1 && (g.strides[0] > 1 || g.strides[1] > 1) &&
         g.pad_before[0] == 0 && g.pad_before[1] == 0 && (g.out_h - 1) * g.strides[0] < g.in_h &&
         (g.out_w - 1) * g.strides[1] < g.in_w;
}

// The unit-stride 1x1 convolution of the positions a strided one reads.
Window2D on_packed_positions(const Window2D& g) {
  Window2D packed = g;
  packed.in_h = g.out_h;
  packed.in_w = g.out_w;
  packed.strides = {1, 1};
  packed.pad_before = packed.pad_after = {0, 0};
  return packed;
}

// oneDNN's name for the kernel a primitive runs ("jit_1x1:avx2").
std::string implementation(const dnnl::primitive& primitive) {
  const char* name = nullptr;
  dnnl::error::wrap_c_api(
      dnnl_primitive_desc_query(primitive.get_primitive_desc(), dnnl_query_impl_info_str, 0, &name),
      "could not read a primitive's implementation name");
  return name;
}

// oneDNN 2.6 runs some strided 1x1 convolutions on its generic direct kernel ("jit:avx2")
// rather than its 1x1 one. On an AVX2 CPU ResNet-50's 1024-to-2048-channel one from 7x7 to 4x4
// ran at a quarter of the 1x1 kernel's speed on the same positions (1.49 against 0.39 ms at
// batch 1, 11.9 against 3.2 ms at batch 8, the packing included). Such a convolution runs as a
// copy that packs the positions it reads and the unit-stride convolution of them, where that one
// gets the 1x1 kernel; the others run as given.
ConvForward build_forward_primitive(const Window2D& g, DType dtype, bool with_bias, bool fused_relu,
                                    Residual residual) {
  ConvForward as_given = build_forward_as_given(g, dtype, with_bias, fused_relu, residual);
  if (!reads_strided_positions_only(g) ||
      implementation(as_given.primitive).rfind("jit:", 0) != 0) {
    return as_given;
  }
  ConvForward packed =
      build_forward_as_given(on_packed_positions(g), dtype, with_bias, fused_relu, residual);
  if (implementation(packed.primitive).find("1x1") == std::string::npos) return as_given;
  packed.unrolls = g;
  return packed;
}

ConvBackwardInput backward_data_primitive(const Window2D& g, DType dtype) {
  const ConvDescs descs = conv_descs(g, dtype, false);
  const dnnl::convolution_backward_data::primitive_desc pd(
      dnnl::convolution_backward_data::desc(
          dnnl::algorithm::convolution_direct, descs.x, descs.filter, descs.y, onednn_strides(g),
          onednn_dilates(g), onednn_padding_l(g), onednn_padding_r(g)),
      onednn_engine(), forward_pd(g, descs));
  return {dnnl::convolution_backward_data(pd), descs,
          make_filter_reorder(descs.ours, pd.weights_desc(), true), std::nullopt};
}

// oneDNN 2.6's bf16 1x1 backward-data kernel (jit_bf16_1x1) gets dx wrong where C_out, the length
// it sums, is odd and it takes 30 output positions at a time (as for H*W = 30, 59, 60, 89, 90, ...
// at small H): an odd C_out rules out its explicit broadcasts, so it keeps up to 30 positions'
// sums in registers, and the register it broadcasts the last, odd, dy value into (zmm30) is then
// the one that holds the filter's values (errors as large as the gradient). In a standalone
// oneDNN 2.6.3 program on an AMD EPYC (avx512_core_bf16, 2 threads), 58 of 2,000 random shapes (N
// 1-3, H and W 1-20, channels 1-70) failed, every one with an odd C_out; none of the 2,000 with
// its emulated bf16 (avx512_core: at most 10 positions at a time). AMX CPUs run the same kernel
// where oneDNN's AMX one declines. Such a gradient runs on C_out + 1 channels instead, a zero one
// appended to dy and the filter (zero products add nothing), on any ISA: the name decides.
ConvBackwardInput build_backward_input_as_given(const Window2D& g, DType dtype) {
  ConvBackwardInput given = backward_data_primitive(g, dtype);
  if (g.out_c % 2 == 0 || !implementation(given.primitive).starts_with("jit_bf16_1x1")) {
    return given;
  }
  Window2D even = g;
  even.out_c += 1;
  ConvBackwardInput padded = backward_data_primitive(even, dtype);
  padded.zero_channel = true;
  return padded;
}

// A strided 1x1 convolution that reads only strided positions has a gradient that is zero
// elsewhere and, at those positions, the unit-stride convolution's gradient of them: computed
// packed and scattered, never through oneDNN 2.6's own strided 1x1 backward-data kernel, which
// writes past a buffer of its own on some geometries (valgrind: jit_1x1:avx2 with iw3 ow1 sw3,
// a wrong result under ASan).
ConvBackwardInput build_backward_input_primitive(const Window2D& g, DType dtype) {
  if (!reads_strided_positions_only(g)) return build_backward_input_as_given(g, dtype);
  ConvBackwardInput packed = build_backward_input_as_given(on_packed_positions(g), dtype);
  packed.folds_into = g;
  return packed;
}

// The product for geometry `g`, or nothing where oneDNN has only its reference matmul for it.
std::optional<FilterGradientProduct> filter_gradient_product(const Window2D& g, DType dtype) {
  const memory::data_type type = *onednn_data_type(dtype);
  const std::int64_t rows = g.positions();
  const std::int64_t columns = g.window_entries();
  const MatmulExtents padded = onednn_matmul_extents(rows, g.out_c, dtype);
  const memory::desc patches({padded.k, columns}, type, memory::dims{columns, 1});
  const memory::desc patches_transposed({columns, padded.k}, type, memory::dims{1, columns});
  const memory::desc dy({padded.k, padded.n}, type, memory::dims{padded.n, 1});
  const memory::desc d_filter({columns, padded.n}, type, memory::dims{padded.n, 1});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(patches_transposed, dy, d_filter),
                                        onednn_engine());
  if (is_reference_implementation(pd.impl_info_str())) return std::nullopt;
  return FilterGradientProduct{dnnl::matmul(pd), patches, patches_transposed, dy, d_filter, padded};
}

// The size of the unrolled windows above which a gradient stays on oneDNN's kernel, whatever it
// is: they are a copy of x for each window cell (a 7x7 convolution's at 224x224 and batch 64:
// 470 MB).
constexpr std::int64_t kMaxPatchBytes = std::int64_t{64} << 20;

// Whether a convolution has few output positions for its channels: N*OH*OW at most the larger
// channel count, its unrolled windows within kMaxPatchBytes in f32. Such a convolution runs as
// matrix products of the unrolled windows with the filter as it stands, in all three directions
// (build_forward_product, build_backward_input_product, FilterGradientProduct), in f32, and in
// bf16 where the product needs no padding (runs_unpadded).
// oneDNN 2.6's direct kernels are slow on them, and each call reorders the whole filter into
// their blocked layout (and the filter gradient out of one) for little work: ResNet-50's 3x3
// 512-channel convolution at 2x2 (from 64x64 inputs, batch 16, 64 positions) took 4.9 ms forward
// (3.6 the convolution, the rest the 9.4 MB filter's reorder), 2.2 ms backward to x and 3.8 ms to
// the filter on an AMX Xeon (2 threads), against 1.4, 1.2 and 1.1 ms as products; its 1x1
// 2048-to-512 one 1.9, 0.8 and 1.2 ms against 0.55, 0.49 and 0.43. At 4x4 (256 positions,
// 256-1024 channels) the products were 0-25% faster, bar the 3x3 one's input gradient (1.13
// against 0.97 ms); from 1024 positions on (8x8, 128-512 channels) the primitives were as fast or
// faster, up to 1.5x at 16x16 with 64 channels (bench/RESULTS.md, 2026-12-05 mid-morning).
bool has_few_positions(const Window2D& g) {
  return g.positions() <= std::max(g.in_c, g.out_c) &&
         g.positions() * g.window_entries() * std::int64_t{4} <= kMaxPatchBytes;
}

// Whether x is its own unrolled windows: a 1x1 window at unit stride without padding.
bool windows_are_input(const Window2D& g) {
  return g.k_h == 1 && g.k_w == 1 && g.strides == std::array<std::int64_t, 2>{1, 1} &&
         g.pad_before == std::array<std::int64_t, 2>{0, 0} &&
         g.pad_after == std::array<std::int64_t, 2>{0, 0};
}

// Whether a oneDNN product of (M, k) by (k, n) in `dtype` runs on the operands as they stand: f32
// always; bf16 where its AMX product needs no zero padding (onednn_matmul_extents), which would
// take a padded copy of the filter on every call. ResNet's channel counts need none.
bool runs_unpadded(DType dtype, std::int64_t k, std::int64_t n) {
  if (dtype == DType::f32) return true;
  const MatmulExtents extents = onednn_matmul_extents(k, n, dtype);
  return dtype == DType::bf16 && extents.k == k && extents.n == n;
}

// Row-major (rows, columns).
memory::desc matrix(std::int64_t rows, std::int64_t columns, DType dtype) {
  return memory::desc({rows, columns}, *onednn_data_type(dtype), memory::dims{columns, 1});
}

// y (N*OH*OW, C_out) = windows (N*OH*OW, KH*KW*C_in) x filter (KH*KW*C_in, C_out) + bias, with
// the residual and relu as post-ops (in bf16 added afterwards, as build_forward_as_given does).
// A constant filter (constant_forward_filter keeps it reordered) is read in the layout the product
// picks, others as they stand: with the filter row-major oneDNN packs it again inside every call,
// which at inference (ResNet-50 at 112x112, 2 threads, filters cold in cache) made the batch-8 3x3
// 512-channel product at 4x4 3.46 against 2.39 ms, the batch-1 1x1 512-to-256 one at 14x14 0.19
// against 0.16 ms.
ConvForward build_forward_product(const Window2D& g, DType dtype, bool with_bias, bool fused_relu,
                                  Residual residual, bool constant_filter) {
  const memory::desc ours = matrix(g.window_entries(), g.out_c, dtype);
  const memory::desc filter = constant_filter
                                  ? memory::desc({g.window_entries(), g.out_c},
                                                 *onednn_data_type(dtype), memory::format_tag::any)
                                  : ours;
  const ConvDescs descs{matrix(g.positions(), g.window_entries(), dtype),
                        matrix(g.positions(), g.out_c, dtype), filter,
                        with_bias ? matrix(1, g.out_c, dtype) : memory::desc(), ours};
  const auto build = [&](Residual post_op, bool relu) {
    return dnnl::matmul::primitive_desc(
        dnnl::matmul::desc(descs.x, descs.filter, descs.bias, descs.y),
        fused_post_ops(post_op, descs.y, relu), onednn_engine());
  };
  bool residual_after = residual != Residual::none && dtype != DType::f32;
  const auto pd = build_with_post_ops(build, residual, fused_relu, residual_after);
  return {dnnl::matmul(pd), descs, make_filter_reorder(ours, pd.weights_desc(), true),
          residual_after, windows_are_input(g) ? std::nullopt : std::optional<Window2D>(g)};
}

// d_windows (N*OH*OW, KH*KW*C_in) = dy (N*OH*OW, C_out) x filter^T, folded into dx afterwards.
ConvBackwardInput build_backward_input_product(const Window2D& g, DType dtype) {
  const memory::desc filter_transposed({g.out_c, g.window_entries()}, *onednn_data_type(dtype),
                                       memory::dims{1, g.out_c});
  // Windows' gradients that fold_windows sums are kept in f32, so a bf16 dx is rounded once.
  const bool folded = !windows_are_input(g);
  const ConvDescs descs{matrix(g.positions(), g.window_entries(), folded ? DType::f32 : dtype),
                        matrix(g.positions(), g.out_c, dtype), filter_transposed, memory::desc(),
                        filter_transposed};
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(descs.y, descs.filter, descs.x),
                                        onednn_engine());
  return {dnnl::matmul(pd), descs,
          FilterReorder{filter_transposed, filter_transposed, std::nullopt},
          folded ? std::optional<Window2D>(g) : std::nullopt};
}

// `products`: whether few-position convolutions may run as products (has_few_positions); see
// products_allowed. Not where oneDNN has only its reference matmul for one (bf16 on a CPU
// without native bf16, say).
ConvForward build_forward(const Window2D& g, DType dtype, bool with_bias, bool fused_relu,
                          Residual residual, bool products, bool constant_filter) {
  if (products && has_few_positions(g) && runs_unpadded(dtype, g.window_entries(), g.out_c)) {
    ConvForward product =
        build_forward_product(g, dtype, with_bias, fused_relu, residual, constant_filter);
    if (!is_reference_implementation(implementation(product.primitive).c_str())) return product;
  }
  return build_forward_primitive(g, dtype, with_bias, fused_relu, residual);
}

ConvBackwardInput build_backward_input(const Window2D& g, DType dtype, bool products) {
  if (products && has_few_positions(g) && runs_unpadded(dtype, g.out_c, g.window_entries())) {
    ConvBackwardInput product = build_backward_input_product(g, dtype);
    if (!is_reference_implementation(implementation(product.primitive).c_str())) return product;
  }
  return build_backward_input_primitive(g, dtype);
}

// oneDNN 2.6 computes some filter gradients with its im2col-and-GEMM kernel ("gemm:jit"), one
// image at a time, so that each product sums over one image's output positions only. Where those
// are few (ResNet-50's 3x3 512-channel convolutions at 2x2, from 64x64 inputs: 4 positions) that
// kernel ran at 20 GFLOP/s on an AVX2 CPU, against 80-100 for its direct kernels on the
// neighbouring layers. Such a gradient runs as one product over the whole batch instead
// (FilterGradientProduct): 15.3 -> 2.1 ms a call at batch 16 in oneDNN's timings of the two, and
// the unrolling copies 1.2 MB. So does one with few positions for its channels
// (has_few_positions; in bf16 with the padding FilterGradientProduct gives it), and a strided 1x1
// convolution's that reads strided positions only (its unrolled windows are those positions,
// packed): oneDNN 2.6's strided 1x1 kernels read and write past buffers of their own on some
// geometries (see build_backward_input_primitive), which gave filter gradients that changed from
// run to run in a build with another heap layout. The others run on the primitive oneDNN chose.
ConvBackwardFilter build_backward_filter(const Window2D& g, DType dtype, bool with_bias) {
  const ConvDescs descs = conv_descs(g, dtype, with_bias);
  const dnnl::convolution_backward_weights::primitive_desc pd(
      dnnl::convolution_backward_weights::desc(
          dnnl::algorithm::convolution_direct, descs.x, descs.filter, descs.bias, descs.y,
          onednn_strides(g), onednn_dilates(g), onednn_padding_l(g), onednn_padding_r(g)),
      onednn_engine(), forward_pd(g, descs));
  ConvBackwardFilter result{dnnl::convolution_backward_weights(pd), descs,
                            make_filter_reorder(descs.ours, pd.diff_weights_desc(), false),
                            std::nullopt};
  const auto patch_bytes =
      g.positions() * g.window_entries() * static_cast<std::int64_t>(dtype_size(dtype));
  if (reads_strided_positions_only(g) || has_few_positions(g) ||
      (implementation(result.primitive).find("gemm") != std::string::npos &&
       patch_bytes <= kMaxPatchBytes)) {
    result.product = filter_gradient_product(g, dtype);
  }
  return result;
}

// Primitives per direction: a model's distinct shapes, twice over when the automatic thread count
// changes the team size (thread_budget.h).
constexpr std::size_t kCacheCapacity = 128;

// A constant filter (an inference model's: Tensor::is_constant) in the forward primitive's layout,
// reordered once and kept, keyed by the primitive and the filter; at batch 1 reordering
// ResNet-50's filters on every call took longer than its convolutions.
std::shared_ptr<const KeptFilter> constant_forward_filter(const PrimitiveKey& primitive,
                                                          const ConvForward& entry,
                                                          const Tensor& filter) {
  static PrimitiveCache<KeptFilter> constants(512);
  PrimitiveKey key = primitive;
  key.push_back(static_cast<std::int64_t>(filter.id()));
  return constants.get(key, [&] { return kept_filter(entry.filter, filter); });
}

// Unrolls the windows of x (N, H, W, C_in) into `patches` (N*OH*OW, KH*KW*C_in): row
// (n, oh, ow) holds the window cells (kh, kw) in order, each its C_in channels, zeros where the
// window reads padding.
void unroll_windows(const Window2D& g, const Tensor& x, const memory& patches) {
  const auto cell = static_cast<std::size_t>(g.in_c) * dtype_size(x.dtype());
  const auto* from = static_cast<const std::byte*>(x.raw_data());
  auto* to = static_cast<std::byte*>(patches.get_data_handle());
  const auto row_bytes = static_cast<std::size_t>(g.k_h * g.k_w) * cell;
  parallel_for(g.positions(), g.window_entries(), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t n = row / (g.out_h * g.out_w);
      const std::int64_t oh = row / g.out_w % g.out_h;
      const std::int64_t ow = row % g.out_w;
      std::byte* out = to + static_cast<std::size_t>(row) * row_bytes;
      for (std::int64_t kh = 0; kh < g.k_h; ++kh) {
        const std::int64_t ih = oh * g.strides[0] - g.pad_before[0] + kh * g.dilations[0];
        for (std::int64_t kw = 0; kw < g.k_w; ++kw, out += cell) {
          const std::int64_t iw = ow * g.strides[1] - g.pad_before[1] + kw * g.dilations[1];
          if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) {
            std::memset(out, 0, cell);
          } else {
            std::memcpy(
                out, from + static_cast<std::size_t>((n * g.in_h + ih) * g.in_w + iw) * cell, cell);
          }
        }
      }
    }
  });
}

// fold_windows for windows' gradients of type S (dx's type T or f32).
template <typename S, typename T>
void fold_windows_from(const Window2D& g, const memory& d_windows, T* to) {
  using C = compute_type_t<T>;
  const auto* from = static_cast<const S*>(d_windows.get_data_handle());
  // The output index along one axis whose window cell `k` reads input index `i`, or -1.
  const auto reader = [&](std::int64_t i, std::int64_t k, int axis, std::int64_t out) {
    const std::int64_t offset = i + g.pad_before[axis] - k * g.dilations[axis];
    if (offset < 0 || offset % g.strides[axis] != 0) return std::int64_t{-1};
    const std::int64_t o = offset / g.strides[axis];
    return o < out ? o : std::int64_t{-1};
  };
  const std::int64_t cost = g.window_entries();
  parallel_for(g.batch * g.in_h, g.in_w * cost, [&](std::int64_t begin, std::int64_t end) {
    std::vector<C> sums(static_cast<std::size_t>(g.in_c));  // (C_in,)
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t n = row / g.in_h;
      const std::int64_t ih = row % g.in_h;
      for (std::int64_t iw = 0; iw < g.in_w; ++iw) {
        std::fill(sums.begin(), sums.end(), C(0));
        for (std::int64_t kh = 0; kh < g.k_h; ++kh) {
          const std::int64_t oh = reader(ih, kh, 0, g.out_h);
          if (oh < 0) continue;
          for (std::int64_t kw = 0; kw < g.k_w; ++kw) {
            const std::int64_t ow = reader(iw, kw, 1, g.out_w);
            if (ow < 0) continue;
            const S* cell = from + ((n * g.out_h + oh) * g.out_w + ow) * g.window_entries() +
                            (kh * g.k_w + kw) * g.in_c;
            for (std::int64_t ci = 0; ci < g.in_c; ++ci) {
              sums[ci] += static_cast<C>(cell[ci]);
            }
          }
        }
        T* dx_cell = to + ((n * g.in_h + ih) * g.in_w + iw) * g.in_c;
        for (std::int64_t ci = 0; ci < g.in_c; ++ci) {
          dx_cell[ci] = convert_element<T>(sums[ci]);
        }
      }
    }
  });
}

// The adjoint of unroll_windows: dx (N, H, W, C_in) = the sum, over the windows that read each
// position, of that window cell's gradient in `d_windows` (N*OH*OW, KH*KW*C_in); zero where no
// window reads. `d_windows` holds dx's dtype or f32. Each position gathers its cells and sums
// them in the compute type, rounding once (a bf16 sum rounded at every add would lose bits with
// each overlapping window).
void fold_windows(const Window2D& g, const memory& d_windows, const Tensor& dx) {
  const bool from_f32 = d_windows.get_desc().data_type() == memory::data_type::f32;
  visit_dtype(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      if (from_f32) {
        fold_windows_from<float>(g, d_windows, static_cast<T*>(dx.raw_data()));
      } else {
        fold_windows_from<T>(g, d_windows, static_cast<T*>(dx.raw_data()));
      }
    }
  });
}

// Whether a convolution with few positions for its channels may run as products. Not in
// deterministic mode, where oneDNN's matmul may split its sums across threads. With a constant
// forward filter (an inference model's, reordered once and kept: constant_forward_filter) only from
// 64 positions on: below that oneDNN's kernels on the kept filter were faster (ResNet-50 at
// 112x112, batch 1, 2 threads: 0.30 against 0.59 ms for the 3x3 512-channel convolution at 4x4,
// 0.12 against 0.22 for the 1x1 2048-to-512 one; the pass 11.2 against 13.3 ms), above it slower
// (batch 8: 125 against 132 images/s). Those products read the filter row-major; on the kept
// packed filter (build_forward_product) below 64 positions they are even with the kernels (the
// batch-1 pass 12.6-13.0 against 12.7-13.4 ms), so the kernels keep them.
bool products_allowed(const Window2D& g, bool constant_filter) {
  if (deterministic()) return false;
  return !constant_filter || g.positions() >= 64;
}

#if defined(__x86_64__)
// An f32 tensor's elements, for the AVX-512 loops of our own.
const float* f32_data(const Tensor& tensor) {
  return static_cast<const float*>(tensor.raw_data());
}

// What conv_forward_streamed keeps for a compiled node (KernelContext::state): the panels of the
// constant filter it read last, and the buffer it unrolls windows into.
struct StreamedConvState final : KernelState {
  std::optional<std::uint64_t> filter;  // the constant `panels` were made from
  std::shared_ptr<const Tensor> panels;
  Tensor windows;  // (N*OH*OW, KH*KW*C_in)
  std::optional<memory> windows_memory;
};

// A constant filter over at most 16 positions (streamed_filter_fits): the loops of
// conv_streamed_filter.cpp, on the filter's panels made once and kept while the filter lives.
// The panels depend on the filter alone, so every batch size shares them.
void conv_forward_streamed(const KernelContext& c, const Window2D& g) {
  static ConstantDerivedCache<Tensor> kept_panels;
  const Conv2DAttrs attrs = op_attrs<OpKind::conv2d>(c.attrs);
  const Tensor& filter = c.inputs[1];  // (KH, KW, C_in, C_out)
  StreamedConvState eager;
  StreamedConvState* const kept = kept_state<StreamedConvState>(c);
  StreamedConvState& state = kept != nullptr ? *kept : eager;
  if (state.filter != filter.id()) {
    state.panels = kept_panels.get({static_cast<std::int64_t>(filter.id())}, filter,
                                   [&] { return filter_panels(g, filter); });
    state.filter = filter.id();
  }
  const bool unrolled = !windows_are_input(g);  // x is not its own windows
  if (unrolled) {
    if (!state.windows_memory) {
      state.windows = Tensor::empty({g.positions(), g.window_entries()}, DType::f32);
      state.windows_memory =
          wrap(matrix(g.positions(), g.window_entries(), DType::f32), state.windows);
    }
    unroll_windows(g, c.inputs[0], *state.windows_memory);
  }
  const bool with_bias = has_bias_input(c.inputs.size(), attrs.fused_add);
  streamed_filter_conv(g, f32_data(unrolled ? state.windows : c.inputs[0]), f32_data(*state.panels),
                       with_bias ? f32_data(c.inputs[2]) : nullptr,
                       attrs.fused_add ? f32_data(c.inputs.back()) : nullptr, attrs.fused_relu,
                       static_cast<float*>(c.outputs[0].raw_data()));
}
#endif

void conv_forward_onednn(const KernelContext& c, const Window2D& g) {
  static PrimitiveCache<ConvForward> cache(kCacheCapacity);
  const DType dtype = c.inputs[0].dtype();
  const Conv2DAttrs attrs = op_attrs<OpKind::conv2d>(c.attrs);
  const bool with_bias = has_bias_input(c.inputs.size(), attrs.fused_add);
  const Tensor& y = c.outputs[0];  // (N, OH, OW, C_out)
  // A compiled graph may write y over the residual's buffer (conv2d's in-place input).
  const bool onto_residual = attrs.fused_add && y.raw_data() == c.inputs.back().raw_data();
  const Residual residual = !attrs.fused_add ? Residual::none
                            : onto_residual  ? Residual::in_destination
                                             : Residual::operand;
  PrimitiveKey key = window_key(c.kind, dtype, g);
  key.push_back(with_bias);
  key.push_back(attrs.fused_relu);
  key.push_back(static_cast<std::int64_t>(residual));
  const bool constant_filter = c.inputs[1].is_constant();
  const bool products = products_allowed(g, constant_filter);
  key.push_back(products);
  key.push_back(constant_filter);
  ConvForwardState eager;
  ConvForwardState* const kept = kept_state<ConvForwardState>(c);
  ConvForwardState& state = kept != nullptr ? *kept : eager;
  if (state.entry == nullptr || state.key != key) {
    state.entry = cache.get(key, [&] {
      return build_forward(g, dtype, with_bias, attrs.fused_relu, residual, products,
                           constant_filter);
    });
    state.key = key;
    state.args.clear();
    state.constant_filter.reset();
    state.kept_filter.reset();
  }
  const ConvForward& entry = *state.entry;
  PrimitiveArguments& args = state.args;
  if (entry.unrolls) {
    // A buffer for this call only: a training step's products unroll megabytes a node.
    const memory windows(entry.descs.x, onednn_engine());
    unroll_windows(*entry.unrolls, c.inputs[0], windows);
    args.bind(DNNL_ARG_SRC, windows);
  } else {
    args.bind(DNNL_ARG_SRC, entry.descs.x, c.inputs[0]);
  }
  const Tensor& filter = c.inputs[1];
  if (filter.is_constant() && entry.filter.reorder) {
    if (state.constant_filter != filter.id()) {
      state.kept_filter = constant_forward_filter(key, entry, filter);
      args.bind(DNNL_ARG_WEIGHTS, state.kept_filter->chosen);
      state.constant_filter = filter.id();
    }
  } else if (entry.filter.reorder) {
    args.bind(DNNL_ARG_WEIGHTS, filter_for_primitive(entry.filter, filter));
  } else {
    args.bind(DNNL_ARG_WEIGHTS, entry.filter.ours, filter);
  }
  args.bind(DNNL_ARG_DST, entry.descs.y, y);
  if (with_bias) args.bind(DNNL_ARG_BIAS, entry.descs.bias, c.inputs[2]);
  if (residual == Residual::operand && !entry.residual_after)
    args.bind(kResidualArg, entry.descs.y, c.inputs.back());
  // Added afterwards, a residual in y's buffer is kept aside from the convolution writing it.
  const Tensor aside = entry.residual_after && onto_residual ? c.inputs.back().clone() : Tensor();
  args.execute(entry.primitive);
  if (entry.residual_after) {
    add_residual(aside.defined() ? aside : c.inputs.back(), y, attrs.fused_relu);
  }
}

void conv_backward_input_onednn(const KernelContext& c, const Window2D& g) {
  static PrimitiveCache<ConvBackwardInput> cache(kCacheCapacity);
  const DType dtype = c.inputs[0].dtype();
  const bool products = products_allowed(g, false);
  PrimitiveKey key = window_key(c.kind, dtype, g);
  key.push_back(products);
  const auto entry = cache.get(key, [&] { return build_backward_input(g, dtype, products); });
  const memory dx = entry->folds_into ? memory(entry->descs.x, onednn_engine())
                                      : wrap(entry->descs.x, c.outputs[0]);
  // (rows, C_out) -> (rows, C_out + 1), the last column zero.
  const auto with_zero_channel = [&](const Tensor& matrix, std::int64_t rows) {
    return zero_padded(matrix, {rows, g.out_c}, {g.out_c, 1}, {rows, g.out_c + 1});
  };
  const Tensor dy =
      entry->zero_channel ? with_zero_channel(c.inputs[0], g.positions()) : c.inputs[0];
  const Tensor filter =
      entry->zero_channel ? with_zero_channel(c.inputs[1], g.window_entries()) : c.inputs[1];
  // A product (build_backward_input_product) takes dy as its SRC and writes dx as its DST.
  const bool product = entry->primitive.get_kind() == dnnl::primitive::kind::matmul;
  execute(entry->primitive, {{product ? DNNL_ARG_SRC : DNNL_ARG_DIFF_DST, wrap(entry->descs.y, dy)},
                             {DNNL_ARG_WEIGHTS, filter_for_primitive(entry->filter, filter)},
                             {product ? DNNL_ARG_DST : DNNL_ARG_DIFF_SRC, dx}});
  if (entry->folds_into) fold_windows(*entry->folds_into, dx, c.outputs[0]);
}

void conv_backward_filter_product(const KernelContext& c, const Window2D& g,
                                  const FilterGradientProduct& product) {
  const memory patches(product.patches, onednn_engine());
  unroll_windows(g, c.inputs[0], patches);
  const MatmulExtents& padded = product.padded;
  const std::int64_t rows = g.positions();
  const std::int64_t columns = g.window_entries();
  const DType dtype = c.inputs[1].dtype();
  // Summed rows past N*OH*OW (a padded product's) are zeros.
  std::memset(static_cast<std::byte*>(patches.get_data_handle()) +
                  static_cast<std::size_t>(rows * columns) * dtype_size(dtype),
              0, static_cast<std::size_t>((padded.k - rows) * columns) * dtype_size(dtype));
  const bool dy_padded = padded.k != rows || padded.n != g.out_c;
  const Tensor dy =
      dy_padded ? zero_padded(c.inputs[1], {rows, g.out_c}, {g.out_c, 1}, {padded.k, padded.n})
                : c.inputs[1];  // (padded.k, padded.n)
  const Tensor d_filter = padded.n != g.out_c ? Tensor::empty({columns, padded.n}, dtype)
                                              : c.outputs[0];  // (KH*KW*C_in, padded.n)
  execute(product.primitive, {{DNNL_ARG_SRC, memory(product.patches_transposed, onednn_engine(),
                                                    patches.get_data_handle())},
                              {DNNL_ARG_WEIGHTS, wrap(product.dy, dy)},
                              {DNNL_ARG_DST, wrap(product.d_filter, d_filter)}});
  if (padded.n != g.out_c) copy_leading_columns(d_filter, c.outputs[0]);
  if (c.outputs.size() < 2) return;
  // The bias gradient, dy summed over its rows: oneDNN 2.6 has only its reference reduction.
  visit_dtype(c.inputs[1].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) {
      bias_gradient_loops(g, static_cast<const T*>(c.inputs[1].raw_data()),
                          static_cast<T*>(c.outputs[1].raw_data()));
    }
  });
}

void conv_backward_filter_onednn(const KernelContext& c, const Window2D& g) {
  static PrimitiveCache<ConvBackwardFilter> cache(kCacheCapacity);
  const DType dtype = c.inputs[0].dtype();
  const bool with_bias = c.outputs.size() == 2;
  PrimitiveKey key = window_key(c.kind, dtype, g);
  key.push_back(with_bias);
  const auto entry = cache.get(key, [&] { return build_backward_filter(g, dtype, with_bias); });
  if (entry->product) return conv_backward_filter_product(c, g, *entry->product);
  const FilterReorder& layouts = entry->filter;
  const memory d_filter = wrap(layouts.ours, c.outputs[0]);
  const memory d_filter_chosen =
      layouts.reorder ? memory(layouts.chosen, onednn_engine()) : d_filter;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(entry->descs.x, c.inputs[0])},
                                       {DNNL_ARG_DIFF_DST, wrap(entry->descs.y, c.inputs[1])},
                                       {DNNL_ARG_DIFF_WEIGHTS, d_filter_chosen}};
  if (with_bias) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(entry->descs.bias, c.outputs[1]));
  execute(entry->primitive, args);
  if (layouts.reorder) {
    execute(*layouts.reorder, {{DNNL_ARG_FROM, d_filter_chosen}, {DNNL_ARG_TO, d_filter}});
  }
}

}  // namespace

void conv_kernel(const KernelContext& c) {
  const Window2D g = conv_geometry(c);
  const DType dtype = c.inputs[0].dtype();
  // oneDNN rejects zero-sized tensors; the loops write the zeros (or nothing) they call for.
  const bool empty = shape_numel(g.input_shape()) == 0 || shape_numel(g.output_shape()) == 0;
  // oneDNN's backward-filter splits the sum over the batch across threads, so its result
  // depends on the thread count; deterministic mode sums in the loops' fixed order instead.
  const bool thread_dependent = c.kind == OpKind::conv2d_backward_filter && deterministic();
  if (onednn_float_kernels(dtype) && !empty && !thread_dependent) {
#if defined(__x86_64__)
    if (c.kind == OpKind::conv2d_backward_filter && dtype == DType::f32 &&
        few_channel_filter_gradient_fits(g)) {
      return few_channel_conv_backward_filter(
          g, f32_data(c.inputs[0]), f32_data(c.inputs[1]),
          static_cast<float*>(c.outputs[0].raw_data()),
          c.outputs.size() == 2 ? static_cast<float*>(c.outputs[1].raw_data()) : nullptr);
    }
    if (c.kind == OpKind::conv2d && c.inputs[1].is_constant() && streamed_filter_fits(g, dtype)) {
      return conv_forward_streamed(c, g);
    }
    if (c.kind == OpKind::conv2d && dtype == DType::f32 && few_channel_forward_fits(g)) {
      const Conv2DAttrs attrs = op_attrs<OpKind::conv2d>(c.attrs);
      if (!attrs.fused_add) {
        return few_channel_conv_forward(
            g, f32_data(c.inputs[0]), f32_data(c.inputs[1]),
            has_bias_input(c.inputs.size(), false) ? f32_data(c.inputs[2]) : nullptr,
            attrs.fused_relu, static_cast<float*>(c.outputs[0].raw_data()));
      }
    }
#endif
    switch (c.kind) {
      case OpKind::conv2d:
        return conv_forward_onednn(c, g);
      case OpKind::conv2d_backward_input:
        return conv_backward_input_onednn(c, g);
      default:
        return conv_backward_filter_onednn(c, g);
    }
  }
  conv_loops(c, g);
}

// pooled_conv2d (ops/fused.h): inputs conv2d's, outputs pooled (N, PH, PW, C_out) and winners
// (N, PH, PW, C_out) i8. Where the few-channel loops run the convolution (f32, on AVX-512), y is
// formed a band of rows at a time inside them and pooled from the cache; elsewhere (and in the
// 16-bit dtypes) it is formed whole by conv2d's kernel and pooled by max_pool_with_winners.
namespace {

// pooled_conv_forms_bands for the convolution's geometry `g`, once the kernel has it.
bool forms_bands([[maybe_unused]] const Window2D& g, [[maybe_unused]] DType dtype,
                 [[maybe_unused]] const Conv2DAttrs& conv_attrs) {
#if defined(__x86_64__)
  return dtype == DType::f32 && !conv_attrs.fused_add && few_channel_forward_fits(g);
#else
  return false;
#endif
}

}  // namespace

bool pooled_conv_forms_bands(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const auto conv_attrs = op_attrs<OpKind::conv2d>(pooled_convolution_parts(attrs).convolution);
  return inputs.size() >= 2 &&
         forms_bands(conv_window("pooled_conv2d", inputs[0].shape, inputs[1].shape, conv_attrs),
                     inputs[0].dtype, conv_attrs);
}

void pooled_conv_kernel(const KernelContext& c) {
  const PooledConvolutionParts parts = pooled_convolution_parts(c.attrs);
  const Conv2DAttrs conv_attrs = op_attrs<OpKind::conv2d>(parts.convolution);
  const char* op = op_name(c.kind);
  const Tensor& x = c.inputs[0];  // (N, H, W, C_in)
  const Window2D g = conv_window(op, x.shape(), c.inputs[1].shape(), conv_attrs);
  const Window2D pool =
      pool_window(op, g.output_shape(), op_attrs<OpKind::max_pool2d>(parts.pooling));
  if (c.outputs[0].numel() == 0) return;
#if defined(__x86_64__)
  if (x.numel() != 0 && forms_bands(g, x.dtype(), conv_attrs)) {
    return few_channel_pooled_conv_forward(
        g, pool, f32_data(x), f32_data(c.inputs[1]),
        has_bias_input(c.inputs.size(), false) ? f32_data(c.inputs[2]) : nullptr,
        conv_attrs.fused_relu, static_cast<float*>(c.outputs[0].raw_data()),
        static_cast<std::int8_t*>(c.outputs[1].raw_data()));
  }
#endif
  Tensor y[] = {Tensor::empty(g.output_shape(), x.dtype())};  // (N, OH, OW, C_out)
  conv_kernel({OpKind::conv2d, c.inputs, y, parts.convolution});
  max_pool_with_winners(pool, y[0], conv_attrs.fused_relu, c.outputs[0], c.outputs[1]);
}

// pooled_conv2d_backward_filter (ops/fused.h): inputs x (N, H, W, C_in), pooled_dy
// (N, PH, PW, C_out), and y (N, OH, OW, C_out) or (from_winners) the winners (N, PH, PW, C_out)
// i8. Where the filter gradient runs on the few-channel loops and the pooling's windows do not
// overlap, dy is formed a band of rows at a time inside them; elsewhere it is formed whole, by
// max_pool2d_backward's kernel or from the winners, and handed to conv2d_backward_filter's.
void pooled_conv_backward_filter_kernel(const KernelContext& c) {
  const PooledFilterGradientParts parts = pooled_filter_gradient_parts(c.attrs);
  const bool from_winners = op_attrs<OpKind::pooled_conv2d_backward_filter>(c.attrs).from_winners;
  const char* op = op_name(c.kind);
  const Tensor& x = c.inputs[0];          // (N, H, W, C_in)
  const Tensor& pooled_dy = c.inputs[1];  // (N, PH, PW, C_out)
  const auto filter_attrs = op_attrs<OpKind::conv2d_backward_filter>(parts.filter_gradient);
  const Window2D g = conv_window(op, x.shape(), filter_attrs.filter_shape, filter_attrs);
  const auto pool_attrs = op_attrs<OpKind::max_pool2d_backward>(parts.pool_gradient);
  const Window2D pool = pool_window(op, g.output_shape(), pool_attrs);
#if defined(__x86_64__)
  const bool empty = x.numel() == 0 || pooled_dy.numel() == 0 || g.positions() == 0;
  if (x.dtype() == DType::f32 && !empty && !deterministic() &&
      few_channel_filter_gradient_fits(g) && windows_are_disjoint(pool)) {
    PooledGradient gradient{.pooled_dy = f32_data(pooled_dy),
                            .relu_masked = pool_attrs.relu_masked};
    if (from_winners) {
      gradient.winners = static_cast<const std::int8_t*>(c.inputs[2].raw_data());
    } else {
      gradient.y = f32_data(c.inputs[2]);
    }
    return few_channel_pooled_conv_backward_filter(
        g, pool, f32_data(x), gradient, static_cast<float*>(c.outputs[0].raw_data()),
        c.outputs.size() == 2 ? static_cast<float*>(c.outputs[1].raw_data()) : nullptr);
  }
#endif
  Tensor dy[] = {Tensor::empty(g.output_shape(), x.dtype())};  // (N, OH, OW, C_out)
  if (from_winners) {
    winners_backward(pool, pooled_dy, c.inputs[2], dy[0]);
  } else {
    const Tensor pool_inputs[] = {pooled_dy, c.inputs[2]};
    max_pool_backward_kernel({OpKind::max_pool2d_backward, pool_inputs, dy, parts.pool_gradient});
  }
  const Tensor filter_inputs[] = {x, dy[0]};
  conv_kernel({OpKind::conv2d_backward_filter, filter_inputs, c.outputs, parts.filter_gradient});
}

void register_conv_kernels(KernelTable& table) {
  const std::uint32_t floating = floating_dtypes_mask();
  for (OpKind kind :
       {OpKind::conv2d, OpKind::conv2d_backward_input, OpKind::conv2d_backward_filter}) {
    table.set(kind, conv_kernel, floating);
  }
  table.set(OpKind::pooled_conv2d, pooled_conv_kernel, floating);
  table.set(OpKind::pooled_conv2d_backward_filter, pooled_conv_backward_filter_kernel, floating);
}

}  // namespace tandem::cpu
