#pragma once
// Helpers shared by the convolution and pooling tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "ops/gradient_check.h"

namespace tandem::testing {

// Expects fn() to throw InvalidArgument whose message contains every fragment.
template <typename Fn>
void expect_invalid_argument(Fn&& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected InvalidArgument mentioning " << fragments.front();
  } catch (const InvalidArgument& error) {
    const std::string message = error.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message \"" << message << "\" lacks \"" << fragment << "\"";
    }
  }
}

// start, start + 1, ...: row-major contents for hand-derived examples.
inline std::vector<double> iota_values(std::int64_t count, double start = 1.0) {
  std::vector<double> values(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    values[static_cast<std::size_t>(i)] = start + i;
  }
  return values;
}

// Distinct values (a shuffled ladder with steps of `spacing`), so every max-pool window has a
// unique maximum even after a finite-difference nudge.
inline Tensor distinct_tensor(const Shape& shape, double spacing = 0.05, DType dtype = DType::f64) {
  std::vector<double> values(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = (static_cast<double>(i) - static_cast<double>(values.size()) / 2) * spacing;
  }
  std::shuffle(values.begin(), values.end(), test_rng());
  return cast(Tensor::from_vector(values, shape), dtype);
}

inline std::string options_str(const std::array<std::int64_t, 2>& strides, Padding padding) {
  return "strides " + std::to_string(strides[0]) + "x" + std::to_string(strides[1]) + ", padding " +
         padding_name(padding);
}

}  // namespace tandem::testing
