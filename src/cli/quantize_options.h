#pragma once
// `tandem train`'s quantisation options: --quantize int8 quantises the trained model after
// training (post-training, calibrated on training examples; tandem/quantization.h),
// --calibrator and --calibration-examples choose how, --qat-epochs N trains it N more epochs
// quantisation-aware. The saved model is quantised: `tandem predict` runs it in int8 and
// `tandem export --format onnx` writes it in QDQ form.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "tandem/data.h"
#include "tandem/quantization.h"

namespace tandem::cli {

struct QuantizeOptions {
  std::string precision;  // "int8", or empty: no quantisation
  std::string calibrator = "minmax";
  std::int64_t calibration_examples = 1024;
  std::int64_t qat_epochs = 0;
  std::vector<std::string> layers;
};

const OptionTable<QuantizeOptions>& quantize_options();

// What quantising a trained model did: the calibrated layers and the accuracy before QAT.
struct QuantizeOutcome {
  std::shared_ptr<quantization::Quantization> quantization;
  std::optional<double> fp32_test_accuracy;  // the float model's, before quantising
};

// Compiles the model as the run does, with Adam at this constant learning rate.
using CompileAtRate = std::function<void(double learning_rate)>;

// Quantises `model` (compiled, trained) when --quantize was given: post-training calibration on
// the first examples of `training`, then --qat-epochs of quantisation-aware training with Adam at
// a tenth of `learning_rate` (the run's schedule has decayed by then), compiled by `compile`.
// QAT runs with `callbacks` (a pruning run's, so its zeros stay). `test` (when there is one) is
// evaluated in fp32 first. Progress goes to `log` (nullptr: quiet).
std::optional<QuantizeOutcome> quantize_trained_model(
    const QuantizeOptions& options, nn::Model& model, const data::Dataset& training,
    const data::Dataset* test, double learning_rate, const CompileAtRate& compile,
    const std::vector<std::shared_ptr<train::Callback>>& callbacks, std::ostream* log);

// The report's "quantization" member: null without --quantize.
nlohmann::ordered_json quantization_report(const QuantizeOptions& options,
                                           const std::optional<QuantizeOutcome>& outcome);

}  // namespace tandem::cli
