#include "cli/quantize_options.h"

#include "cli/format.h"

namespace tandem::cli {

const OptionTable<QuantizeOptions>& quantize_options() {
  using O = QuantizeOptions;
  static const OptionTable<O> table = [] {
    OptionTable<O> options({
        {"--quantize", "int8",
         "quantise the trained model's Dense and Conv2D layers to int8 (per-channel weights, "
         "per-tensor inputs calibrated on training examples); the saved model is quantised "
         "(default: none)",
         into(&O::precision, one_of({"int8"}, "quantisation"))},
        {"--calibrator", "NAME",
         "how --quantize sets each input's range: minmax (the largest value seen), percentile "
         "(99.99% of the values) or entropy (the closest int8 histogram in KL divergence, "
         "TensorRT's) (default minmax)",
         into(&O::calibrator, one_of({"minmax", "percentile", "entropy"}, "calibrator"))},
        {"--calibration-examples", "N", "training examples --quantize calibrates on (default 1024)",
         [](O& options, const std::string& option, const std::string& text) {
           options.calibration_examples = parse_positive_integer(option, text);
         }},
        {"--qat-epochs", "N",
         "after --quantize, train N more epochs quantisation-aware (int8 in the forward pass, the "
         "gradient straight through) with Adam at a tenth of the learning rate (default 0)",
         [](O& options, const std::string& option, const std::string& text) {
           options.qat_epochs = parse_positive_integer(option, text);
         }},
        {"--quantize-layers", "NAMES",
         "the layers --quantize quantises, comma-separated (default: every Dense and Conv2D)",
         [](O& options, const std::string& option, const std::string& text) {
           options.layers = parse_list(option, text);
         }},
    });
    options.check([](O& options, const ParsedArgs& args) {
      if (options.precision.empty() &&
          (args.has("--calibrator") || args.has("--calibration-examples") ||
           args.has("--qat-epochs") || args.has("--quantize-layers"))) {
        throw UsageError(
            "--calibrator, --calibration-examples, --qat-epochs and --quantize-layers shape the "
            "quantisation that --quantize int8 asks for; add --quantize int8");
      }
    });
    return options;
  }();
  return table;
}

std::optional<QuantizeOutcome> quantize_trained_model(
    const QuantizeOptions& options, nn::Model& model, const data::Dataset& training,
    const data::Dataset* test, double learning_rate, const CompileAtRate& compile,
    const std::vector<std::shared_ptr<train::Callback>>& callbacks, std::ostream* log) {
  if (options.precision.empty()) return std::nullopt;
  QuantizeOutcome outcome;
  if (test != nullptr) {
    outcome.fp32_test_accuracy = model.evaluate(*test).at("accuracy");
    if (log != nullptr) {
      *log << "test accuracy (fp32, before quantising): " << fixed(*outcome.fp32_test_accuracy, 4)
           << "\n";
    }
  }
  const std::int64_t batches =
      (options.calibration_examples + training.batch_size() - 1) / training.batch_size();
  outcome.quantization = quantization::quantize_model(
      model, training,
      {.calibrator = quantization::parse_calibrator(options.calibrator),
       .calibration_batches = batches,
       .layers = options.layers});
  if (log != nullptr) {
    *log << "quantisation: int8, " << outcome.quantization->inputs().size()
         << " layers calibrated (" << options.calibrator << ") on "
         << batches * training.batch_size() << " training examples:";
    for (const quantization::InputQuantization& input : outcome.quantization->inputs()) {
      const std::string threshold = fixed(input.threshold, 3);
      *log << " " << input.layer << " "
           << (input.is_unsigned ? "uint8 [0, " : "int8 [-" + threshold + ", ") << threshold << "]";
    }
    *log << "\n";
  }
  if (options.qat_epochs > 0) {
    compile(learning_rate / 10);
    if (log != nullptr) {
      *log << "quantisation-aware training: " << plural(options.qat_epochs, "epoch") << ", Adam lr "
           << shortest(learning_rate / 10) << "\n";
    }
    train::FitOptions fit_options;
    fit_options.verbose = log != nullptr ? 1 : 0;
    fit_options.callbacks = callbacks;
    model.fit(training, static_cast<int>(options.qat_epochs), fit_options);
  }
  return outcome;
}

nlohmann::ordered_json quantization_report(const QuantizeOptions& options,
                                           const std::optional<QuantizeOutcome>& outcome) {
  if (!outcome) return nullptr;
  nlohmann::ordered_json layers = nlohmann::ordered_json::object();
  for (const quantization::InputQuantization& input : outcome->quantization->inputs()) {
    layers[input.layer] = {{"input", input.is_unsigned ? "uint8" : "int8"},
                           {"threshold", input.threshold},
                           {"scale", input.scale}};
  }
  return {{"precision", options.precision},
          {"calibrator", options.calibrator},
          {"calibration_examples", options.calibration_examples},
          {"qat_epochs", options.qat_epochs},
          {"fp32_test_accuracy", outcome->fp32_test_accuracy
                                     ? nlohmann::ordered_json(*outcome->fp32_test_accuracy)
                                     : nlohmann::ordered_json(nullptr)},
          {"layers", layers}};
}

}  // namespace tandem::cli
