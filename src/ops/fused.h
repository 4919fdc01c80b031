#pragma once
// fused_elementwise: a chain of element-wise ops run as one loop, each element through the whole
// chain while it is in registers, instead of one pass over memory per op. A compiled step's
// fusion pass forms it on the CPU (compile/passes.h); nothing else does, so it has no wrapper
// and no gradient rule.
//
// Its attribute is a program over slots: slots [0, inputs) are the op's inputs, slot inputs + k
// is instruction k's result, and the last instruction's result is the output. Only ops whose
// result is the one correctly rounded value of their formula take part (add, mul, sqrt, relu, ...
// but not exp or gelu, whose oneDNN and libm versions differ in the last bit), and each
// instruction rounds to the storage dtype as the op run alone does: a fused chain gives the same
// bits as its ops one by one.
//
// Inputs share the output's dtype; each has the output's shape or a trailing part of it (a bias
// (C,) of an (N, C) output, a scalar), which repeats along the leading axes as NumPy broadcasts.
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/attrs.h"
#include "tandem/ops.h"
#include "tandem/tensor.h"

namespace tandem {

struct FusedInstruction {
  OpKind kind{};
  std::int64_t a = -1;  // first operand's slot
  std::int64_t b = -1;  // second operand's slot; -1 for a unary op
};

// At most this many instructions and inputs in one fused op (the CPU kernel keeps a block of
// every slot on its stack).
inline constexpr std::size_t kMaxFusedInstructions = 16;
inline constexpr std::size_t kMaxFusedInputs = 8;

// Whether `kind` may be an instruction (a correctly rounded element-wise op).
constexpr bool fusible_elementwise(OpKind kind) {
  switch (kind) {
    case OpKind::neg:
    case OpKind::abs:
    case OpKind::sqrt:
    case OpKind::square:
    case OpKind::relu:
    case OpKind::relu_backward:
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
    case OpKind::div:
    case OpKind::maximum:
    case OpKind::minimum:
      return true;
    default:
      return false;
  }
}
// 1 or 2: an instruction's operands.
int fused_operand_count(OpKind kind);

// The program in fused_elementwise's attributes and back; reading checks kinds and slots
// against `inputs` and throws InvalidArgument naming what is wrong.
Attrs fused_elementwise_attrs(const std::vector<FusedInstruction>& program);
std::vector<FusedInstruction> fused_program(const Attrs& attrs, std::size_t inputs);

// "add+relu": the instructions' op names, for listings and profiles.
std::string fused_label(const std::vector<FusedInstruction>& program);

// Whether an input of `shape` repeats into `output` as fused_elementwise allows: equal to the
// output's trailing axes once its own leading 1s are dropped.
bool repeats_into(const Shape& shape, const Shape& output);

// pooled_conv2d: max_pool2d(conv2d(x, filter[, bias]...)) (relu fused where the convolution's
// attributes say so), inputs conv2d's, outputs the pooled result (N, PH, PW, C_out) and the
// pooling's winners (N, PH, PW, C_out) i8: per pooled cell, kh * KW + kw of the window cell whose
// value was taken (the first maximum in scan order over the cells inside the image, as
// max_pool2d_backward picks it), or -1 where the relu is fused and that maximum is not positive
// (relu's backward pass sends nothing back there). The convolution's full result never has to be
// in memory: where the backend's kernel forms it a few rows at a time (the CPU's, for a first
// layer's small window on AVX-512), each band of rows is pooled while in the cache. A compiled
// step's fusion pass forms it on the CPU where the pooling alone reads the convolution's result,
// apart from a pooled_conv2d_backward_filter, which then reads the winners instead
// (from_winners). Its shapes, cost and lowering are its two ops' own, through the attributes
// below.
struct PooledConvolutionParts {
  Attrs convolution;  // conv2d's
  Attrs pooling;      // max_pool2d's
};
Attrs pooled_conv2d_attrs(const Attrs& convolution, const Attrs& pooling);
PooledConvolutionParts pooled_convolution_parts(const Attrs& attrs);

// pooled_conv2d_backward_filter: a convolution's filter (and bias) gradient taken from the
// gradient of the max pooling that reads its output, inputs (x, pooled_dy, y): the same as
// conv2d_backward_filter(x, max_pool2d_backward(pooled_dy, y)) (relu-masked where the pooling's
// backward pass was), without the full-size gradient between the two in memory where the
// backend's kernel can form it a few rows at a time (the CPU's, for a first layer's small window
// on AVX-512: backend/cpu/conv_few_channels.h). A compiled step's fusion pass forms it on the CPU
// where that gradient feeds nothing else (a first layer, whose input needs no gradient); its
// shapes, cost and lowering are its two ops' own, through their attributes below. With
// from_winners its inputs are (x, pooled_dy, winners), the winners of the pooled_conv2d that
// made the pooled result: dy is pooled_dy at each window's winner and 0 elsewhere, which is
// max_pool2d_backward's dy (relu-masked as the winners are), without reading y.
struct PooledFilterGradientParts {
  Attrs pool_gradient;    // max_pool2d_backward's
  Attrs filter_gradient;  // conv2d_backward_filter's
};
Attrs pooled_conv2d_backward_filter_attrs(const Attrs& pool_gradient, const Attrs& filter_gradient);
PooledFilterGradientParts pooled_filter_gradient_parts(const Attrs& attrs);

}  // namespace tandem
