#include "observe/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::observe {

Histogram make_histogram(const std::vector<double>& values, int buckets) {
  Histogram histogram;
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  for (double value : values) {
    if (!std::isfinite(value)) continue;
    low = std::min(low, value);
    high = std::max(high, value);
    histogram.count += 1.0;
    histogram.sum += value;
    histogram.sum_squares += value * value;
  }
  if (histogram.count == 0.0) return histogram;
  histogram.min = low;
  histogram.max = high;
  const int count = low == high ? 1 : buckets;
  const double width = (high - low) / count;
  histogram.bucket_counts.assign(static_cast<std::size_t>(count), 0.0);
  for (int i = 0; i < count; ++i) {
    histogram.bucket_limits.push_back(i + 1 == count ? high : low + width * (i + 1));
  }
  for (double value : values) {
    if (!std::isfinite(value)) continue;
    const int bucket =
        width > 0.0 ? std::clamp(static_cast<int>((value - low) / width), 0, count - 1) : 0;
    histogram.bucket_counts[static_cast<std::size_t>(bucket)] += 1.0;
  }
  return histogram;
}

}  // namespace tandem::observe
