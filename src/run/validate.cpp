// The rules across a RunConfig's fields, and what they imply.
#include <filesystem>

#include "run/settings_table.h"
#include "tandem/run.h"

namespace tandem::run {
namespace {

// "a, b and c" of the settings' names.
std::string listed(const std::vector<std::string>& keys, const SettingName& name) {
  std::string text;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == keys.size() ? " and " : ", ") + name(keys[i]);
  }
  return text;
}

bool any_changed(const RunConfig& config, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    if (is_changed(config, key)) return true;
  }
  return false;
}

}  // namespace

void validate(RunConfig& config, const SettingName& name) {
  // ---- The data ----
  if (!config.data.images.training.empty() && is_changed(config, "data-dir")) {
    throw ConfigError(name("data") + " and " + name("data-dir") +
                      " both name the training data; pass one (" + name("data") +
                      " DIR reads a Fashion-MNIST folder too)");
  }
  if (!config.data.images.validation.empty() && config.data.validation_split > 0.0) {
    throw ConfigError(name("validation-data") + " and " + name("validation-split") +
                      " both say what to validate on; pass one of them");
  }
  // ---- Checkpoints ----
  CheckpointConfig& checkpoints = config.checkpoints;
  // A resumed run keeps checkpointing where it came from, unless told otherwise.
  if (!checkpoints.resume.empty() && checkpoints.directory.empty()) {
    const std::filesystem::path path(checkpoints.resume);
    const bool single = path.filename().string().starts_with("ckpt-");
    checkpoints.directory = single ? path.parent_path().string() : checkpoints.resume;
  }
  const std::vector<std::string> checkpointing{"checkpoint-every", "keep-checkpoints", "keep-best"};
  if (checkpoints.directory.empty() && any_changed(config, checkpointing)) {
    throw ConfigError(listed(checkpointing, name) + " need " + name("checkpoint-dir") + " DIR");
  }
  const std::string& best = checkpoints.keep_best;
  if (best.starts_with("val_") && config.data.validation_split == 0.0 &&
      config.data.images.validation.empty() && config.data.images.training.empty()) {
    throw ConfigError(
        name("keep-best") + " " + best + " needs validation data, and this run has none; add " +
        name("validation-split") + " F (e.g. 0.1), or keep the best by " + best.substr(4));
  }
  // ---- Observing ----
  if (config.logging.logdir.empty()) {
    for (const char* key : {"log-every", "histogram-freq", "monitor-interval"}) {
      if (is_changed(config, key)) {
        throw ConfigError(name(key) + " only matters with " + name("logdir") + " DIR; add " +
                          name("logdir"));
      }
    }
  }
  if (is_changed(config, "profile-steps") && !config.logging.profile &&
      !config.logging.log_device_placement) {
    throw ConfigError(name("profile-steps") + " only matters with " + name("profile") + " or " +
                      name("log-device-placement"));
  }
  if (!config.logging.trace_path.empty() && !config.logging.profile) {
    throw ConfigError(name("trace") + " only matters with " + name("profile") + "; add " +
                      name("profile"));
  }
  // ---- Pruning ----
  pruning::PruningRecipe& prune = config.pruning;
  const bool shaped = is_changed(config, "prune-schedule") || !prune.layers.empty() ||
                      (is_changed(config, "prune-pattern") && prune.pattern != "2:4");
  if (shaped && prune.sparsity == 0.0 && prune.pattern != "2:4") {
    throw ConfigError(listed({"prune-schedule", "prune-pattern", "prune-layers"}, name) +
                      " shape the pruning that " + name("prune") + " S asks for; add " +
                      name("prune") + " (e.g. " + name("prune") + " 0.8), or " +
                      name("prune-pattern") + " 2:4");
  }
  if (prune.pattern == "2:4") {
    if (prune.sparsity != 0.0 && prune.sparsity != 0.5) {
      throw ConfigError(name("prune-pattern") + " 2:4 prunes exactly half the weights; drop " +
                        name("prune") + " or pass " + name("prune") + " 0.5");
    }
    prune.sparsity = 0.5;
  }
  // ---- Quantisation ----
  const std::vector<std::string> quantizing{"calibrator", "calibration-examples", "qat-epochs",
                                            "quantize-layers"};
  if (config.quantization.precision.empty() && any_changed(config, quantizing)) {
    throw ConfigError(listed(quantizing, name) + " shape the quantisation that " +
                      name("quantize") + " int8 asks for; add " + name("quantize") + " int8");
  }
}

}  // namespace tandem::run
