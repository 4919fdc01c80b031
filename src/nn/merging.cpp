// Add: the element-wise sum of two or more inputs of one shape (residual connections).
#include "nn/layer_util.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

class AddLayer final : public LayerBase {
 public:
  explicit AddLayer(const std::string& name) : LayerBase("add", name) {}

  const char* class_name() const override { return "Add"; }
  std::optional<LayerConfig> config() const override { return LayerConfig{}; }
  int arity() const override { return 0; }

  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    for (std::size_t i = 1; i < input_shapes.size(); ++i) {
      if (input_shapes[i] != input_shapes[0]) {
        throw InvalidArgument(detail::describe(*this) + ": input " + std::to_string(i) + " " +
                              shape_str(input_shapes[i]) + " differs from input 0 " +
                              shape_str(input_shapes[0]) +
                              "; inputs must have one shape (project the shortcut with a 1x1 "
                              "Conv2D or Dense to match)");
      }
    }
    return input_shapes[0];
  }

  Tensor call(std::span<const Tensor> inputs, bool) override {
    Tensor total = add(inputs[0], inputs[1]);
    for (std::size_t i = 2; i < inputs.size(); ++i)
      total = add(total, inputs[i]);
    return total;
  }
};

}  // namespace

Add::Add(const std::string& name) : Layer(std::make_shared<AddLayer>(name)) {}

}  // namespace tandem::nn
