// Flatten: (N, ...) -> (N, product of the rest), a view of the input.
#include "nn/layer_util.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

class FlattenLayer final : public LayerBase {
 public:
  explicit FlattenLayer(const std::string& name) : LayerBase("flatten", name) {}

  const char* class_name() const override { return "Flatten"; }
  std::optional<LayerConfig> config() const override { return LayerConfig{}; }

  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    const Shape& x = input_shapes[0];
    if (x.empty()) {
      throw InvalidArgument(detail::describe(*this) + " needs a batch dimension, got a scalar");
    }
    std::int64_t features = 1;
    for (std::size_t i = 1; i < x.size(); ++i)
      features *= x[i];
    return {x[0], features};
  }

  Tensor call(std::span<const Tensor> inputs, bool) override {
    const Tensor& x = inputs[0];                               // (N, ...)
    return reshape(x, compute_output_shape({&x.shape(), 1}));  // (N, features)
  }
};

}  // namespace

Flatten::Flatten(const std::string& name) : Layer(std::make_shared<FlattenLayer>(name)) {}

}  // namespace tandem::nn
