#pragma once
// The f32 forward pass and filter gradient of convolutions with small windows over few input
// channels (a network's first layer, on grayscale or RGB images), in AVX-512 loops of Tandem's own
// (conv_few_channels.cpp says why). conv.cpp routes a geometry here where
// few_channel_forward_fits or few_channel_filter_gradient_fits says so; x86-64 only.
#include <cstdint>

#include "ops/window.h"

namespace tandem::cpu {

// Whether `g` is a geometry on which these loops were measured faster than oneDNN (a window of at
// most 27 entries KH * KW * C_in; more than 16 output channels where over 9 entries) and the
// CPU has AVX-512, where they were measured; other CPUs keep oneDNN's kernels.
bool few_channel_filter_gradient_fits(const Window2D& g);

// The same for the forward convolution: a window of at most nine entries (3x3 grayscale), whose
// filter rows stay in vector registers for a whole output row (1.2-1.4x oneDNN's on the main job's
// first layer at batch 32 and 64; RGB windows over several passes were 0.55-0.9x), on AVX-512.
bool few_channel_forward_fits(const Window2D& g);

// y (N, OH, OW, C_out) = x (N, H, W, C_in) convolved with filter (KH, KW, C_in, C_out), plus
// bias (C_out,) where not null, then relu where `relu`. Each output is the bias (or 0) plus the
// window's entries in the filter's order, one FMA each: the bits do not depend on the thread
// count.
void few_channel_conv_forward(const Window2D& g, const float* x, const float* filter,
                              const float* bias, bool relu, float* y);

// d_filter (KH, KW, C_in, C_out) = the sum over (n, oh, ow) of the window of x (N, H, W, C_in)
// at (oh, ow) times dy[n, oh, ow, :] (dy (N, OH, OW, C_out)); d_bias (C_out,), where not null,
// = dy summed over its positions. Each thread sums a share of the output rows and the shares are
// added in the order of the rows: the result depends on the thread count, as oneDNN's does
// (deterministic mode runs conv.cpp's loops).
void few_channel_conv_backward_filter(const Window2D& g, const float* x, const float* dy,
                                      float* d_filter, float* d_bias);

// pooled_conv2d: few_channel_conv_forward's y pooled by `pool` (its max_pool2d over y's shape)
// into pooled (N, PH, PW, C_out), with the winners (N, PH, PW, C_out) of
// max_pool_band_with_winners (max_pool_band.h). y is formed one band of the rows a pooled row
// reads at a time in a buffer of each thread's and pooled from there, never written to memory
// whole; rows no window reads are not formed. The same bits as the two ops one after the other.
void few_channel_pooled_conv_forward(const Window2D& g, const Window2D& pool, const float* x,
                                     const float* filter, const float* bias, bool relu,
                                     float* pooled, std::int8_t* winners);

// Where the gradient of a max pooling's result comes from: pooled_dy (N, PH, PW, C_out) with
// either the pooling's input y (N, OH, OW, C_out) (the winners found again, relu-masked where
// relu_masked) or, where not null, the winners pooled_conv2d wrote.
struct PooledGradient {
  const float* pooled_dy = nullptr;
  const float* y = nullptr;
  bool relu_masked = false;
  const std::int8_t* winners = nullptr;
};

// The same as few_channel_conv_backward_filter for the gradient dy = max_pool2d_backward(
// pooled_dy, y) of a max pooling `pool` of y whose windows do not overlap (windows_are_disjoint):
// pooled_conv2d_backward_filter. dy is formed one band of rows at a time in a buffer of each
// thread's and summed from there, never written to memory whole; the rows are summed as
// few_channel_conv_backward_filter sums them, so the result has the same bits as that function's
// on max_pool2d_backward's dy.
void few_channel_pooled_conv_backward_filter(const Window2D& g, const Window2D& pool,
                                             const float* x, const PooledGradient& gradient,
                                             float* d_filter, float* d_bias);

}  // namespace tandem::cpu
