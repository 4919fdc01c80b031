#pragma once
// Max pooling's backward pass one band of input rows at a time, where windows do not overlap:
// for a kernel that uses the gradient as it is formed instead of reading it back from memory
// (pooled_conv2d_backward_filter's, conv_few_channels.h).
#include <cstdint>
#include <utility>

#include "ops/window.h"

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

}  // namespace tandem::cpu
