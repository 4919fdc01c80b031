#pragma once
// A trained model run for inference the fast way: what `tandem predict` and
// `tandem bench --inference` run, and what bench/inference times against onnxruntime.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tandem/compile.h"
#include "tandem/nn.h"

namespace tandem {

// A model run for inference as one compiled graph per batch size (ReLUs and residual adds fused
// into the convolutions, each residual block's last convolution writing over its input); a last
// partial batch is padded to the batch size rather than compiled again. A float model runs with
// its batch norms folded into their convolutions (nn::fold_batch_norms), a quantised one on the
// integer kernels (quantization::integer_model: folded too, int8 weights made once). The model
// given is not changed.
class InferenceModel {
 public:
  explicit InferenceModel(const nn::Model& model);
  InferenceModel(const InferenceModel&) = delete;
  InferenceModel& operator=(const InferenceModel&) = delete;

  // "f32, batch norms folded, compiled" or "int8 kernels (oneDNN), ...".
  std::string description() const;
  bool quantized() const { return quantized_; }
  // The model it runs: the given one with its batch norms folded, or its integer model (whose
  // weights are constants). Model::predict on it runs it eagerly.
  nn::Model& model() { return model_; }
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

}  // namespace tandem
