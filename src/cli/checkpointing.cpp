#include "cli/checkpointing.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <limits>

#include "cli/format.h"

namespace tandem::cli {
namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The option names `spec` declares that take no value.
bool is_flag(const CommandSpec& spec, const std::string& name) {
  for (const OptionSpec& option : spec.options) {
    if (option.name == name) return option.value_name.empty();
  }
  return false;
}

}  // namespace

const OptionTable<CheckpointingOptions>& checkpointing_options() {
  using O = CheckpointingOptions;
  static const OptionTable<O> table(
      {
          {"--checkpoint-dir", "DIR",
           "write checkpoints (weights, optimizer state, RNG and data position) into DIR, "
           "atomically and in the background; a run killed at any moment resumes from the last "
           "one with --resume DIR",
           into(&O::directory, parse_directory)},
          {"--checkpoint-every", "N",
           "also checkpoint every N training steps (default: at the end of each epoch only)",
           into(&O::every_steps, parse_positive_integer)},
          {"--keep-checkpoints", "N",
           "keep the newest N checkpoints, delete older ones (default " + std::to_string(O{}.keep) +
               "; 0 keeps all)",
           [](O& options, const std::string& option, const std::string& text) {
             const std::uint64_t keep = parse_unsigned_integer(option, text);
             if (keep > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
               throw UsageError(option + " " + text + " is too many");
             }
             options.keep = static_cast<int>(keep);
           }},
          {"--keep-best", "LOG",
           "also keep the best checkpoint by this log: val_loss, val_accuracy (with "
           "--validation-split), loss or accuracy (lowest loss, highest accuracy)",
           [](O& options, const std::string& option, const std::string& text) {
             static const std::vector<std::string> logs{"loss", "accuracy", "val_loss",
                                                        "val_accuracy"};
             if (!contains(logs, text)) {
               throw UsageError(option + " " + text +
                                ": choose loss, accuracy, val_loss or val_accuracy");
             }
             options.keep_best = text;
           }},
          {"--resume", "DIR",
           "continue the run whose checkpoints are in DIR (or the checkpoint DIR/ckpt-<step>) "
           "where it stopped, with its settings; checkpoints go on into DIR",
           [](O& options, const std::string& option, const std::string& text) {
             if (text.empty()) throw UsageError(option + " needs a checkpoint directory, got ''");
             options.resume = text;
           }},
          {"--deterministic", "",
           "bit-identical results run to run and for any --threads: kernels sum in a fixed order "
           "(slower); with --resume the final weights equal an uninterrupted run's",
           flag(&O::deterministic)},
          {"--save-model", "DIR",
           "save the trained model (architecture JSON and safetensors weights) into DIR for "
           "tandem predict and tandem export",
           into(&O::save_model, parse_directory)},
      },
      {[](O& options, const ParsedArgs& args) {
        // A resumed run keeps checkpointing where it came from, unless told otherwise.
        if (!options.resume.empty() && options.directory.empty()) {
          const std::filesystem::path path(options.resume);
          const bool single = path.filename().string().starts_with("ckpt-");
          options.directory = single ? path.parent_path().string() : options.resume;
        }
        if ((args.has("--checkpoint-every") || args.has("--keep-checkpoints") ||
             args.has("--keep-best")) &&
            options.directory.empty()) {
          throw UsageError(
              "--checkpoint-every, --keep-checkpoints and --keep-best need --checkpoint-dir DIR");
        }
      }});
  return table;
}

const std::vector<std::string>& run_defining_options() {
  static const std::vector<std::string> names{
      "--model", "--epochs",           "--batch-size",    "--lr",       "--lr-schedule",
      "--seed",  "--validation-split", "--deterministic", "--precision"};
  return names;
}

const std::vector<std::string>& carried_options() {
  static const std::vector<std::string> names{"--data-dir",
                                              "--data",
                                              "--validation-data",
                                              "--test-data",
                                              "--image-feature",
                                              "--label-feature",
                                              "--image-size",
                                              "--channels",
                                              "--augment",
                                              "--num-classes",
                                              "--prune",
                                              "--prune-schedule",
                                              "--prune-pattern",
                                              "--prune-layers",
                                              "--data-fraction",
                                              "--checkpoint-every",
                                              "--keep-checkpoints",
                                              "--keep-best",
                                              "--quantize",
                                              "--calibrator",
                                              "--calibration-examples",
                                              "--qat-epochs",
                                              "--quantize-layers"};
  return names;
}

ParsedArgs resumed_arguments(const CommandSpec& spec, const ParsedArgs& args,
                             const io::CheckpointInfo& checkpoint,
                             const std::function<io::RunConfig(const ParsedArgs&)>& canonical) {
  const io::RunConfig& saved = checkpoint.config;
  for (const std::string& name : run_defining_options()) {
    if (!saved.contains(name)) {
      throw UsageError("--resume " + checkpoint.path + ": the checkpoint does not record " + name +
                       "; it was not written by `tandem train`");
    }
  }
  const io::RunConfig given = canonical(args);
  for (const std::string& name : run_defining_options()) {
    if (!args.has(name) || given.at(name) == saved.at(name)) continue;
    throw UsageError(name + " " + given.at(name) + " differs from the run being resumed (" + name +
                     " " + saved.at(name) + " in " + checkpoint.path +
                     "); a resumed run keeps its settings: drop " + name);
  }
  std::vector<std::string> merged;
  for (const auto& [name, value] : saved) {
    const bool run_option = contains(run_defining_options(), name);
    if (!run_option && !(contains(carried_options(), name) && !args.has(name))) continue;
    if (is_flag(spec, name)) {
      if (value == "true") merged.push_back(name);
    } else if (!value.empty()) {
      merged.push_back(name + "=" + value);
    }
  }
  for (const OptionSpec& option : spec.options) {
    if (!args.has(option.name) || contains(run_defining_options(), option.name)) continue;
    merged.push_back(option.value_name.empty() ? option.name
                                               : option.name + "=" + *args.value(option.name));
  }
  return parse_args(spec, merged);
}

