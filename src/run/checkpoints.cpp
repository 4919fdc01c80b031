#include "run/checkpoints.h"

#include <unistd.h>

#include <filesystem>
#include <ostream>

#include "core/text.h"

namespace tandem::run {

RunCheckpoints::RunCheckpoints(const RunConfig& config, io::RunConfig record,
                               std::optional<io::CheckpointInfo> resume, SettingName name)
    : options_(config.checkpoints),
      config_(config),
      record_(std::move(record)),
      resume_(std::move(resume)),
      name_(std::move(name)) {
  if (options_.directory.empty()) return;
  callback_ = std::make_shared<io::ModelCheckpoint>(
      options_.directory,
      io::ModelCheckpointOptions{.every_steps = options_.every_steps,
                                 .every_epoch = true,
                                 .checkpoint = {.keep_last = options_.keep,
                                                .monitor = options_.keep_best,
                                                .mode = "auto",
                                                .async = true,
                                                .config = record_},
                                 // A resumed run's checkpoints go on
                                 // recording the whole run's epochs.
                                 .history = resume_ ? resume_->history : io::EpochHistory{}});
}

io::EpochHistory RunCheckpoints::run_history(const train::History& fit) const {
  io::EpochHistory history = resume_ ? resume_->history : io::EpochHistory{};
  for (const auto& [key, values] : fit.history())
    history[key].insert(history[key].end(), values.begin(), values.end());
  return history;
}

void RunCheckpoints::prepare(nn::Model& model, const data::Dataset& training,
                             train::FitOptions& fit_options, std::ostream* log) {
  if (!options_.directory.empty()) {
    // A fresh run never writes into another run's checkpoints; a resumed one only into its own.
    const auto existing = io::latest_checkpoint(options_.directory);
    if (existing && !(resume_ && same_run(config_, *existing))) {
      throw ConfigError(name_("checkpoint-dir") + " " + options_.directory +
                        " holds checkpoints of another run (the newest at step " +
                        std::to_string(existing->position.step) + "); continue it with " +
                        name_("resume") + " " + options_.directory +
                        ", or choose an empty directory");
    }
  }
  if (!options_.save_model.empty()) {
    // Fail now rather than after training: every layer must be able to describe itself.
    for (const nn::Layer& layer : model.layers()) {
      if (!layer.impl().config()) {
        throw InvalidArgument(
            name_("save-model") + ": layer '" + layer.name() + "' (" + layer.impl().class_name() +
            ") cannot be saved yet (it has no config); train without " + name_("save-model") +
            ", or keep " + name_("checkpoint-dir") + " for its weights");
      }
    }
  }
  if (!resume_) return;
  if (resume_->steps_per_epoch != training.num_batches()) {
    const std::string difference = data_source_difference(config_, *resume_, name_);
    throw InvalidArgument(name_("resume") + " " + resume_->path + ": the run had " +
                          std::to_string(resume_->steps_per_epoch) +
                          " batches per epoch, this data gives " +
                          std::to_string(training.num_batches()) +
                          (difference.empty() ? "" : " (" + difference + ")") +
                          "; resume with the data set the run used");
  }
  const io::CheckpointInfo restored = io::restore_checkpoint(resume_->path, model);
  fit_options.initial_epoch = restored.position.epoch;
  fit_options.initial_step = restored.position.batch;
  if (log != nullptr) {
    *log << "resumed: " << restored.path << " (step " << restored.position.step << ": epoch "
         << restored.position.epoch + 1 << ", " << restored.position.batch << " of "
         << restored.steps_per_epoch << " batches done)\n";
  }
}

std::vector<std::shared_ptr<train::Callback>> RunCheckpoints::callbacks() const {
  if (!callback_) return {};
  return {callback_};
}

bool RunCheckpoints::finish(const nn::Model& model, const std::vector<std::string>& class_names,
                            std::ostream* out, std::ostream* warnings) {
  if (callback_ && out != nullptr) {
    *out << "checkpoints: "
         << plural(static_cast<std::int64_t>(callback_->saved().size()), "checkpoint")
         << " written to " << options_.directory << " (training waited "
         << fixed(1e3 * callback_->seconds_blocking(), 1) << " ms to copy the state; writing took "
         << fixed(1e3 * callback_->seconds_writing(), 1) << " ms in the background)\n";
  }
  return save(model, class_names, out, warnings);
}

void RunCheckpoints::rescue(const nn::Model& model, const std::vector<std::string>& class_names,
                            std::ostream* warnings, const std::string& failure) {
  if (options_.save_model.empty()) return;
  std::ostream& say = warnings != nullptr ? *warnings : std::cerr;
  say << "tandem: the run failed after training (" << failure
      << "); the trained model is saved all the same\n";
  save(model, class_names, &say, warnings);
}

bool RunCheckpoints::save(const nn::Model& model, const std::vector<std::string>& class_names,
                          std::ostream* out, std::ostream* warnings) {
  if (options_.save_model.empty()) return true;
  try {
    model.save(options_.save_model, class_names);
    if (out != nullptr) *out << "model: saved to " << options_.save_model << "\n";
    return true;
  } catch (const std::exception& error) {  // a full disk, or anything else: never lose it
    const std::string rescue = (std::filesystem::temp_directory_path() /
                                ("tandem-unsaved-model-" + std::to_string(::getpid())))
                                   .string();
    std::ostream& say = warnings != nullptr ? *warnings : std::cerr;
    say << "tandem: error: " << name_("save-model") << " " << options_.save_model << ": "
        << error.what() << "\n";
    try {
      model.save(rescue, class_names);
      say << "tandem: the trained model was saved to " << rescue
          << " instead; move it where it belongs\n";
    } catch (const std::exception& second) {
      say << "tandem: error: nor could it be saved to " << rescue << ": " << second.what()
          << (callback_
                  ? "; the last checkpoint in " + options_.directory + " holds the trained weights"
                  : std::string())
          << "\n";
    }
    return false;
  }
}

}  // namespace tandem::run
