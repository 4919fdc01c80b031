#pragma once
// Random test inputs and the float64 finite-difference gradient check, without gtest: the op
// harness (tests/ops/harness/) runs them from the tests and from bench/op_harness, and
// tests/ops/gradient_check.h wraps them in gtest expectations for the other tests.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tandem/tandem.h"

namespace tandem::testing {

// The run's seed, printed once so that a failure can be reproduced with TANDEM_TEST_SEED=<seed>.
inline std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    std::uint64_t value = std::random_device{}();
    if (const char* fixed = std::getenv("TANDEM_TEST_SEED")) value = std::stoull(fixed);
    std::printf("[gradient_check] TANDEM_TEST_SEED=%llu\n", static_cast<unsigned long long>(value));
    return value;
  }();
  return seed;
}

// A random engine seeded per test run from test_seed().
inline std::mt19937_64& test_rng() {
  static std::mt19937_64 engine(test_seed());
  return engine;
}

inline std::int64_t random_extent(std::int64_t low, std::int64_t high) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(test_rng());
}

// Values uniform in [low, high] with magnitude at least `min_magnitude` (so no zeros and no
// kinks of relu/abs/max right at the finite-difference step).
inline Tensor random_tensor(const Shape& shape, double low = -2.0, double high = 2.0,
                            double min_magnitude = 0.05, DType dtype = DType::f64) {
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<double> values(static_cast<std::size_t>(shape_numel(shape)));
  for (double& value : values) {
    do {
      value = uniform(test_rng());
    } while (std::abs(value) < min_magnitude);
  }
  return cast(Tensor::from_vector(values, shape), dtype);
}

using OpFunction = std::function<Tensor(const std::vector<Tensor>&)>;
using MultiOpFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct GradientCheckOptions {
  double step = 1e-6;
  double tolerance = 1e-6;           // on |analytic - numeric| / max(1, |numeric|)
  std::vector<bool> differentiable;  // per input; empty = all
};

// The scalar whose gradients the checks compare: sum_i sum(outputs[i] * weights[i]), each output
// cast to its weight's dtype, over the outputs that have a (defined) weight.
inline Tensor weighted_sum(const std::vector<Tensor>& outputs, const std::vector<Tensor>& weights) {
  Tensor total;
  for (std::size_t i = 0; i < outputs.size() && i < weights.size(); ++i) {
    if (!weights[i].defined()) continue;
    const Tensor term = sum(mul(cast(outputs[i], weights[i].dtype()), weights[i]));
    total = total.defined() ? add(total, term) : term;
  }
  return total;
}

// Compares the tape's gradient of weighted_sum(fn(inputs), weights), weights random (one per
// floating output), with central differences with respect to every element of every
// (differentiable) float64 input. Returns the first mismatch, or "" when all match.
inline std::string gradient_mismatch(const MultiOpFunction& fn, std::vector<Tensor> inputs,
                                     const GradientCheckOptions& options = {}) {
  std::vector<Tensor> weights;
  for (const Tensor& output : fn(inputs)) {
    weights.push_back(is_floating(output.dtype())
                          ? random_tensor(output.shape(), -1.0, 1.0, 0.1, output.dtype())
                          : Tensor());
  }
  auto objective = [&](const std::vector<Tensor>& xs) { return weighted_sum(fn(xs), weights); };

  std::vector<Tensor> analytic;
  {
    GradientTape tape;
    for (const Tensor& input : inputs) {
      if (is_floating(input.dtype())) tape.watch(input);
    }
    const Tensor loss = objective(inputs);
    analytic = tape.gradient(loss, inputs, {}, /*unconnected_zero=*/true);
  }

  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!options.differentiable.empty() && !options.differentiable[k]) continue;
    if (inputs[k].dtype() != DType::f64) continue;
    if (!analytic[k].defined()) return "no gradient for input " + std::to_string(k);
    const std::vector<double> grad = analytic[k].to_vector<double>();
    double* values = inputs[k].data<double>();
    for (std::int64_t e = 0; e < inputs[k].numel(); ++e) {
      const double original = values[e];
      values[e] = original + options.step;
      const double plus = objective(inputs).item();
      values[e] = original - options.step;
      const double minus = objective(inputs).item();
      values[e] = original;
      const double numeric = (plus - minus) / (2 * options.step);
      const double analytic_value = grad[static_cast<std::size_t>(e)];
      const double error = std::abs(analytic_value - numeric) / std::max(1.0, std::abs(numeric));
      if (!(error <= options.tolerance)) {
        std::ostringstream message;
        message << "input " << k << " element " << e << " of shape " << shape_str(inputs[k].shape())
                << ": analytic " << analytic_value << " vs numeric " << numeric << " (error "
                << error << ", tolerance " << options.tolerance << ")";
        return message.str();
      }
    }
  }
  return "";
}

}  // namespace tandem::testing
