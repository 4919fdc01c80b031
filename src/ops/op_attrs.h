#pragma once
// Every op's attributes as a typed struct, declared once here: its fields, each with its key,
// type and member (attr_fields), and which ops take it (TANDEM_OP_ATTRS). Wrappers build an
// op's Attrs with make_op_attrs<Kind>, shape inference, gradient rules and kernels read them
// with op_attrs<Kind>; a key is spelled in one place, so a typo cannot hide in a .cu file that
// only a GPU runs, and a kernel reading an attribute its op does not have does not compile.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tandem/attrs.h"
#include "tandem/ops.h"

namespace tandem {

// One attribute: its key in Attrs and the struct member that holds it.
template <typename Struct, typename T>
struct AttrField {
  const char* key;
  T Struct::*member;
};

struct NoAttrs {};
struct GeluAttrs {
  bool approximate = false;  // tanh approximation instead of erf
};
struct ReduceAttrs {
  std::vector<std::int64_t> axes;  // normalised by the wrapper; empty: all
  bool keepdims = false;
};
struct AxisAttrs {
  std::int64_t axis = -1;
};
struct ShapeAttrs {
  Shape shape;
};
struct ScatterAddAttrs {
  std::int64_t rows = 0;  // rows of the result
};
struct MatmulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
  // relu applied to the result in the same pass: set by a compiled step's fusion pass, never by
  // the wrappers (the gradient rule masks dy with the output first).
  bool fused_relu = false;
  // A residual (an extra last input of the output's shape) added to the result before the relu,
  // in the same pass: set by a compiled step's fusion pass, never by the wrappers.
  bool fused_add = false;
};
struct Conv2DAttrs : Conv2DOptions {
  bool fused_relu = false;  // as MatmulAttrs::fused_relu
  bool fused_add = false;   // as MatmulAttrs::fused_add
};
// A matmul's or conv2d's inputs are (x, weights[, bias][, residual]): whether the bias is there.
inline bool has_bias_input(std::size_t inputs, bool fused_add) {
  return inputs - (fused_add ? 1 : 0) == 3;
}
struct Conv2DBackwardInputAttrs : Conv2DOptions {
  Shape input_shape;  // (N, H, W, C_in) of the forward input
};
struct Conv2DBackwardFilterAttrs : Conv2DOptions {
  Shape filter_shape;      // (KH, KW, C_in, C_out)
  bool with_bias = false;  // also return the bias gradient
};
struct MaxPool2DBackwardAttrs : Pool2DOptions {
  // dx also 0 where x is not positive: relu's backward pass on the same cells, for x that is a
  // relu's output. Set by a compiled step's fusion pass, never by the wrappers.
  bool relu_masked = false;
};
// pooled_conv2d (ops/fused.h): max_pool2d of conv2d's result, inputs conv2d's, outputs the
// pooled result and each window's winner. Set by a compiled step's fusion pass, never by the
// wrappers.
struct PooledConv2DAttrs : Conv2DAttrs {
  std::array<std::int64_t, 2> pool_window{2, 2};
  std::array<std::int64_t, 2> pool_strides{2, 2};
  Padding pool_padding = Padding::valid;
};
// pooled_conv2d_backward_filter (ops/fused.h): conv2d_backward_filter(x, dy) of the gradient
// dy = max_pool2d_backward(pooled_dy, y) (relu_masked as there), inputs (x, pooled_dy, y), or
// with from_winners (x, pooled_dy, winners), the winners pooled_conv2d wrote in place of y. Set
// by a compiled step's fusion passes, never by the wrappers.
struct PooledConv2DBackwardFilterAttrs : Conv2DBackwardFilterAttrs {
  std::array<std::int64_t, 2> pool_window{2, 2};
  std::array<std::int64_t, 2> pool_strides{2, 2};
  Padding pool_padding = Padding::valid;
  bool relu_masked = false;
  bool from_winners = false;
};
struct AvgPool2DBackwardAttrs : Pool2DOptions {
  Shape input_shape;  // (N, H, W, C) of the forward input
};
struct EpsilonAttrs {
  double epsilon = 1e-3;
};
struct BatchNormBackwardAttrs {
  double epsilon = 1e-3;
  bool training = true;  // the statistics were the batch's (their gradients flow back to x)
};
struct PermAttrs {
  std::vector<std::int64_t> perm;
};
struct SliceAttrs {
  std::vector<std::int64_t> begin;
  std::vector<std::int64_t> size;
};
struct PadAttrs {
  std::vector<std::int64_t> paddings;  // (before, after) per axis, flattened
  double value = 0.0;
};
struct CastAttrs {
  DType dtype = DType::f32;
};
struct DropoutAttrs {
  double rate = 0.0;  // the Philox key and counter are the op's second input, not attributes
};
struct FakeQuantizeAttrs {
  std::int64_t quant_min = -128;  // the integer range: [-128, 127] for int8, [0, 255] for uint8
  std::int64_t quant_max = 127;
};
// quantized_conv2d and quantized_matmul: inputs (x, input_scale, weights, weight_scale, bias[,
// residual]); fused_relu and fused_add as Conv2DAttrs' (set by a compiled step's fusion pass).
struct QuantizedConv2DAttrs : Conv2DAttrs {
  bool input_unsigned = false;  // x quantised to [0, 255]; else [-128, 127]
};
struct QuantizedMatmulAttrs {
  bool input_unsigned = false;
  bool fused_relu = false;
  bool fused_add = false;
};

