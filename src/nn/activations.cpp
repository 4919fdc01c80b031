// Activation functions by Keras name, and the Activation layer.
#include <array>
#include <utility>

#include "nn/layer_util.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

constexpr std::array<std::pair<const char*, ActivationFunction>, 16> kActivations{{
    {"linear", ActivationFunction::linear},
    {"relu", ActivationFunction::relu},
    {"gelu", ActivationFunction::gelu},
    {"sigmoid", ActivationFunction::sigmoid},
    {"tanh", ActivationFunction::tanh},
    {"softmax", ActivationFunction::softmax},
    {"elu", ActivationFunction::elu},
    {"selu", ActivationFunction::selu},
    {"softplus", ActivationFunction::softplus},
    {"softsign", ActivationFunction::softsign},
    {"swish", ActivationFunction::swish},
    {"exponential", ActivationFunction::exponential},
    {"hard_sigmoid", ActivationFunction::hard_sigmoid},
    {"mish", ActivationFunction::mish},
    {"relu6", ActivationFunction::relu6},
    {"leaky_relu", ActivationFunction::leaky_relu},
}};

// alpha (exp(x) - 1) below zero, x above.
Tensor elu_of(const Tensor& x, double alpha) {
  // exp of the negative part only: exp(x) of a large x would overflow into the unused branch,
  // and its gradient (inf * 0) into a NaN.
  const Tensor negative = minimum(x, scalar_like(x, 0.0));
  return where(greater(x, scalar_like(x, 0.0)), x, (exp(negative) + -1.0) * alpha);
}

// log(1 + exp(x)) without overflow: max(x, 0) + log(1 + exp(-|x|)).
Tensor softplus_of(const Tensor& x) {
  return maximum(x, scalar_like(x, 0.0)) + log(exp(neg(abs(x))) + 1.0);
}

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
  if (name == "silu") return ActivationFunction::swish;  // Keras' alias, saved as "swish"
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
    case ActivationFunction::elu:
      return elu_of(x, 1.0);
    case ActivationFunction::selu:
      return elu_of(x, kSeluAlpha) * kSeluScale;
    case ActivationFunction::softplus:
      return softplus_of(x);
    case ActivationFunction::softsign:
      return div(x, abs(x) + 1.0);
    case ActivationFunction::swish:
      return x * sigmoid(x);
    case ActivationFunction::exponential:
      return exp(x);
    case ActivationFunction::hard_sigmoid:
      return minimum(maximum(x * 0.2 + 0.5, scalar_like(x, 0.0)), scalar_like(x, 1.0));
    case ActivationFunction::mish:
      return x * tanh(softplus_of(x));
    case ActivationFunction::relu6:
      return minimum(relu(x), scalar_like(x, 6.0));
    case ActivationFunction::leaky_relu:
      return where(greater(x, scalar_like(x, 0.0)), x, x * kLeakyReluSlope);
  }
  TANDEM_ASSERT(false, "unhandled activation");
}

Activation::Activation(const std::string& activation, const std::string& name)
    : Layer(std::make_shared<ActivationLayer>(activation, name)) {}

}  // namespace tandem::nn