Checkpointing::Checkpointing(CheckpointingOptions options, io::RunConfig config,
                             std::optional<io::CheckpointInfo> resume)
    : options_(std::move(options)), config_(std::move(config)), resume_(std::move(resume)) {
  if (options_.directory.empty()) return;
  callback_ = std::make_shared<io::ModelCheckpoint>(
      options_.directory,
      io::ModelCheckpointOptions{.every_steps = options_.every_steps,
                                 .every_epoch = true,
                                 .checkpoint = {.keep_last = options_.keep,
                                                .monitor = options_.keep_best,
                                                .mode = "auto",
                                                .async = true,
                                                .config = config_},
                                 // A resumed run's checkpoints go on
                                 // recording the whole run's epochs.
                                 .history = resume_ ? resume_->history : io::EpochHistory{}});
}

io::EpochHistory Checkpointing::run_history(const train::History& fit) const {
  io::EpochHistory history = resume_ ? resume_->history : io::EpochHistory{};
  for (const auto& [key, values] : fit.history())
    history[key].insert(history[key].end(), values.begin(), values.end());
  return history;
}

void Checkpointing::prepare(nn::Model& model, const data::Dataset& training,
                            train::FitOptions& fit_options, std::ostream* log) {
  if (!options_.directory.empty()) {
    // A fresh run never writes into another run's checkpoints; a resumed one only into its own.
    const auto existing = io::latest_checkpoint(options_.directory);
    bool same_run = existing.has_value() && resume_.has_value();
    for (const std::string& name : run_defining_options()) {
      same_run = same_run && existing->config.contains(name) &&
                 existing->config.at(name) == config_.at(name);
    }
    if (existing && !same_run) {
      throw UsageError("--checkpoint-dir " + options_.directory +
                       " holds checkpoints of another run (the newest at step " +
                       std::to_string(existing->position.step) + "); continue it with --resume " +
                       options_.directory + ", or choose an empty directory");
    }
  }
  if (!options_.save_model.empty()) {
    // Fail now rather than after training: every layer must be able to describe itself.
    for (const nn::Layer& layer : model.layers()) {
      if (!layer.impl().config()) {
        throw InvalidArgument("--save-model: layer '" + layer.name() + "' (" +
                              layer.impl().class_name() +
                              ") cannot be saved yet (it has no config); train without "
                              "--save-model, or keep --checkpoint-dir for its weights");
      }
    }
  }
  if (!resume_) return;
  if (resume_->config.contains(kReplicasKey) &&
      resume_->config.at(kReplicasKey) != config_.at(kReplicasKey)) {
    throw UsageError("--resume " + resume_->path + ": the run trained on " +
                     resume_->config.at(kReplicasKey) + " replicas, this one has " +
                     config_.at(kReplicasKey) +
                     "; resume it with as many replicas as it had, e.g. `tandem launch -n " +
                     resume_->config.at(kReplicasKey) +
                     " -- tandem train --strategy multi-worker --resume ...`");
  }
  if (resume_->steps_per_epoch != training.num_batches()) {
    throw InvalidArgument(
        "--resume " + resume_->path + ": the run had " + std::to_string(resume_->steps_per_epoch) +
        " batches per epoch, this data gives " + std::to_string(training.num_batches()) +
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

std::vector<std::shared_ptr<train::Callback>> Checkpointing::callbacks() const {
  if (!callback_) return {};
  return {callback_};
}

bool Checkpointing::finish(const nn::Model& model, const std::vector<std::string>& class_names,
                           std::ostream& out) {
  if (callback_) {
    out << "checkpoints: "
        << plural(static_cast<std::int64_t>(callback_->saved().size()), "checkpoint")
        << " written to " << options_.directory << " (training waited "
        << fixed(1e3 * callback_->seconds_blocking(), 1) << " ms to copy the state; writing took "
        << fixed(1e3 * callback_->seconds_writing(), 1) << " ms in the background)\n";
  }
  if (options_.save_model.empty()) return true;
  try {
    model.save(options_.save_model, class_names);
    out << "model: saved to " << options_.save_model << "\n";
    return true;
  } catch (const IoError& error) {
    const std::string rescue = (std::filesystem::temp_directory_path() /
                                ("tandem-unsaved-model-" + std::to_string(::getpid())))
                                   .string();
    std::cerr << "tandem: error: --save-model " << options_.save_model << ": " << error.what()
              << "\n";
    try {
      model.save(rescue, class_names);
      std::cerr << "tandem: the trained model was saved to " << rescue
                << " instead; move it where it belongs\n";
    } catch (const IoError& second) {
      std::cerr << "tandem: error: nor could it be saved to " << rescue << ": " << second.what()
                << (callback_ ? "; the last checkpoint in " + options_.directory +
                                    " holds the trained weights"
                              : std::string())
                << "\n";
    }
    return false;
  }
}

}  // namespace tandem::cli
