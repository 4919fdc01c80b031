#pragma once
// Helpers shared by the layer files: unique default names, as Keras gives them (the first Dense
// is "dense", the next "dense_1"; clear_session() starts over), and a layer's description for
// error messages ("Conv2D 'conv2d_1'").
#include <string>

#include "tandem/nn.h"

namespace tandem::nn::detail {

std::string unique_name(const std::string& prefix);

std::string describe(const LayerBase& layer);

// Throws InvalidArgument naming the layer unless `value` > 0.
void require_positive(const std::string& layer, const char* argument, std::int64_t value);

// Runs parse(), prefixing the message of an InvalidArgument it throws with `context` (the layer
// kind), so "unknown activation 'relux'" says which layer's argument it was.
template <typename Parse>
auto parse_argument(const std::string& context, Parse&& parse) {
  try {
    return parse();
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(context + ": " + error.what());
  }
}

// Runs an ops shape function, which needs concrete extents, on x_shape whose batch extent may be
// -1 (unknown in a graph being defined): the function sees batch 1 and the result gets x's batch.
template <typename ShapeFn>
Shape keep_batch(const Shape& x_shape, ShapeFn&& shape_fn) {
  if (x_shape.empty() || x_shape[0] >= 0) return shape_fn(x_shape);
  Shape probe = x_shape;
  probe[0] = 1;
  Shape y = shape_fn(probe);
  y[0] = x_shape[0];
  return y;
}

}  // namespace tandem::nn::detail
