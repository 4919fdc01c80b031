// GlobalAveragePooling1D: the mean over the steps of a sequence.
#include "nn/layer_util.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

class GlobalAveragePooling1DLayer final : public LayerBase {
 public:
  explicit GlobalAveragePooling1DLayer(const std::string& name)
      : LayerBase("global_average_pooling1d", name) {}

  const char* class_name() const override { return "GlobalAveragePooling1D"; }
  std::optional<LayerConfig> config() const override { return LayerConfig{}; }

  // x (N, steps, C) -> (N, C)
  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    const Shape& x = input_shapes[0];
    if (x.size() != 3) {
      throw InvalidArgument(detail::describe(*this) +
                            " needs inputs (batch, steps, features), got " + shape_str(x));
    }
    return {x[0], x[2]};
  }

  Tensor call(std::span<const Tensor> inputs, bool) override { return mean(inputs[0], {1}); }
};

}  // namespace

GlobalAveragePooling1D::GlobalAveragePooling1D(const std::string& name)
    : Layer(std::make_shared<GlobalAveragePooling1DLayer>(name)) {}

}  // namespace tandem::nn