// An optimizer update's attributes. lanes > 1 is a compiled step's multi-tensor update, made
// by its grouping pass, never by the wrappers: `lanes` updates with these options and one
// schedule, their inputs and outputs concatenated lane after lane (each lane's own schedule
// input is that same schedule).
struct SgdUpdateAttrs : SgdOptions {
  std::int64_t lanes = 1;
};
struct AdamUpdateAttrs : AdamOptions {
  std::int64_t lanes = 1;
};

struct AllReduceAttrs {
  std::int64_t replicas = 1;
};
// fused_elementwise's program (ops/fused.h): per instruction its op kind and two operand slots.
struct FusedElementwiseAttrs {
  std::vector<std::int64_t> program;
};

constexpr auto attr_fields(std::type_identity<NoAttrs>) {
  return std::tuple{};
}
constexpr auto attr_fields(std::type_identity<GeluAttrs>) {
  return std::tuple{AttrField{"approximate", &GeluAttrs::approximate}};
}
constexpr auto attr_fields(std::type_identity<ReduceAttrs>) {
  return std::tuple{AttrField{"axes", &ReduceAttrs::axes},
                    AttrField{"keepdims", &ReduceAttrs::keepdims}};
}
constexpr auto attr_fields(std::type_identity<AxisAttrs>) {
  return std::tuple{AttrField{"axis", &AxisAttrs::axis}};
}
constexpr auto attr_fields(std::type_identity<ShapeAttrs>) {
  return std::tuple{AttrField{"shape", &ShapeAttrs::shape}};
}
constexpr auto attr_fields(std::type_identity<ScatterAddAttrs>) {
  return std::tuple{AttrField{"rows", &ScatterAddAttrs::rows}};
}
constexpr auto attr_fields(std::type_identity<MatmulAttrs>) {
  return std::tuple{AttrField{"transpose_a", &MatmulAttrs::transpose_a},
                    AttrField{"transpose_b", &MatmulAttrs::transpose_b},
                    AttrField{"fused_relu", &MatmulAttrs::fused_relu},
                    AttrField{"fused_add", &MatmulAttrs::fused_add}};
}
template <typename Struct>
constexpr auto conv_fields() {
  return std::tuple{
      AttrField<Struct, std::array<std::int64_t, 2>>{"strides", &Struct::strides},
      AttrField<Struct, Padding>{"padding", &Struct::padding},
      AttrField<Struct, std::array<std::int64_t, 2>>{"dilations", &Struct::dilations}};
}
constexpr auto attr_fields(std::type_identity<Conv2DOptions>) {
  return conv_fields<Conv2DOptions>();
}
constexpr auto attr_fields(std::type_identity<Conv2DAttrs>) {
  using A = Conv2DAttrs;
  return std::tuple_cat(conv_fields<A>(),
                        std::tuple{AttrField<A, bool>{"fused_relu", &A::fused_relu},
                                   AttrField<A, bool>{"fused_add", &A::fused_add}});
}
constexpr auto attr_fields(std::type_identity<Conv2DBackwardInputAttrs>) {
  using A = Conv2DBackwardInputAttrs;
  return std::tuple_cat(conv_fields<A>(),
                        std::tuple{AttrField<A, Shape>{"input_shape", &A::input_shape}});
}
constexpr auto attr_fields(std::type_identity<Conv2DBackwardFilterAttrs>) {
  using A = Conv2DBackwardFilterAttrs;
  return std::tuple_cat(conv_fields<A>(),
                        std::tuple{AttrField<A, Shape>{"filter_shape", &A::filter_shape},
                                   AttrField<A, bool>{"with_bias", &A::with_bias}});
}
constexpr auto attr_fields(std::type_identity<PooledConv2DBackwardFilterAttrs>) {
  using A = PooledConv2DBackwardFilterAttrs;
  using Pair = std::array<std::int64_t, 2>;
  return std::tuple_cat(conv_fields<A>(),
                        std::tuple{AttrField<A, Shape>{"filter_shape", &A::filter_shape},
                                   AttrField<A, bool>{"with_bias", &A::with_bias},
                                   AttrField<A, Pair>{"pool_window", &A::pool_window},
                                   AttrField<A, Pair>{"pool_strides", &A::pool_strides},
                                   AttrField<A, Padding>{"pool_padding", &A::pool_padding},
                                   AttrField<A, bool>{"relu_masked", &A::relu_masked},
                                   AttrField<A, bool>{"from_winners", &A::from_winners}});
}
constexpr auto attr_fields(std::type_identity<PooledConv2DAttrs>) {
  using A = PooledConv2DAttrs;
  using Pair = std::array<std::int64_t, 2>;
  return std::tuple_cat(conv_fields<A>(),
                        std::tuple{AttrField<A, bool>{"fused_relu", &A::fused_relu},
                                   AttrField<A, bool>{"fused_add", &A::fused_add},
                                   AttrField<A, Pair>{"pool_window", &A::pool_window},
                                   AttrField<A, Pair>{"pool_strides", &A::pool_strides},
                                   AttrField<A, Padding>{"pool_padding", &A::pool_padding}});
}
template <typename Struct>
constexpr auto pool_fields() {
  return std::tuple{AttrField<Struct, std::array<std::int64_t, 2>>{"window", &Struct::window},
                    AttrField<Struct, std::array<std::int64_t, 2>>{"strides", &Struct::strides},
                    AttrField<Struct, Padding>{"padding", &Struct::padding}};
}
constexpr auto attr_fields(std::type_identity<Pool2DOptions>) {
  return pool_fields<Pool2DOptions>();
}
constexpr auto attr_fields(std::type_identity<MaxPool2DBackwardAttrs>) {
  using A = MaxPool2DBackwardAttrs;
  return std::tuple_cat(pool_fields<A>(),
                        std::tuple{AttrField<A, bool>{"relu_masked", &A::relu_masked}});
}
constexpr auto attr_fields(std::type_identity<AvgPool2DBackwardAttrs>) {
  using A = AvgPool2DBackwardAttrs;
  return std::tuple_cat(pool_fields<A>(),
                        std::tuple{AttrField<A, Shape>{"input_shape", &A::input_shape}});
}
constexpr auto attr_fields(std::type_identity<EpsilonAttrs>) {
  return std::tuple{AttrField{"epsilon", &EpsilonAttrs::epsilon}};
}
constexpr auto attr_fields(std::type_identity<BatchNormBackwardAttrs>) {
  return std::tuple{AttrField{"epsilon", &BatchNormBackwardAttrs::epsilon},
                    AttrField{"training", &BatchNormBackwardAttrs::training}};
}
constexpr auto attr_fields(std::type_identity<PermAttrs>) {
  return std::tuple{AttrField{"perm", &PermAttrs::perm}};
}
constexpr auto attr_fields(std::type_identity<SliceAttrs>) {
  return std::tuple{AttrField{"begin", &SliceAttrs::begin}, AttrField{"size", &SliceAttrs::size}};
}
constexpr auto attr_fields(std::type_identity<PadAttrs>) {
  return std::tuple{AttrField{"paddings", &PadAttrs::paddings},
                    AttrField{"value", &PadAttrs::value}};
}
constexpr auto attr_fields(std::type_identity<CastAttrs>) {
  return std::tuple{AttrField{"dtype", &CastAttrs::dtype}};
}
constexpr auto attr_fields(std::type_identity<DropoutAttrs>) {
  return std::tuple{AttrField{"rate", &DropoutAttrs::rate}};
}
constexpr auto attr_fields(std::type_identity<FakeQuantizeAttrs>) {
  return std::tuple{AttrField{"quant_min", &FakeQuantizeAttrs::quant_min},
                    AttrField{"quant_max", &FakeQuantizeAttrs::quant_max}};
}
constexpr auto attr_fields(std::type_identity<QuantizedConv2DAttrs>) {
  using A = QuantizedConv2DAttrs;
  return std::tuple_cat(conv_fields<A>(),
                        std::tuple{AttrField<A, bool>{"fused_relu", &A::fused_relu},
                                   AttrField<A, bool>{"fused_add", &A::fused_add},
                                   AttrField<A, bool>{"input_unsigned", &A::input_unsigned}});
}
constexpr auto attr_fields(std::type_identity<QuantizedMatmulAttrs>) {
  return std::tuple{AttrField{"input_unsigned", &QuantizedMatmulAttrs::input_unsigned},
                    AttrField{"fused_relu", &QuantizedMatmulAttrs::fused_relu},
                    AttrField{"fused_add", &QuantizedMatmulAttrs::fused_add}};
}
constexpr auto attr_fields(std::type_identity<AllReduceAttrs>) {
  return std::tuple{AttrField{"replicas", &AllReduceAttrs::replicas}};
}
constexpr auto attr_fields(std::type_identity<FusedElementwiseAttrs>) {
  return std::tuple{AttrField{"program", &FusedElementwiseAttrs::program}};
}
constexpr auto attr_fields(std::type_identity<SgdUpdateAttrs>) {
  using A = SgdUpdateAttrs;
  return std::tuple{AttrField<A, double>{"momentum", &A::momentum},
                    AttrField<A, bool>{"nesterov", &A::nesterov},
                    AttrField<A, double>{"weight_decay", &A::weight_decay},
                    AttrField<A, std::int64_t>{"lanes", &A::lanes}};
}
constexpr auto attr_fields(std::type_identity<AdamUpdateAttrs>) {
  using A = AdamUpdateAttrs;
  return std::tuple{AttrField<A, double>{"beta1", &A::beta1},
                    AttrField<A, double>{"beta2", &A::beta2},
                    AttrField<A, double>{"epsilon", &A::epsilon},
                    AttrField<A, double>{"weight_decay", &A::weight_decay},
                    AttrField<A, std::int64_t>{"lanes", &A::lanes}};
}

