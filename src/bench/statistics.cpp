// Quantiles and summaries of step times, and timing calls.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "tandem/bench.h"
#include "tandem/error.h"

namespace tandem::bench {

double quantile(std::vector<double> values, double q) {
  if (values.empty()) throw InvalidArgument("bench::quantile: the sample is empty");
  if (!(q >= 0.0 && q <= 1.0)) {
    throw InvalidArgument("bench::quantile: q must be in [0, 1], got " + std::to_string(q));
  }
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

Summary summarize(const std::vector<double>& values) {
  if (values.empty()) throw InvalidArgument("bench::summarize: the sample is empty");
  Summary summary;
  summary.count = values.size();
  summary.median = quantile(values, 0.5);
  summary.p10 = quantile(values, 0.1);
  summary.p90 = quantile(values, 0.9);
  summary.mean =
      std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  summary.min = *low;
  summary.max = *high;
  return summary;
}

std::vector<double> time_calls(const std::function<void()>& run, int warmup, int calls) {
  for (int i = 0; i < warmup; ++i)
    run();
  std::vector<double> seconds;
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return seconds;
}

}  // namespace tandem::bench
