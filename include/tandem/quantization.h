#pragma once
// Int8 quantisation of Dense and Conv2D layers, simulated in floating point with fake_quantize
// (tandem/ops.h), in the scheme the integer kernels and ONNX's QDQ form run:
//   - weights: int8 per output channel, symmetric ([-127, 127], zero point 0), the scale
//     max |w_c| / 127 taken from the current weights at every forward pass;
//   - inputs: per tensor, zero point 0: uint8 [0, 255] where calibration never saw a negative
//     input (after a ReLU), int8 [-128, 127] otherwise, the scale threshold / 255 or / 127.
// Post-training quantisation (quantize_model) calibrates each input's threshold on data the float
// model runs: min_max takes the largest |x| seen, percentile a percentile of the non-zero |x|
// (outliers clipped), entropy the threshold whose int8 histogram of the non-zero |x| is closest
// to the float one in KL divergence (TensorRT's calibrator; exact zeros, half of a ReLU's output,
// quantise exactly with any scale and are left out). Quantisation-aware training is fit() on the
// quantised model: the forward pass sees int8 values, the gradient passes straight through where
// they were in range, and the thresholds stay at their calibrated values (as NVIDIA's QAT toolkit
// keeps them) while the weights and their scales move.
//
// BatchNormalization after a convolution is folded into it when the model runs in int8: with per
// channel weight scales that folding commutes with quantising the kernel (a channel's kernel and
// its scale scale together), so the simulated graph computes what the folded int8 one does.
//
//   auto quantization = quantization::quantize_model(model, calibration_set,
//                                                    {.calibrator = Calibrator::entropy});
//   model.evaluate(test_set);          // int8 accuracy after post-training quantisation
//   model.fit(training_set);           // quantisation-aware training
//   quantization->strip();             // back to float
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tandem/data.h"
#include "tandem/nn.h"

namespace tandem::quantization {

enum class Calibrator { min_max, percentile, entropy };
const char* calibrator_name(Calibrator calibrator);  // "minmax", "percentile", "entropy"
// Throws InvalidArgument listing the names for an unknown one.
Calibrator parse_calibrator(const std::string& name);

struct QuantizeOptions {
  Calibrator calibrator = Calibrator::min_max;
  double percentile = 99.99;  // of the non-zero |x|, for Calibrator::percentile; in (0, 100]
  // At most this many batches of the calibration set are run (0: all of it).
  std::int64_t calibration_batches = 100;
  // The layers to quantise, by name; empty: every Dense and Conv2D.
  std::vector<std::string> layers;
};

// One quantised layer's input, as calibrated.
struct InputQuantization {
  std::string layer;
  bool is_unsigned = false;   // uint8 [0, 255]; else int8 [-128, 127]; zero point 0 either way
  double threshold = 0.0;     // |x| is clipped at it
  double scale = 1.0;         // threshold / 255 (uint8) or / 127 (int8)
  double observed_max = 0.0;  // the largest |x| calibration saw
};

class Quantization {
 public:
  // `layers` (handles shared with the model) carry the quantizers `inputs` describe.
  Quantization(std::vector<nn::Layer> layers, std::vector<InputQuantization> inputs);
  // Every quantised layer's input, in the model's order.
  const std::vector<InputQuantization>& inputs() const { return inputs_; }
  // Ends the simulation: the layers compute in floating point again.
  void strip();
  bool stripped() const { return stripped_; }