// Which attributes each op takes; an op not listed takes none.
template <OpKind Kind>
struct OpAttrsFor {
  using type = NoAttrs;
};
#define TANDEM_OP_ATTRS(op, Type) \
  template <>                     \
  struct OpAttrsFor<OpKind::op> { \
    using type = Type;            \
  };
TANDEM_OP_ATTRS(gelu, GeluAttrs)
TANDEM_OP_ATTRS(gelu_backward, GeluAttrs)
TANDEM_OP_ATTRS(sum, ReduceAttrs)
TANDEM_OP_ATTRS(mean, ReduceAttrs)
TANDEM_OP_ATTRS(max, ReduceAttrs)
TANDEM_OP_ATTRS(argmax, AxisAttrs)
TANDEM_OP_ATTRS(broadcast_to, ShapeAttrs)
TANDEM_OP_ATTRS(scatter_add, ScatterAddAttrs)
TANDEM_OP_ATTRS(matmul, MatmulAttrs)
TANDEM_OP_ATTRS(conv2d, Conv2DAttrs)
TANDEM_OP_ATTRS(conv2d_backward_input, Conv2DBackwardInputAttrs)
TANDEM_OP_ATTRS(conv2d_backward_filter, Conv2DBackwardFilterAttrs)
TANDEM_OP_ATTRS(max_pool2d, Pool2DOptions)
TANDEM_OP_ATTRS(max_pool2d_backward, MaxPool2DBackwardAttrs)
TANDEM_OP_ATTRS(avg_pool2d, Pool2DOptions)
TANDEM_OP_ATTRS(avg_pool2d_backward, AvgPool2DBackwardAttrs)
TANDEM_OP_ATTRS(batch_norm, EpsilonAttrs)
TANDEM_OP_ATTRS(batch_norm_backward, BatchNormBackwardAttrs)
TANDEM_OP_ATTRS(layer_norm, EpsilonAttrs)
TANDEM_OP_ATTRS(softmax, AxisAttrs)
TANDEM_OP_ATTRS(softmax_backward, AxisAttrs)
TANDEM_OP_ATTRS(log_softmax, AxisAttrs)
TANDEM_OP_ATTRS(log_softmax_backward, AxisAttrs)
TANDEM_OP_ATTRS(reshape, ShapeAttrs)
TANDEM_OP_ATTRS(transpose, PermAttrs)
TANDEM_OP_ATTRS(concat, AxisAttrs)
TANDEM_OP_ATTRS(slice, SliceAttrs)
TANDEM_OP_ATTRS(pad, PadAttrs)
TANDEM_OP_ATTRS(cast, CastAttrs)
TANDEM_OP_ATTRS(dropout, DropoutAttrs)
TANDEM_OP_ATTRS(sgd_update, SgdUpdateAttrs)
TANDEM_OP_ATTRS(adam_update, AdamUpdateAttrs)
TANDEM_OP_ATTRS(all_reduce, AllReduceAttrs)
TANDEM_OP_ATTRS(fused_elementwise, FusedElementwiseAttrs)
TANDEM_OP_ATTRS(pooled_conv2d, PooledConv2DAttrs)
TANDEM_OP_ATTRS(pooled_conv2d_backward_filter, PooledConv2DBackwardFilterAttrs)
TANDEM_OP_ATTRS(fake_quantize, FakeQuantizeAttrs)
TANDEM_OP_ATTRS(quantized_conv2d, QuantizedConv2DAttrs)
TANDEM_OP_ATTRS(quantized_matmul, QuantizedMatmulAttrs)
#undef TANDEM_OP_ATTRS

