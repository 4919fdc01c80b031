#include "tandem/inference.h"

#include <algorithm>
#include <vector>

#include "core/tensor_copy.h"
#include "tandem/autodiff.h"
#include "tandem/ops.h"
#include "tandem/quantization.h"
#include "tandem/runtime.h"

namespace tandem {

InferenceModel::InferenceModel(const nn::Model& model)
    : quantized_(!quantization::quantized_inputs(model).empty()),
      model_(quantized_ ? quantization::integer_model(model) : nn::fold_batch_norms(model)),
      compiled_("predict", [this](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{model_(in[0], /*training=*/false)};
      }) {}

std::string InferenceModel::description() const {
  if (!quantized_) return "f32, batch norms folded, compiled";
  return cpu_kernels().int8
             ? "int8 kernels (oneDNN), batch norms folded, compiled"
             : "int8 grid in f32 kernels (this CPU has no VNNI), batch norms folded, compiled";
}

Tensor InferenceModel::predict(const Tensor& inputs, std::int64_t batch_size) {
  const NoGradGuard no_grad;
  const std::int64_t count = inputs.dim(0);
  const std::int64_t batch = std::min(batch_size, count);
  std::vector<Tensor> outputs;
  for (std::int64_t start = 0; start < count; start += batch) {
    const std::int64_t rows = std::min(batch, count - start);
    Tensor x = tandem::detail::rows(inputs, start, rows);  // (rows, ...)
    if (rows < batch) {
      Shape padding = x.shape();
      padding[0] = batch - rows;
      x = concat({x, Tensor::zeros(padding, x.dtype(), x.device())}, 0);
    }
    outputs.push_back(tandem::detail::rows(compiled_({x})[0], 0, rows));
  }
  return outputs.size() == 1 ? outputs.front() : concat(outputs, 0);
}

std::size_t inference_model_bytes(const nn::Model& model) {
  if (!quantization::quantized_inputs(model).empty()) {
    return quantization::int8_weight_bytes(model).size();
  }
  std::size_t bytes = 0;
  for (const Tensor& weight : model.weights())
    bytes += weight.nbytes();
  return bytes;
}

}  // namespace tandem
