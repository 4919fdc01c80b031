#pragma once
// The inference path `tandem predict` and `tandem bench --inference` run, and the figures both
// report: model size, batch-1 latency percentiles and batched throughput.
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/bench.h"
#include "tandem/compile.h"
#include "tandem/nn.h"

namespace tandem::cli {

// A model run for inference as one compiled graph per batch size (ReLUs and residual adds fused
// into the convolutions); a last partial batch is padded to the batch size rather than compiled
// again. A float model runs with its batch norms folded into their convolutions
// (nn::fold_batch_norms), a quantised one on the integer kernels (quantization::integer_model:
// folded too, int8 weights made once).
class Inference {
 public:
  explicit Inference(const nn::Model& model);
  Inference(const Inference&) = delete;
  Inference& operator=(const Inference&) = delete;

  // "f32, batch norms folded, compiled" or "int8 kernels (oneDNN), ...".
  std::string description() const;
  bool quantized() const { return quantized_; }
  // The model's output for `inputs` (N, ...), run in batches of `batch_size`.
  Tensor predict(const Tensor& inputs, std::int64_t batch_size);

 private:
  bool quantized_;
  nn::Model model_;
  tandem::Function compiled_;
};

// The bytes a deployment stores for `model`: its weights in f32, or for a quantised model the
// int8 layout (quantization::int8_weight_bytes).
std::size_t inference_model_bytes(const nn::Model& model);

// `tandem bench --inference`: for each model and precision (fp32, int8) of `options`, the
// Inference of the zoo model (random weights; int8 quantised on 64 synthetic examples), its size,
// batch-1 latency percentiles over --windows x --steps calls and, per --batch-size, throughput of
// each window of --steps calls (median, min, max). Prints a table; writes JSON to `json_path`
// unless it is empty.
int run_inference_bench(const bench::BenchOptions& options, const std::string& json_path);

}  // namespace tandem::cli
