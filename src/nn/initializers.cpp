// Weight initializers with Keras' names and formulas (keras.initializers).
#include <array>
#include <cmath>
#include <utility>

#include "tandem/nn.h"

namespace tandem::nn {
namespace {

constexpr std::array<std::pair<const char*, Initializer>, 7> kInitializers{{
    {"glorot_uniform", Initializer::glorot_uniform},
    {"glorot_normal", Initializer::glorot_normal},
    {"he_normal", Initializer::he_normal},
    {"he_uniform", Initializer::he_uniform},
    {"zeros", Initializer::zeros},
    {"ones", Initializer::ones},
    {"uniform", Initializer::uniform},
}};

// The standard deviation of a unit normal truncated at two standard deviations: dividing by it
// gives truncated draws the intended variance (Keras' VarianceScaling does the same).
constexpr double kTruncatedNormalStddev = 0.87962566103423978;

}  // namespace

Initializer parse_initializer(const std::string& name) {
  for (const auto& [known, initializer] : kInitializers) {
    if (name == known) return initializer;
  }
  std::string names;
  for (const auto& [known, initializer] : kInitializers) {
    names += (names.empty() ? "" : ", ") + std::string(known);
  }
  throw InvalidArgument("unknown initializer '" + name + "'; expected one of: " + names);
}

const char* initializer_name(Initializer initializer) {
  for (const auto& [known, candidate] : kInitializers) {
    if (candidate == initializer) return known;
  }
  TANDEM_ASSERT(false, "initializer missing from the name table");
}

Fans compute_fans(const Shape& shape) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) {
    return {static_cast<double>(shape[0]), static_cast<double>(shape[0])};
  }
  double receptive_field = 1;
  for (std::size_t i = 0; i + 2 < shape.size(); ++i)
    receptive_field *= static_cast<double>(shape[i]);
  return {static_cast<double>(shape[shape.size() - 2]) * receptive_field,
          static_cast<double>(shape.back()) * receptive_field};
}

Tensor initialize(Initializer initializer, const Shape& shape, DType dtype, Generator& generator) {
  const Fans fans = compute_fans(shape);
  switch (initializer) {
    case Initializer::glorot_uniform: {
      const double limit = std::sqrt(6.0 / (fans.fan_in + fans.fan_out));
      return random_uniform(shape, -limit, limit, dtype, generator);
    }
    case Initializer::glorot_normal:
      return truncated_normal(
          shape, 0.0, std::sqrt(2.0 / (fans.fan_in + fans.fan_out)) / kTruncatedNormalStddev, dtype,
          generator);
    case Initializer::he_normal:
      return truncated_normal(shape, 0.0, std::sqrt(2.0 / fans.fan_in) / kTruncatedNormalStddev,
                              dtype, generator);
    case Initializer::he_uniform: {
      const double limit = std::sqrt(6.0 / fans.fan_in);
      return random_uniform(shape, -limit, limit, dtype, generator);
    }
    case Initializer::zeros:
      return Tensor::zeros(shape, dtype);
    case Initializer::ones:
      return Tensor::ones(shape, dtype);
    case Initializer::uniform:
      return random_uniform(shape, -0.05, 0.05, dtype, generator);
  }
  TANDEM_ASSERT(false, "unhandled initializer");
}

}  // namespace tandem::nn
