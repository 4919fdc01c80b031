#pragma once
// Sliding-window geometry shared by the convolution and pooling ops and their kernels: output
// extents and TensorFlow's SAME padding rule.
#include <array>
#include <cstdint>

#include "ops/op_table.h"

namespace tandem {

// One 2-D sliding window pass over an NHWC input: N images of H x W x C_in, a KH x KW window
// (dilated) stepping over an OH x OW grid and producing C_out channels per position.
struct Window2D {
  std::int64_t batch = 0;
  std::int64_t in_h = 0;
  std::int64_t in_w = 0;
  std::int64_t in_c = 0;
  std::int64_t k_h = 0;
  std::int64_t k_w = 0;
  std::int64_t out_c = 0;
  std::int64_t out_h = 0;
  std::int64_t out_w = 0;
  std::array<std::int64_t, 2> strides{1, 1};
  std::array<std::int64_t, 2> dilations{1, 1};
  std::array<std::int64_t, 2> pad_before{0, 0};  // top, left
  std::array<std::int64_t, 2> pad_after{0, 0};   // bottom, right

  Shape input_shape() const { return {batch, in_h, in_w, in_c}; }
  Shape output_shape() const { return {batch, out_h, out_w, out_c}; }
  // Output positions N*OH*OW and window entries KH*KW*C_in: the rows and columns of a
  // convolution's windows unrolled into a matrix.
  std::int64_t positions() const { return batch * out_h * out_w; }
  std::int64_t window_entries() const { return k_h * k_w * in_c; }
  // Output positions times window cells: the multiply-adds per output channel pair.
  double window_visits() const {
    return static_cast<double>(batch) * static_cast<double>(out_h * out_w) *
           static_cast<double>(k_h * k_w);
  }
};

// The geometry of a convolution of x (N, H, W, C_in) with a filter (KH, KW, C_in, C_out).
// Throws InvalidArgument naming `op` for wrong ranks, a channel mismatch, non-positive strides,
// dilations or extents, or a dilated window that does not fit the input with valid padding.
Window2D conv_window(const char* op, const Shape& x_shape, const Shape& filter_shape,
                     const Conv2DOptions& options);
// The geometry of pooling x (N, H, W, C) with C_out = C; throws like conv_window.
Window2D pool_window(const char* op, const Shape& x_shape, const Pool2DOptions& options);

}  // namespace tandem
