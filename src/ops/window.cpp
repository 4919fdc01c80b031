#include "ops/window.h"

#include <algorithm>
#include <string>

#include "core/text.h"

namespace tandem {
namespace {

std::string pair_str(const std::array<std::int64_t, 2>& pair) {
  return std::to_string(pair[0]) + "x" + std::to_string(pair[1]);
}

void require_positive(const char* op, const char* what, const std::array<std::int64_t, 2>& pair) {
  if (pair[0] <= 0 || pair[1] <= 0) {
    throw InvalidArgument(std::string(op) + ": " + what + " must be positive, got [" +
                          std::to_string(pair[0]) + ", " + std::to_string(pair[1]) + "]");
  }
}

void require_nhwc(const char* op, const char* what, const Shape& shape) {
  if (shape.size() != 4) {
    throw InvalidArgument(std::string(op) + ": " + what + " must be NHWC (rank 4), got shape " +
                          shape_str(shape) + "; reshape it to (N, H, W, C)");
  }
  for (std::int64_t extent : shape) {
    if (extent < 0) {
      throw InvalidArgument(std::string(op) + ": " + what +
                            " has a negative extent: " + shape_str(shape));
    }
  }
}

// Fills the output extent and padding of one spatial axis. TensorFlow's rules: valid keeps
// whole windows only; same gives ceil(in / stride) outputs and pads the shortfall, the smaller
// half before.
void fill_axis(const char* op, const Shape& x_shape, const std::array<std::int64_t, 2>& window,
               Padding padding, Window2D& geometry, int axis) {
  const std::int64_t in = axis == 0 ? geometry.in_h : geometry.in_w;
  const std::int64_t stride = geometry.strides[axis];
  const std::int64_t span = (window[axis] - 1) * geometry.dilations[axis] + 1;
  std::int64_t out = 0;
  if (padding == Padding::valid) {
    if (span > in) {
      const std::array<std::int64_t, 2> spans{(window[0] - 1) * geometry.dilations[0] + 1,
                                              (window[1] - 1) * geometry.dilations[1] + 1};
      throw InvalidArgument(std::string(op) + ": the " + pair_str(window) + " window" +
                            (spans == window ? "" : " (dilated to " + pair_str(spans) + ")") +
                            " is larger than the " + std::to_string(geometry.in_h) + "x" +
                            std::to_string(geometry.in_w) + " input " + shape_str(x_shape) +
                            " with padding=valid; use padding=same or a smaller window");
    }
    out = (in - span) / stride + 1;
  } else {
    out = (in + stride - 1) / stride;
  }
  const std::int64_t pad_total = std::max<std::int64_t>((out - 1) * stride + span - in, 0);
  geometry.pad_before[axis] = pad_total / 2;
  geometry.pad_after[axis] = pad_total - pad_total / 2;
  (axis == 0 ? geometry.out_h : geometry.out_w) = out;
}

Window2D make_window(const char* op, const Shape& x_shape,
                     const std::array<std::int64_t, 2>& window,
                     const std::array<std::int64_t, 2>& strides,
                     const std::array<std::int64_t, 2>& dilations, Padding padding,
                     std::int64_t out_c) {
  require_positive(op, "strides", strides);
  require_positive(op, "dilations", dilations);
  Window2D geometry;
  geometry.batch = x_shape[0];
  geometry.in_h = x_shape[1];
  geometry.in_w = x_shape[2];
  geometry.in_c = x_shape[3];
  geometry.k_h = window[0];
  geometry.k_w = window[1];
  geometry.out_c = out_c;
  geometry.strides = strides;
  geometry.dilations = dilations;
  fill_axis(op, x_shape, window, padding, geometry, 0);
  fill_axis(op, x_shape, window, padding, geometry, 1);
  return geometry;
}

}  // namespace

const char* padding_name(Padding padding) {
  return padding == Padding::same ? "same" : "valid";
}

Padding parse_padding(const std::string& text) {
  const std::string key = lower(text);
  if (key == "valid") return Padding::valid;
  if (key == "same") return Padding::same;
  throw InvalidArgument("unknown padding \"" + text + "\"; choose \"valid\" or \"same\"");
}

Window2D conv_window(const char* op, const Shape& x_shape, const Shape& filter_shape,
                     const Conv2DOptions& options) {
  require_nhwc(op, "the input", x_shape);
  if (filter_shape.size() != 4) {
    throw InvalidArgument(std::string(op) +
                          ": the filter must have rank 4 (KH, KW, C_in, C_out), got shape " +
                          shape_str(filter_shape));
  }
  if (filter_shape[0] <= 0 || filter_shape[1] <= 0 || filter_shape[2] <= 0 ||
      filter_shape[3] <= 0) {
    throw InvalidArgument(std::string(op) + ": the filter " + shape_str(filter_shape) +
                          " must have positive extents");
  }
  if (filter_shape[2] != x_shape[3]) {
    throw InvalidArgument(std::string(op) + ": the input " + shape_str(x_shape) + " has " +
                          std::to_string(x_shape[3]) + " channels but the filter " +
                          shape_str(filter_shape) +
                          " expects C_in = " + std::to_string(filter_shape[2]) +
                          "; the filter must be (KH, KW, C_in, C_out)");
  }
  return make_window(op, x_shape, {filter_shape[0], filter_shape[1]}, options.strides,
                     options.dilations, options.padding, filter_shape[3]);
}

Window2D pool_window(const char* op, const Shape& x_shape, const Pool2DOptions& options) {
  require_nhwc(op, "the input", x_shape);
  require_positive(op, "the window", options.window);
  return make_window(op, x_shape, options.window, options.strides, {1, 1}, options.padding,
                     x_shape[3]);
}

}  // namespace tandem
