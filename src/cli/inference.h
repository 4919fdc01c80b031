#pragma once
// `tandem bench --inference`: the figures of the inference path (tandem/inference.h) that
// `tandem predict --timing` reports too: model size, batch-1 latency percentiles and batched
// throughput.
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/bench.h"
#include "tandem/inference.h"

namespace tandem::cli {

// `tandem bench --inference`: for each model and precision (fp32, int8) of `options`, the
// InferenceModel of the zoo model (random weights; int8 quantised on 64 synthetic examples), its
// size, batch-1 latency percentiles over --windows x --steps calls and, per --batch-size,
// throughput of each window of --steps calls (median, min, max). Prints a table; writes JSON to
// `json_path` unless it is empty.
int run_inference_bench(const bench::BenchOptions& options, const std::string& json_path);

}  // namespace tandem::cli
