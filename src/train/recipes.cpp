// The pruning and quantisation recipes of a training run: the schedules, calibration and
// quantisation-aware training that `tandem train --prune/--quantize` (and RunConfig) ask for.
#include <algorithm>
#include <ostream>

#include "core/text.h"
#include "tandem/pruning.h"
#include "tandem/quantization.h"

namespace tandem::pruning {

std::shared_ptr<Pruning> make_pruning(const PruningRecipe& recipe, nn::Model& model,
                                      std::int64_t total_steps) {
  if (recipe.sparsity == 0.0) return nullptr;
  const std::int64_t frequency = std::clamp<std::int64_t>(total_steps / 20, 1, 100);
  PruneOptions prune{.layers = recipe.layers};
  if (recipe.pattern == "2:4") prune.pattern = Pattern::two_of_four;
  if (recipe.schedule == "constant" || recipe.pattern == "2:4") {
    prune.schedule = ConstantSparsity{.target_sparsity = recipe.sparsity, .frequency = frequency};
  } else {
    const std::int64_t end = std::max<std::int64_t>(1, total_steps * 3 / 4);
    prune.schedule = PolynomialDecay{.initial_sparsity = 0.0,
                                     .final_sparsity = recipe.sparsity,
                                     .begin_step = 0,
                                     .end_step = end - end % frequency,
                                     .frequency = frequency};
  }
  return prune_low_magnitude(model, std::move(prune));
}

}  // namespace tandem::pruning

namespace tandem::quantization {

std::optional<QuantizeOutcome> quantize_trained_model(
    const QuantizationRecipe& recipe, nn::Model& model, const data::Dataset& training,
    const data::Dataset* test, double learning_rate, const CompileAtRate& compile,
    const std::vector<std::shared_ptr<train::Callback>>& callbacks, std::ostream* log) {
  if (recipe.precision.empty()) return std::nullopt;
  QuantizeOutcome outcome;
  if (test != nullptr) {
    outcome.fp32_test_accuracy = model.evaluate(*test).at("accuracy");
    if (log != nullptr) {
      *log << "test accuracy (fp32, before quantising): " << fixed(*outcome.fp32_test_accuracy, 4)
           << "\n";
    }
  }
  const std::int64_t batches =
      (recipe.calibration_examples + training.batch_size() - 1) / training.batch_size();
  outcome.quantization = quantize_model(model, training,
                                        {.calibrator = parse_calibrator(recipe.calibrator),
                                         .calibration_batches = batches,
                                         .layers = recipe.layers});
  if (log != nullptr) {
    *log << "quantisation: int8, " << outcome.quantization->inputs().size()
         << " layers calibrated (" << recipe.calibrator << ") on "
         << batches * training.batch_size() << " training examples:";
    for (const InputQuantization& input : outcome.quantization->inputs()) {
      const std::string threshold = fixed(input.threshold, 3);
      *log << " " << input.layer << " "
           << (input.is_unsigned ? "uint8 [0, " : "int8 [-" + threshold + ", ") << threshold << "]";
    }
    *log << "\n";
  }
  if (recipe.qat_epochs > 0) {
    compile(learning_rate / 10);
    if (log != nullptr) {
      *log << "quantisation-aware training: " << plural(recipe.qat_epochs, "epoch") << ", Adam lr "
           << shortest(learning_rate / 10) << "\n";
    }
    model.fit(training, {.epochs = static_cast<int>(recipe.qat_epochs),
                         .verbose = log != nullptr ? 1 : 0,
                         .callbacks = callbacks});
  }
  return outcome;
}

}  // namespace tandem::quantization
