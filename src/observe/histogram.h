#pragma once
// Equal-width histograms for TensorBoard's Histograms and Distributions tabs.
#include <cstdint>
#include <vector>

namespace tandem::observe {

struct Histogram {
  double min = 0.0;
  double max = 0.0;
  double count = 0.0;  // finite values counted
  double sum = 0.0;
  double sum_squares = 0.0;
  // bucket_counts[i] counts the values from the bucket's left edge (bucket_limits[i - 1], or
  // `min` for the first) up to bucket_limits[i], exclusive except for the last bucket, whose
  // limit is `max`.
  std::vector<double> bucket_limits;
  std::vector<double> bucket_counts;
};

// `buckets` equal-width buckets between the smallest and largest finite value (one bucket when
// they are equal, none when there is no finite value). NaN and infinities are left out, so one
// diverged weight does not flatten the picture of the others.
Histogram make_histogram(const std::vector<double>& values, int buckets);

}  // namespace tandem::observe
