// Every activation Keras 2.15 takes by name: its values against the definitions Keras and
// TensorFlow document (computed here in double), its gradient against central differences, and
// the names (silu read as swish, an unknown one listing the known).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ops/gradient_check.h"
#include "support/errors.h"
#include "tandem/tandem.h"

namespace tandem::nn {
namespace {

using testing::expect_close;

double sigmoid_of(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double softplus_of(double x) {
  return std::log1p(std::exp(x));
}

struct Definition {
  const char* name;
  std::function<double(double)> value;
};

const std::vector<Definition>& definitions() {
  static const std::vector<Definition> all{
      {"elu", [](double x) { return x > 0 ? x : std::expm1(x); }},
      {"selu", [](double x) { return kSeluScale * (x > 0 ? x : kSeluAlpha * std::expm1(x)); }},
      {"softplus", softplus_of},
      {"softsign", [](double x) { return x / (1 + std::abs(x)); }},
      {"swish", [](double x) { return x * sigmoid_of(x); }},
      {"exponential", [](double x) { return std::exp(x); }},
      {"hard_sigmoid", [](double x) { return std::clamp(0.2 * x + 0.5, 0.0, 1.0); }},
      {"mish", [](double x) { return x * std::tanh(softplus_of(x)); }},
      {"relu6", [](double x) { return std::clamp(x, 0.0, 6.0); }},
      {"leaky_relu", [](double x) { return x > 0 ? x : 0.2 * x; }},
  };
  return all;
}

TEST(Activations, EachHasItsDefinitionOnBothSidesOfItsBends) {
  // Both sides of zero, past hard_sigmoid's +-2.5 and relu6's 6, and far out (overflow-prone).
  const std::vector<double> points{-30, -7, -2.6, -1, -0.3, 0, 0.4, 1, 2.4, 5.9, 6.5, 30};
  const Tensor x = Tensor::from_vector<double>(points, {static_cast<std::int64_t>(points.size())});
  for (const Definition& definition : definitions()) {
    std::vector<double> expected;
    for (const double point : points)
      expected.push_back(definition.value(point));
    const Tensor want =
        Tensor::from_vector<double>(expected, {static_cast<std::int64_t>(points.size())});
    const ActivationFunction function = parse_activation(definition.name);
    EXPECT_EQ(activation_name(function), std::string(definition.name));
    expect_close(apply_activation(function, x), want, 1e-12, definition.name);
    expect_close(apply_activation(function, cast(x, DType::f32)), want, 1e-6,
                 std::string(definition.name) + " in f32");
  }
}

TEST(Activations, GradientsMatchCentralDifferences) {
  // Away from the kinks (0 for elu and leaky_relu, +-2.5 for hard_sigmoid, 0 and 6 for relu6),
  // where a central difference straddles two slopes.
  const Tensor x = Tensor::from_vector<double>({-4.1, -2.2, -0.7, 0.3, 1.6, 2.9, 5.2, 7.3}, {2, 4});
  for (const Definition& definition : definitions()) {
    const ActivationFunction function = parse_activation(definition.name);
    testing::expect_gradients_match(
        [function](const std::vector<Tensor>& inputs) {
          return apply_activation(function, inputs[0]);
        },
        {x}, {}, definition.name);
  }
}

TEST(Activations, SiluIsSwishAndAnUnknownNameListsTheKnown) {
  EXPECT_EQ(parse_activation("silu"), ActivationFunction::swish);
  EXPECT_EQ(std::string(activation_name(parse_activation("silu"))), "swish");
  const std::string message = testing::error_of([] { parse_activation("hard_swish"); });
  EXPECT_NE(message.find("unknown activation 'hard_swish'"), std::string::npos) << message;
  EXPECT_NE(message.find("mish, relu6, leaky_relu"), std::string::npos) << message;
}

TEST(Activations, ADenseLayerTakesTheNewNames) {
  clear_session();
  Dense dense(3, "selu");
  const Tensor x = Tensor::from_vector<float>({-1.0f, 0.5f, 2.0f, -3.0f}, {2, 2});
  const Tensor y = dense(x);
  const Tensor linear = add(matmul(x, dense.weights()[0]), dense.weights()[1]);
  expect_close(y, apply_activation(ActivationFunction::selu, linear), 1e-6);
}

}  // namespace
}  // namespace tandem::nn
