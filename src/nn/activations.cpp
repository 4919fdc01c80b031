// Activation functions by Keras name, and the Activation layer.
#include <array>
#include <utility>

#include "nn/layer_util.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

constexpr std::array<std::pair<const char*, ActivationFunction>, 6> kActivations{{
    {"linear", ActivationFunction::linear},
    {"relu", ActivationFunction::relu},
    {"gelu", ActivationFunction::gelu},
    {"sigmoid", ActivationFunction::sigmoid},
    {"tanh", ActivationFunction::tanh},
    {"softmax", ActivationFunction::softmax},
}};

class ActivationLayer final : public LayerBase {
 public:
  ActivationLayer(const std::string& activation, const std::string& name)
      : LayerBase("activation", name), activation_(parse_activation(activation)) {}

  const char* class_name() const override { return "Activation"; }
  std::optional<LayerConfig> config() const override {
    return LayerConfig{{"activation", std::string(activation_name(activation_))}};
  }
  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    return input_shapes[0];
  }
  Tensor call(std::span<const Tensor> inputs, bool) override {
    return apply_activation(activation_, inputs[0]);
  }

 private:
  ActivationFunction activation_;
};

}  // namespace

ActivationFunction parse_activation(const std::string& name) {
  if (name.empty()) return ActivationFunction::linear;
  for (const auto& [known, activation] : kActivations) {
    if (name == known) return activation;
  }
  std::string names;
  for (const auto& [known, activation] : kActivations) {
    names += (names.empty() ? "" : ", ") + std::string(known);
  }
  throw InvalidArgument("unknown activation '" + name + "'; expected one of: " + names);
}

const char* activation_name(ActivationFunction activation) {
  for (const auto& [known, candidate] : kActivations) {
    if (candidate == activation) return known;
  }
  TANDEM_ASSERT(false, "activation missing from the name table");
}

Tensor apply_activation(ActivationFunction activation, const Tensor& x) {
  switch (activation) {
    case ActivationFunction::linear:
      return x;
    case ActivationFunction::relu:
      return relu(x);
    case ActivationFunction::gelu:
      return gelu(x, /*approximate=*/false);
    case ActivationFunction::sigmoid:
      return sigmoid(x);
    case ActivationFunction::tanh:
      return tanh(x);
    case ActivationFunction::softmax:
      return softmax(x, -1);
  }
  TANDEM_ASSERT(false, "unhandled activation");
}

Activation::Activation(const std::string& activation, const std::string& name)
    : Layer(std::make_shared<ActivationLayer>(activation, name)) {}

}  // namespace tandem::nn
