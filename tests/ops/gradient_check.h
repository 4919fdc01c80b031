#pragma once
// Finite-difference gradient checking shared by the op tests. Every check runs in float64 on
// random inputs (fresh random shapes and values per run of the test, never zeros); the checks
// themselves are in ops/harness/finite_difference.h, which the op harness shares.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/harness/finite_difference.h"
#include "tandem/tandem.h"

namespace tandem::testing {

// Checks the tape's gradient of sum(fn(inputs) * weights), weights random, against central
// differences with respect to every element of every (differentiable) input.
inline void expect_gradients_match(const OpFunction& fn, std::vector<Tensor> inputs,
                                   const GradientCheckOptions& options = {},
                                   const std::string& label = "") {
  const std::string mismatch = gradient_mismatch(
      [&fn](const std::vector<Tensor>& xs) { return std::vector<Tensor>{fn(xs)}; },
      std::move(inputs), options);
  EXPECT_EQ(mismatch, "") << label;
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
