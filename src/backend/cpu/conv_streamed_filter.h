#pragma once
// Inference convolutions with few output positions, on AVX-512 loops of Tandem's own that stream
// the constant filter from memory once (conv_streamed_filter.cpp says why). conv.cpp routes a
// forward convolution here where streamed_filter_fits says so and its filter is constant; x86-64
// only.
#include <cstdint>

#include "ops/window.h"
#include "tandem/tensor.h"

namespace tandem::cpu {

// Whether `g` is an f32 geometry these loops run: at most 16 output positions N*OH*OW, output
// channels in whole vectors of 16, on a CPU with AVX-512.
bool streamed_filter_fits(const Window2D& g, DType dtype);

// The filter (KH, KW, C_in, C_out), read as the row-major (K, C_out) with K = KH*KW*C_in, in
// panels of 16 output channels (C_out / 16, K, 16): the order the loops read it in.
Tensor filter_panels(const Window2D& g, const Tensor& filter);

// y (M, C_out) = windows (M, K) x the filter in `panels` (filter_panels), M = N*OH*OW, plus
// `bias` (C_out,) and `residual` (M, C_out) where not null, then relu where `relu`. `residual`
// may be y itself (a residual written over, as a compiled graph does). Each output is summed over
// K in order by one thread: the bits do not depend on the thread count.
void streamed_filter_conv(const Window2D& g, const float* windows, const float* panels,
                          const float* bias, const float* residual, bool relu, float* y);

}  // namespace tandem::cpu