 private:
  std::vector<nn::Layer> layers_;
  std::vector<InputQuantization> inputs_;
  bool stripped_ = false;
};

// Post-training quantisation: calibrates the inputs of `model`'s Dense and Conv2D layers (or
// options.layers) on up to options.calibration_batches batches of `calibration`, run through the
// float model in inference, and leaves the layers quantised (see above). Throws InvalidArgument
// naming a layer that is not in the model or is not a Dense or Conv2D, a calibration set whose
// examples do not fit the model's input, an empty calibration set or a bad option.
std::shared_ptr<Quantization> quantize_model(nn::Model& model, const data::Dataset& calibration,
                                             QuantizeOptions options = {});

// The quantised layers of `model` (quantize_model's, not stripped) with their calibrated inputs,
// in the model's order; empty for a float model. What Model::save records and the exporters
// read.
std::vector<InputQuantization> quantized_inputs(const nn::Model& model);
// Quantises `model`'s layers with inputs calibrated before (a saved model's), as quantize_model
// leaves them, without calibrating. Throws InvalidArgument naming a layer the model lacks or that
// cannot be quantised, or a scale that is not positive.
std::shared_ptr<Quantization> restore_quantization(nn::Model& model,
                                                   const std::vector<InputQuantization>& inputs);

// The quantised `model` for inference on the integer kernels (quantized_conv2d, quantized_matmul
// in tandem/ops.h: oneDNN's int8 primitives on the CPU): rebuilt with its batch norms folded into
// the layers before them (nn::fold_batch_norms; with per-channel weight scales folding commutes
// with quantising, so it computes what the simulation does up to f32 rounding), each quantised
// layer on int8 weights made once from its folded kernel. `model` is unchanged. The result is
// for inference: its weights are constants (Tensor::is_constant), which training or
// set_weights refuses. Throws InvalidArgument for a model without quantised layers.
nn::Model integer_model(const nn::Model& model);

// A kernel (output channels last) in int8, per output channel, as the quantised layer computes
// with it: scales[c] = max |w_c| / 127 (a channel of zeros keeps the smallest positive float),
// values = round(w / scale) (ties to even), in [-127, 127].
struct Int8Kernel {
  std::vector<std::int8_t> values;  // the kernel's shape and order
  std::vector<float> scales;        // (C_out,)
};
Int8Kernel quantize_kernel(const Tensor& kernel);
// The model's weights as an int8 deployment stores them: each quantised kernel as int8 values
// (one byte each) with one f32 scale per output channel, every other weight (biases, batch norm,
// unquantised layers) in f32, in the model's order. What an int8 model's size on disk is made of.
// The model's quantised layers are those of quantized_inputs(model).
std::vector<std::uint8_t> int8_weight_bytes(const nn::Model& model);

// ---- A training run's quantisation, as a run configures it (tandem train --quantize int8) ----

struct QuantizationRecipe {
  std::string precision;  // "int8", or empty: no quantisation
  std::string calibrator = "minmax";
  std::int64_t calibration_examples = 1024;  // training examples calibrated on
  // Epochs of quantisation-aware training after calibration, at a tenth of the learning rate.
  std::int64_t qat_epochs = 0;
  std::vector<std::string> layers;  // empty: every Dense and Conv2D
};

// What quantising a trained model did: the calibrated layers and the accuracy before QAT.
struct QuantizeOutcome {
  std::shared_ptr<Quantization> quantization;
  std::optional<double> fp32_test_accuracy;  // the float model's, before quantising
};

// Compiles the model as the run does, with its optimizer at this constant learning rate.
using CompileAtRate = std::function<void(double learning_rate)>;

// Quantises `model` (compiled, trained) as the recipe says: post-training calibration on the
// first examples of `training`, then qat_epochs of quantisation-aware training at a tenth of
// `learning_rate` (the run's schedule has decayed by then), compiled by `compile`, with
// `callbacks` (a pruning run's, so its zeros stay). `test`, when there is one, is evaluated in
// fp32 first. Progress goes to `log` (nullptr: quiet). Nullopt when the recipe quantises nothing.
std::optional<QuantizeOutcome> quantize_trained_model(
    const QuantizationRecipe& recipe, nn::Model& model, const data::Dataset& training,
    const data::Dataset* test, double learning_rate, const CompileAtRate& compile,
    const std::vector<std::shared_ptr<train::Callback>>& callbacks, std::ostream* log);

}  // namespace tandem::quantization
