#pragma once
// Max pooling's backward pass one band of input rows at a time, where windows do not overlap,
// and its forward pass with each window's winner: for kernels that use a band as it is formed
// instead of reading it back from memory (pooled_conv2d's and pooled_conv2d_backward_filter's,
// conv_few_channels.h).
#include <cstdint>
#include <utility>

#include "ops/window.h"
#include "tandem/tensor.h"

namespace tandem::cpu {

// Whether no input cell is in two windows (strides at least the window, as in the usual 2x2
// pooling of stride 2).
bool windows_are_disjoint(const Window2D& g);

// [first, last): the input rows (axis 0) or columns (axis 1) the windows of output row or column
// `o` cover, clipped to the image.
std::pair<std::int64_t, std::int64_t> window_span(const Window2D& g, int axis, std::int64_t o);

// max_pool2d_backward's dx (f32) for the input rows window_span(g, 0, oh) of image n, where
// windows_are_disjoint(g): into dx_band (those rows, (W, C) each), dy at each window's first
// maximum in scan order and 0 everywhere else (also where a maximum is not positive, with
// relu_masked): the same values as the op's kernel. `best` and `winner` are (C,) scratch.
void max_pool_backward_band(const Window2D& g, const float* dy, const float* x, float* dx_band,
                            bool relu_masked, std::int64_t n, std::int64_t oh, float* best,
                            std::int32_t* winner);

// Max pooling's forward pass with its winners (pooled_conv2d's outputs, ops/fused.h) for output
// row oh of one image: x_band holds the input rows window_span(g, 0, oh) ((W, C) each); into
// pooled_row (OW, C) each window's maximum and into winners_row (OW, C) the window cell
// kh * KW + kw of its first maximum in scan order (the cell max_pool_backward_band gives the
// gradient), or -1 where `relu` (x is a relu's output) and the maximum is not positive. `winner`
// is (C,) scratch.
void max_pool_band_with_winners(const Window2D& g, const float* x_band, bool relu, std::int64_t oh,
                                float* pooled_row, std::int8_t* winners_row, std::int32_t* winner);
// The same over all of x (N, H, W, C) of any floating dtype into pooled and winners
// (N, OH, OW, C).
void max_pool_with_winners(const Window2D& g, const Tensor& x, bool relu, const Tensor& pooled,
                           const Tensor& winners);

// max_pool_backward_band's dx from the winners max_pool_band_with_winners wrote instead of from
// x, where windows_are_disjoint(g): dy at each window's winner, 0 elsewhere (and everywhere for
// a winner of -1).
void winners_backward_band(const Window2D& g, const float* dy, const std::int8_t* winners,
                           float* dx_band, std::int64_t n, std::int64_t oh);
// dx (N, H, W, C) from dy and the winners (N, OH, OW, C) of any pooling, in any floating dtype:
// each dy added to its winner's cell, in scan order.
void winners_backward(const Window2D& g, const Tensor& dy, const Tensor& winners, const Tensor& dx);

}  // namespace tandem::cpu
