#pragma once
// What the strategy tests train on and compare: a small labelled image set and the largest
// weight difference between two models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tandem/data.h"
#include "tandem/nn.h"
#include "tandem/random.h"

namespace tandem::testing {

// `examples` uniform images (N, side, side, 1) labelled n % 4, shuffled once and batched.
inline data::TensorDataset make_dataset(std::int64_t examples, std::int64_t batch,
                                        std::int64_t side = 16) {
  manual_seed(9);
  const Tensor x = random_uniform({examples, side, side, 1}, 0.0, 1.0);  // (N, side, side, 1)
  std::vector<std::int32_t> labels;
  for (std::int64_t n = 0; n < examples; ++n)
    labels.push_back(static_cast<std::int32_t>(n % 4));
  data::TensorDataset dataset(x, Tensor::from_vector(labels, {examples}));
  dataset.shuffle(1).batch(batch);
  return dataset;
}

inline double max_difference(const nn::Model& a, const nn::Model& b) {
  const std::vector<Tensor> wa = a.weights();
  const std::vector<Tensor> wb = b.weights();
  EXPECT_EQ(wa.size(), wb.size());
  double worst = 0;
  for (std::size_t j = 0; j < wa.size() && j < wb.size(); ++j) {
    const std::vector<float> va = wa[j].to_vector<float>();
    const std::vector<float> vb = wb[j].to_vector<float>();
    for (std::size_t i = 0; i < va.size(); ++i)
      worst = std::max(worst, std::abs(double(va[i]) - vb[i]));
  }
  return worst;
}

}  // namespace tandem::testing
