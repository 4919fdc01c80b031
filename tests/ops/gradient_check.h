#pragma once
// Finite-difference gradient checking shared by the op tests. Every check runs in float64 on
// random inputs (fresh random shapes and values per run of the test, never zeros).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tandem/tandem.h"

namespace tandem::testing {

// A random engine seeded per test run; the seed is printed so a failure can be reproduced with
// TANDEM_TEST_SEED=<seed>.
inline std::mt19937_64& test_rng() {
  static std::mt19937_64 engine = [] {
    std::uint64_t seed = std::random_device{}();
    if (const char* fixed = std::getenv("TANDEM_TEST_SEED")) seed = std::stoull(fixed);
    std::printf("[gradient_check] TANDEM_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
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

struct GradientCheckOptions {
  double step = 1e-6;
  double tolerance = 1e-6;   // on |analytic - numeric| / max(1, |numeric|)
  std::vector<bool> differentiable;  // per input; empty = all
};

// Checks the tape's gradient of sum(fn(inputs) * weights), weights random, against central
// differences with respect to every element of every (differentiable) input.
inline void expect_gradients_match(const OpFunction& fn, std::vector<Tensor> inputs,
                                   const GradientCheckOptions& options = {},
                                   const std::string& label = "") {
  const Tensor probe = fn(inputs);
  const Tensor weights = random_tensor(probe.shape(), -1.0, 1.0, 0.1, probe.dtype());
  auto objective = [&](const std::vector<Tensor>& xs) { return sum(mul(fn(xs), weights)); };

  std::vector<Tensor> analytic;
  {
    GradientTape tape;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (is_floating(inputs[i].dtype())) tape.watch(inputs[i]);
    }
    const Tensor loss = objective(inputs);
    analytic = tape.gradient(loss, inputs, {}, /*unconnected_zero=*/true);
  }

  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!options.differentiable.empty() && !options.differentiable[k]) continue;
    if (inputs[k].dtype() != DType::f64) continue;
    ASSERT_TRUE(analytic[k].defined()) << label << ": no gradient for input " << k;
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
      const double error = std::abs(grad[static_cast<std::size_t>(e)] - numeric) /
                           std::max(1.0, std::abs(numeric));
      ASSERT_LE(error, options.tolerance)
          << label << ": input " << k << " element " << e << " of shape "
          << shape_str(inputs[k].shape()) << ": analytic " << grad[static_cast<std::size_t>(e)]
          << " vs numeric " << numeric;
    }
  }
}

// Element-wise closeness of two tensors of the same shape (any float dtype).
inline void expect_close(const Tensor& actual, const Tensor& expected, double tolerance,
                         const std::string& label = "") {
  ASSERT_EQ(actual.shape(), expected.shape()) << label;
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> b = expected.to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_LE(std::abs(a[i] - b[i]), tolerance * std::max(1.0, std::abs(b[i])))
        << label << ": element " << i << " of " << shape_str(actual.shape()) << ": " << a[i]
        << " vs " << b[i];
  }
}

}  // namespace tandem::testing