template <OpKind Kind>
using OpAttrs = typename OpAttrsFor<Kind>::type;

namespace detail {
AttrValue to_attr_value(const std::array<std::int64_t, 2>& pair);
AttrValue to_attr_value(Padding padding);
template <typename T>
AttrValue to_attr_value(const T& value) {
  return value;
}
void read_attr(const Attrs& attrs, const char* key, std::int64_t& out);
void read_attr(const Attrs& attrs, const char* key, double& out);
void read_attr(const Attrs& attrs, const char* key, bool& out);
void read_attr(const Attrs& attrs, const char* key, std::vector<std::int64_t>& out);
void read_attr(const Attrs& attrs, const char* key, DType& out);
void read_attr(const Attrs& attrs, const char* key, std::array<std::int64_t, 2>& out);
void read_attr(const Attrs& attrs, const char* key, Padding& out);
}  // namespace detail

// A struct's attributes read from `attrs` (an internal error names a missing key: Tandem's own
// wrappers fill them), and written into Attrs.
template <typename Struct>
Struct read_attrs(const Attrs& attrs) {
  Struct value{};
  std::apply(
      [&](const auto&... field) {
        (detail::read_attr(attrs, field.key, value.*field.member), ...);
      },
      attr_fields(std::type_identity<Struct>{}));
  return value;
}
template <typename Struct>
Attrs write_attrs(const Struct& value) {
  Attrs attrs;
  std::apply(
      [&](const auto&... field) {
        (attrs.set(field.key, detail::to_attr_value(value.*field.member)), ...);
      },
      attr_fields(std::type_identity<Struct>{}));
  return attrs;
}

template <OpKind Kind>
OpAttrs<Kind> op_attrs(const Attrs& attrs) {
  return read_attrs<OpAttrs<Kind>>(attrs);
}
template <OpKind Kind>
Attrs make_op_attrs(const OpAttrs<Kind>& value) {
  return write_attrs(value);
}

// Whether `kind` is gelu (or its backward op) with the tanh approximation: for the kernels that
// every unary op shares, whose other ops have no attribute to read.
inline bool gelu_approximation(OpKind kind, const Attrs& attrs) {
  return (kind == OpKind::gelu || kind == OpKind::gelu_backward) &&
         read_attrs<GeluAttrs>(attrs).approximate;
}

// The keys of an op's attributes, in declaration order, for code that sees ops by kind at run
// time (checks, printing a recorded op).
std::vector<std::string_view> op_attr_keys(OpKind kind);

}  // namespace tandem
