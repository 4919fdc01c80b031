// Checkpoints: a folder per checkpoint (ckpt-<step>) with the model's weights and the optimizer's
// slots as safetensors and state.json holding the position, the RNG states, the epoch's running
// metrics, the loss scale, the run configuration and a CRC-32C of every file (the state is sealed
// with its own). A checkpoint is staged in a hidden folder, every file fsynced, then renamed into
// place; the writer runs on a thread of its own so training only waits for the copy of the state.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/files.h"
#include "core/tensor_copy.h"
#include "io/file_io.h"
#include "io/format_util.h"
#include "io/weight_match.h"
#include "tandem/io.h"
#include "tandem/runtime.h"

namespace tandem::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "tandem.checkpoint";
constexpr int kFormatVersion = 1;
constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "state.json";
constexpr const char* kNamePrefix = "ckpt-";
constexpr const char* kAccumulatedSlot = "accumulated_gradient";

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string checkpoint_name(std::int64_t step) {
  char text[32];
  std::snprintf(text, sizeof text, "%s%010lld", kNamePrefix, static_cast<long long>(step));
  return text;
}

// The step in a folder name "ckpt-0000000640", or nothing for any other name.
std::optional<std::int64_t> step_of(const std::string& name) {
  if (!name.starts_with(kNamePrefix)) return std::nullopt;
  const std::string digits = name.substr(std::string(kNamePrefix).size());
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

// Everything a checkpoint holds, copied out of the model at one moment, ready to be written.
struct Snapshot {
  CheckpointInfo info;  // the path is filled in once written
  NamedTensors weights;
  NamedTensors optimizer;
  json state;  // without "files" and the seal
};

json rng_state(const Generator& generator) {
  return {{"seed", generator.seed()}, {"offset", generator.offset()}};
}

// NaN (a diverged epoch) is not JSON: written as null, read back as NaN.
json history_json(const EpochHistory& history) {
  json object = json::object();
  for (const auto& [key, values] : history) {
    json series = json::array();
    for (const double value : values)
      series.push_back(std::isfinite(value) ? json(value) : json(nullptr));
    object[key] = series;
  }
  return object;
}

EpochHistory history_from_json(const json& object) {
  EpochHistory history;
  for (const auto& [key, series] : object.items()) {
    for (const json& value : series)
      history[key].push_back(value.is_number() ? value.get<double>() : std::nan(""));
  }
  return history;
}

Snapshot take_snapshot(nn::Model& model, const TrainingPosition& position, const train::Logs& logs,
                       std::int64_t steps_per_epoch, int epochs, const RunConfig& config,
                       const EpochHistory& history) {
  Snapshot snapshot;
  for (auto& [name, weight] : named_weights(model)) {
    // A checkpoint is what a run resumes from: one of diverged weights would only train on NaN,
    // and it would push the last good one out.
    if (const std::int64_t bad = detail::non_finite_values(weight); bad > 0) {
      throw train::NonFiniteLoss(
          "training diverged: the checkpoint at step " + std::to_string(position.step) +
          " is not written: weight '" + name + "' holds " + std::to_string(bad) +
          " NaN or infinite values; the checkpoints before it hold the last finite weights; try "
          "a lower learning rate, gradient clipping (clipnorm), or fp32 instead of fp16");
    }
    snapshot.weights.emplace_back(name, weight.clone());
  }

  json optimizer = nullptr;
  json loss_scale = nullptr;
  json metrics = json::object();
  if (model.compiled()) {
    train::Optimizer& live = model.optimizer();
    const std::vector<Tensor> variables = model.trainable_weights();
    const train::OptimizerState state = live.state(variables);
    const std::vector<std::string> slot_names = live.slot_names();
    for (std::size_t i = 0; i < variables.size(); ++i) {
      const std::string& variable = variables[i].name();
      for (std::size_t k = 0; k < state.slots[i].size(); ++k) {
        snapshot.optimizer.emplace_back(variable + "/" + slot_names[k], state.slots[i][k]);
      }
      if (state.accumulated[i].defined()) {
        snapshot.optimizer.emplace_back(variable + "/" + kAccumulatedSlot, state.accumulated[i]);
      }
    }
    optimizer = {{"class_name", live.name()},
                 {"iterations", state.iterations},
                 {"accumulated_calls", state.accumulated_calls},
                 {"slot_names", slot_names}};
    if (state.loss_scale) {
      loss_scale = {{"scale", state.loss_scale->scale},
                    {"good_steps", state.loss_scale->good_steps}};
    }
    metrics[model.loss_tracker().name()] = detail::numbers_json(model.loss_tracker().variables());
    for (const auto& metric : model.metrics())
      metrics[metric->name()] = detail::numbers_json(metric->variables());
  }

  json layer_rngs = json::object();
  for (const nn::Layer& layer : model.layers()) {
    if (const Generator* generator = layer.impl().generator()) {
      layer_rngs[layer.name()] = rng_state(*generator);
    }
  }
  snapshot.state = {
      {"format", kFormat},
      {"format_version", kFormatVersion},
      {"tandem_version", version()},
      {"model", model.name()},
      {"position", {{"epoch", position.epoch}, {"batch", position.batch}, {"step", position.step}}},
      {"steps_per_epoch", steps_per_epoch},
      {"epochs", epochs},
      {"optimizer", optimizer},
      {"loss_scale", loss_scale},
      {"rng", {{"default", rng_state(default_generator())}, {"layers", layer_rngs}}},
      {"metrics", metrics},
      {"logs", detail::logs_json(logs)},
      {"config", config},
      {"history", history_json(history)},
  };
  snapshot.info.position = position;
  snapshot.info.steps_per_epoch = steps_per_epoch;
  snapshot.info.epochs = epochs;
  snapshot.info.logs = logs;
  snapshot.info.config = config;
  snapshot.info.history = history;
  return snapshot;
}

// Writes the snapshot as <directory>/ckpt-<step>: staged in a hidden folder, each file fsynced,
// the folder fsynced, then moved into place (replacing a checkpoint of the same step).
std::string write_snapshot(const std::string& directory, Snapshot& snapshot) {
  const Metadata metadata{{"format", kFormat},
                          {"step", std::to_string(snapshot.info.position.step)}};
  const std::vector<std::uint8_t> weights = encode_safetensors(snapshot.weights, metadata);
  const std::vector<std::uint8_t> optimizer = encode_safetensors(snapshot.optimizer, metadata);
  json files = json::object();
  files[kWeightsFile] = detail::file_record(weights);
  files[kOptimizerFile] = detail::file_record(optimizer);
  json state = snapshot.state;
  state["files"] = files;
  const std::string state_text = detail::seal_json(std::move(state));

  const std::string target =
      (fs::path(directory) / checkpoint_name(snapshot.info.position.step)).string();
  try {
    detail::write_directory(target, {{kWeightsFile, weights},
                                     {kOptimizerFile, optimizer},
                                     {kStateFile, detail::as_bytes(state_text)}});
  } catch (const IoError& failure) {
    throw IoError("checkpoint at step " + std::to_string(snapshot.info.position.step) +
                  " not written (the earlier checkpoints in " + directory +
                  " are intact): " + failure.what());
  }
  return target;
}

CheckpointInfo info_from_state(const std::string& path, const json& state) {
  const std::string what = (fs::path(path) / kStateFile).string();
  try {
    if (state.at("format") != kFormat) {
      throw IoError(what + ": not a Tandem checkpoint state (format '" + state.at("format").dump() +
                    "')");
    }
    if (state.at("format_version").get<int>() > kFormatVersion) {
      throw IoError(what + ": format version " + state.at("format_version").dump() +
                    " is newer than this Tandem reads (" + std::to_string(kFormatVersion) +
                    "); update Tandem");
    }
    CheckpointInfo info;
    info.path = path;
    const json& position = state.at("position");
    info.position = {position.at("epoch").get<int>(), position.at("batch").get<std::int64_t>(),
                     position.at("step").get<std::int64_t>()};
    info.steps_per_epoch = state.at("steps_per_epoch").get<std::int64_t>();
    info.epochs = state.at("epochs").get<int>();
    info.logs = detail::logs_from_json(state.at("logs"));
    info.config = state.at("config").get<RunConfig>();
    // Checkpoints written before the history was recorded have none.
    if (state.contains("history")) info.history = history_from_json(state.at("history"));
    return info;
  } catch (const json::exception& error) {
    throw IoError(what + ": a member is missing or mistyped (" + error.what() +
                  "); the file was not written by this version of Tandem");
  }
}

struct LoadedCheckpoint {
  CheckpointInfo info;
  json state;
  Safetensors weights;
  Safetensors optimizer;
};

json read_state(const std::string& folder) {
  const std::string what = (fs::path(folder) / kStateFile).string();
  return detail::open_sealed_json(read_whole_file(what, {.max_bytes = detail::kMaxJsonFileBytes}),
                                  what);
}

LoadedCheckpoint load_checkpoint(const std::string& folder) {
  LoadedCheckpoint loaded;
  loaded.state = read_state(folder);
  loaded.info = info_from_state(folder, loaded.state);
  const std::string state_path = (fs::path(folder) / kStateFile).string();
  const json files = loaded.state.value("files", json::object());
  for (const char* name : {kWeightsFile, kOptimizerFile}) {
    const std::string path = (fs::path(folder) / name).string();
    if (!files.contains(name)) {
      throw IoError(state_path + " lists no " + name + "; the checkpoint is damaged");
    }
    const detail::Bytes bytes = read_whole_file(path, {.max_bytes = detail::kMaxWeightsFileBytes});
    try {
      detail::check_file_record(bytes, files.at(name), path);
    } catch (const json::exception& error) {
      throw IoError(state_path + ": the record of " + name + " is malformed (" + error.what() +
                    ")");
    }
    (name == std::string(kWeightsFile) ? loaded.weights : loaded.optimizer) =
        decode_safetensors(bytes, path);
  }
  return loaded;
}

// The checkpoint at `path`: a folder holding a state.json, or the newest intact checkpoint in a
// folder of them, every file read and checked. A damaged newest checkpoint is an error that
// names the newest intact older one, so nothing silently goes back in time.
LoadedCheckpoint load_resolved(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error)) {
    throw IoError("no checkpoint at " + path + ": the path does not exist");
  }
  if (!fs::is_directory(path, error)) {
    throw IoError(path +
                  " is a file; give a checkpoint folder (ckpt-<step>) or the folder "
                  "holding them");
  }
  if (fs::exists(fs::path(path) / kStateFile, error)) return load_checkpoint(path);
  std::vector<std::pair<std::int64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(path, error)) {
    if (const auto step = step_of(entry.path().filename().string()); step && entry.is_directory()) {
      found.emplace_back(*step, entry.path().string());
    }
  }
  if (found.empty()) {
    throw IoError("no checkpoint in " + path + " (no ckpt-<step> folder with a " + kStateFile +
                  "); check the path");
  }
  std::sort(found.rbegin(), found.rend());
  std::string newest_error;
  for (const auto& [step, folder] : found) {
    try {
      LoadedCheckpoint loaded = load_checkpoint(folder);
      if (newest_error.empty()) return loaded;
      throw IoError(newest_error + "; the older checkpoint " + folder +
                    " is intact: resume from it, or move the damaged one away");
    } catch (const IoError& damaged) {
      if (!newest_error.empty()) throw;
      newest_error = damaged.what();
    }
  }
  throw IoError(newest_error + "; no intact checkpoint in " + path);
}

Generator restored_generator(const json& stored) {
  Generator generator;
  generator.set_state(stored.at("seed").get<std::uint64_t>(),
                      stored.at("offset").get<std::uint64_t>());
  return generator;
}

bool maximizes(const std::string& monitor, const std::string& mode) {
  if (mode == "max") return true;
  if (mode == "min") return false;
  return monitor.find("acc") != std::string::npos;
}

}  // namespace

// ---- reading ----

std::vector<CheckpointInfo> list_checkpoints(const std::string& directory) {
  std::vector<CheckpointInfo> found;
  std::error_code error;
  if (!fs::is_directory(directory, error)) return found;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    if (!step_of(entry.path().filename().string()) || !entry.is_directory()) continue;
    try {
      found.push_back(read_checkpoint_info(entry.path().string()));
    } catch (const IoError&) {
      // A damaged checkpoint is not complete; verify_checkpoint and restore name it.
    }
  }
  std::sort(found.begin(), found.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return a.position.step < b.position.step;
  });
  return found;
}

std::optional<CheckpointInfo> latest_checkpoint(const std::string& directory) {
  std::vector<CheckpointInfo> all = list_checkpoints(directory);
  if (all.empty()) return std::nullopt;
  return all.back();
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  std::error_code error;
  if (fs::exists(fs::path(path) / kStateFile, error))
    return info_from_state(path, read_state(path));
  return load_resolved(path).info;
}

CheckpointInfo verify_checkpoint(const std::string& path) {
  return load_resolved(path).info;
}

CheckpointInfo restore_checkpoint(const std::string& path, nn::Model& model) {
  LoadedCheckpoint loaded = load_resolved(path);
  const std::string folder = loaded.info.path;
  const json& state = loaded.state;
  if (!model.built()) {
    throw InvalidArgument("restore_checkpoint: build the model before restoring " + folder +
                          " into it");
  }
  if (!model.compiled()) {
    throw InvalidArgument(
        "restore_checkpoint: compile the model (with the optimizer the run "
        "used) before restoring " +
        folder + " into it");
  }
  try {
    // Check everything first; change nothing until every part fits.
    const NamedTensors weights = named_weights(model);
    std::vector<std::string> problems;
    detail::match_weights(weights, loaded.weights, kWeightsFile, problems);

    train::Optimizer& optimizer = model.optimizer();
    const json& stored_optimizer = state.at("optimizer");
    const std::vector<Tensor> variables = model.trainable_weights();
    train::OptimizerState optimizer_state;
    if (stored_optimizer.is_null()) {
      problems.push_back(
          "the checkpoint has no optimizer state (it was written from a model "
          "that was not compiled)");
    } else if (stored_optimizer.at("class_name").get<std::string>() != optimizer.name()) {
      problems.push_back("the checkpoint's optimizer is " +
                         stored_optimizer.at("class_name").get<std::string>() +
                         " but the model is compiled with " + optimizer.name());
    } else {
      const auto slot_names = stored_optimizer.at("slot_names").get<std::vector<std::string>>();
      if (slot_names != optimizer.slot_names()) {
        problems.push_back("the checkpoint's " + optimizer.name() + " keeps " +
                           std::to_string(slot_names.size()) + " slots per variable, the model's " +
                           std::to_string(optimizer.slot_names().size()) + " (momentum or not?)");
      }
      optimizer_state.iterations = stored_optimizer.at("iterations").get<std::int64_t>();
      optimizer_state.accumulated_calls =
          stored_optimizer.at("accumulated_calls").get<std::int64_t>();
      std::set<std::string> used;
      for (const Tensor& variable : variables) {
        std::vector<Tensor> slots;
        for (const std::string& slot : slot_names) {
          const std::string key = variable.name() + "/" + slot;
          if (const Tensor* value = loaded.optimizer.find(key)) {
            slots.push_back(*value);
            used.insert(key);
          }
        }
        if (!slots.empty() && slots.size() != slot_names.size()) {
          problems.push_back(std::string(kOptimizerFile) + " has only some of the slots of '" +
                             variable.name() + "'");
        }
        const std::string accumulated_key = variable.name() + "/" + kAccumulatedSlot;
        const Tensor* accumulated = loaded.optimizer.find(accumulated_key);
        if (accumulated != nullptr) used.insert(accumulated_key);
        optimizer_state.slots.push_back(std::move(slots));
        optimizer_state.accumulated.push_back(accumulated ? *accumulated : Tensor());
      }
      for (const auto& [name, tensor] : loaded.optimizer.tensors) {
        if (!used.contains(name)) {
          problems.push_back(std::string(kOptimizerFile) + " holds '" + name +
                             "', which belongs to no trainable weight of the model");
        }
      }
      if (const json& scale = state.at("loss_scale"); !scale.is_null()) {
        optimizer_state.loss_scale = train::LossScaleState{
            scale.at("scale").get<double>(), scale.at("good_steps").get<std::int64_t>()};
      }
    }

    const json& layer_rngs = state.at("rng").at("layers");
    std::vector<std::pair<Generator*, Generator>> generators;
    for (const nn::Layer& layer : model.layers()) {
      Generator* generator = layer.impl().generator();
      if (generator == nullptr) continue;
      if (!layer_rngs.contains(layer.name())) {
        problems.push_back("layer '" + layer.name() +
                           "' draws random numbers but the checkpoint has no state for it");
        continue;
      }
      generators.emplace_back(generator, restored_generator(layer_rngs.at(layer.name())));
    }
    if (!problems.empty()) {
      detail::throw_mismatches("checkpoint " + folder, problems,
                               "Build and compile the model as the run that wrote it did");
    }

    std::vector<std::pair<std::shared_ptr<train::Metric>, std::vector<double>>> metric_values;
    const json& stored_metrics = state.at("metrics");
    for (const auto& metric : model.metrics()) {
      if (stored_metrics.contains(metric->name())) {
        metric_values.emplace_back(metric,
                                   detail::numbers_from_json(stored_metrics.at(metric->name())));
      }
    }

    // The optimizer checks its state against the variables before it changes anything.
    try {
      optimizer.load_state(variables, optimizer_state);
    } catch (const InvalidArgument& mismatch) {
      throw InvalidArgument("checkpoint " + folder + " does not fit the model: " + mismatch.what());
    }
    for (const auto& [name, weight] : weights)
      tandem::detail::copy_into(weight, *loaded.weights.find(name), "restore_checkpoint: " + name);
    default_generator() = restored_generator(state.at("rng").at("default"));
    for (auto& [live, saved] : generators)
      *live = saved;
    train::Mean& loss = model.loss_tracker();
    loss.reset_state();
    if (stored_metrics.contains(loss.name())) {
      loss.set_variables(detail::numbers_from_json(stored_metrics.at(loss.name())));
    }
    for (const auto& metric : model.metrics())
      metric->reset_state();
    for (const auto& [metric, values] : metric_values)
      metric->set_variables(values);
  } catch (const json::exception& error) {
    throw IoError((fs::path(folder) / kStateFile).string() + ": a member is missing or mistyped (" +
                  error.what() + "); the file was not written by this version of Tandem");
  }
  return loaded.info;
}

// ---- writing ----

struct CheckpointManager::Impl {
  std::string directory;
  CheckpointOptions options;
  std::unique_ptr<detail::DirectoryLock> lock;

  mutable std::mutex mutex;
  std::condition_variable changed;
  std::deque<Snapshot> queue;  // at most one waits while another is written
  bool writing = false;
  bool stopping = false;
  std::exception_ptr failure;
  std::vector<CheckpointInfo> complete;  // oldest first
  double seconds_blocking = 0.0;
  double seconds_writing = 0.0;
  std::thread writer;

  void run() {
    std::unique_lock guard(mutex);
    while (true) {
      changed.wait(guard, [this] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, nothing left
      Snapshot snapshot = std::move(queue.front());
      queue.pop_front();
      writing = true;
      guard.unlock();
      std::exception_ptr error;
      try {
        write(snapshot);
      } catch (...) {
        error = std::current_exception();
      }
      guard.lock();
      writing = false;
      if (error && !failure) failure = error;
      changed.notify_all();
    }
  }

  void write(Snapshot& snapshot) {
    const double start = seconds_now();
    snapshot.info.path = write_snapshot(directory, snapshot);
    std::vector<CheckpointInfo> doomed;
    {
      std::lock_guard guard(mutex);
      std::erase_if(complete, [&](const CheckpointInfo& info) {
        return info.position.step == snapshot.info.position.step;
      });
      complete.push_back(snapshot.info);
      std::sort(complete.begin(), complete.end(),
                [](const auto& a, const auto& b) { return a.position.step < b.position.step; });
      doomed = prune_locked();
    }
    for (const CheckpointInfo& old : doomed) {
      try {
        detail::remove_directory(old.path);
      } catch (const IoError& error) {
        std::cerr << "tandem: warning: could not delete the old checkpoint " << old.path << ": "
                  << error.what() << "\n";
      }
    }
    std::lock_guard guard(mutex);
    seconds_writing += seconds_now() - start;
  }

  std::optional<CheckpointInfo> best_locked() const {
    if (options.monitor.empty()) return std::nullopt;
    const bool maximize = maximizes(options.monitor, options.mode);
    std::optional<CheckpointInfo> best;
    for (const CheckpointInfo& info : complete) {
      const auto value = info.logs.find(options.monitor);
      if (value == info.logs.end() || !std::isfinite(value->second)) continue;
      const double current = best ? best->logs.at(options.monitor) : 0.0;
      if (!best || (maximize ? value->second > current : value->second < current)) best = info;
    }
    return best;
  }

  // Drops all but the newest keep_last and the best from `complete`; returns the dropped ones.
  std::vector<CheckpointInfo> prune_locked() {
    if (options.keep_last <= 0) return {};
    const std::optional<CheckpointInfo> best = best_locked();
    std::vector<CheckpointInfo> kept;
    std::vector<CheckpointInfo> doomed;
    const std::size_t keep = static_cast<std::size_t>(options.keep_last);
    for (std::size_t i = 0; i < complete.size(); ++i) {
      const bool recent = i + keep >= complete.size();
      const bool is_best = best && best->position.step == complete[i].position.step;
      (recent || is_best ? kept : doomed).push_back(complete[i]);
    }
    complete = std::move(kept);
    return doomed;
  }
};

CheckpointManager::CheckpointManager(std::string directory, CheckpointOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (options.keep_last < 0) {
    throw InvalidArgument(
        "CheckpointManager: keep_last must be >= 0 (0 keeps every "
        "checkpoint), got " +
        std::to_string(options.keep_last));
  }
  if (options.mode != "auto" && options.mode != "min" && options.mode != "max") {
    throw InvalidArgument("CheckpointManager: mode must be auto, min or max, got '" + options.mode +
                          "'");
  }
  if (directory.empty()) throw InvalidArgument("CheckpointManager: the directory is empty");
  std::error_code error;
  fs::create_directories(directory, error);
  if (error || !fs::is_directory(directory)) {
    throw IoError("cannot create the checkpoint folder " + directory + ": " +
                  (error ? error.message() : "a file of that name exists"));
  }
  impl_->directory = std::move(directory);
  impl_->options = std::move(options);
  impl_->lock = std::make_unique<detail::DirectoryLock>(impl_->directory);
  // With the lock held nobody else writes here: hidden folders are leftovers of a write or a
  // removal that a crash interrupted.
  for (const auto& entry : fs::directory_iterator(impl_->directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".tmp-") || name.starts_with(".trash-")) {
      fs::remove_all(entry.path(), error);
    }
  }
  impl_->complete = list_checkpoints(impl_->directory);
  if (impl_->options.async) impl_->writer = std::thread([impl = impl_.get()] { impl->run(); });
}

CheckpointManager::~CheckpointManager() {
  if (impl_->writer.joinable()) {
    {
      std::lock_guard guard(impl_->mutex);
      impl_->stopping = true;
    }
    impl_->changed.notify_all();
    impl_->writer.join();
  }
  if (impl_->failure) {
    try {
      std::rethrow_exception(impl_->failure);
    } catch (const std::exception& error) {
      std::cerr << "tandem: warning: " << error.what() << "\n";
    }
  }
}

void CheckpointManager::save(nn::Model& model, const TrainingPosition& position,
                             const train::Logs& logs, std::int64_t steps_per_epoch, int epochs,
                             const EpochHistory& history) {
  const double start = seconds_now();
  Snapshot snapshot =
      take_snapshot(model, position, logs, steps_per_epoch, epochs, impl_->options.config, history);
  if (!impl_->options.async) {
    impl_->seconds_blocking += seconds_now() - start;
    impl_->write(snapshot);
    return;
  }
  std::unique_lock guard(impl_->mutex);
  if (impl_->failure) std::rethrow_exception(std::exchange(impl_->failure, nullptr));
  // One snapshot waits at most: a disk slower than training throttles it instead of piling up
  // copies of the model in memory.
  impl_->changed.wait(guard, [this] { return impl_->queue.empty() || impl_->failure; });
  if (impl_->failure) std::rethrow_exception(std::exchange(impl_->failure, nullptr));
  impl_->queue.push_back(std::move(snapshot));
  impl_->seconds_blocking += seconds_now() - start;
  impl_->changed.notify_all();
}

void CheckpointManager::wait() {
  std::unique_lock guard(impl_->mutex);
  impl_->changed.wait(guard, [this] { return impl_->queue.empty() && !impl_->writing; });
  if (impl_->failure) std::rethrow_exception(std::exchange(impl_->failure, nullptr));
}

const std::string& CheckpointManager::directory() const {
  return impl_->directory;
}

std::vector<CheckpointInfo> CheckpointManager::checkpoints() const {
  std::lock_guard guard(impl_->mutex);
  return impl_->complete;
}

std::optional<CheckpointInfo> CheckpointManager::latest() const {
  std::lock_guard guard(impl_->mutex);
  if (impl_->complete.empty()) return std::nullopt;
  return impl_->complete.back();
}

std::optional<CheckpointInfo> CheckpointManager::best() const {
  std::lock_guard guard(impl_->mutex);
  return impl_->best_locked();
}

double CheckpointManager::seconds_blocking() const {
  std::lock_guard guard(impl_->mutex);
  return impl_->seconds_blocking;
}

double CheckpointManager::seconds_writing() const {
  std::lock_guard guard(impl_->mutex);
  return impl_->seconds_writing;
}

// ---- ModelCheckpoint ----

ModelCheckpoint::ModelCheckpoint(std::string directory, ModelCheckpointOptions options)
    : directory_(std::move(directory)), options_(std::move(options)) {
  if (options_.every_steps < 0) {
    throw InvalidArgument("ModelCheckpoint: every_steps must be >= 0, got " +
                          std::to_string(options_.every_steps));
  }
  if (directory_.empty()) throw InvalidArgument("ModelCheckpoint: the directory is empty");
}

ModelCheckpoint::~ModelCheckpoint() = default;

void ModelCheckpoint::on_train_begin(const train::Logs&) {
  manager_.reset();  // a fit that threw left its manager (and the folder's lock) behind
  manager_ = std::make_unique<CheckpointManager>(directory_, options_.checkpoint);
  saved_.clear();
  last_position_.reset();
  history_ = options_.history;
}

void ModelCheckpoint::on_epoch_begin(int epoch, const train::Logs&) {
  epoch_ = epoch;
  batches_done_.reset();
}

bool ModelCheckpoint::reads_logs_at_batch_end(std::int64_t batch) const {
  const std::int64_t steps = params().steps;
  const bool epoch_end_follows = options_.every_epoch && batch + 1 == steps;
  return options_.every_steps > 0 && (epoch_ * steps + batch + 1) % options_.every_steps == 0 &&
         !epoch_end_follows;
}

void ModelCheckpoint::on_train_batch_end(std::int64_t batch, const train::Logs& logs) {
  const std::int64_t steps = params().steps;
  const TrainingPosition position{epoch_, batch + 1, epoch_ * steps + batch + 1};
  last_position_ = position;
  batches_done_ = batch + 1;
  last_logs_ = logs;
  // The epoch-end checkpoint follows at once and carries the validation logs.
  const bool epoch_end_follows = options_.every_epoch && batch + 1 == steps;
  if (options_.every_steps > 0 && position.step % options_.every_steps == 0 && !epoch_end_follows) {
    save(position, logs);
  }
}

void ModelCheckpoint::on_epoch_end(int epoch, const train::Logs& logs) {
  const std::int64_t steps = params().steps;
  // An epoch that stop_training cut short is not complete: resuming finishes it. (No batch ended
  // at all: a resumed run whose checkpoint had every batch of this epoch done.)
  const std::int64_t done = batches_done_.value_or(steps);
  const TrainingPosition position = done == steps
                                        ? TrainingPosition{epoch + 1, 0, (epoch + 1) * steps}
                                        : TrainingPosition{epoch, done, epoch * steps + done};
  last_position_ = position;
  last_logs_ = logs;
  if (done == steps) {
    for (const auto& [key, value] : logs)
      history_[key].push_back(value);
  }
  if (options_.every_epoch) save(position, logs);
}

void ModelCheckpoint::on_train_end(const train::Logs&) {
  if (!manager_) return;
  // Where training stopped (the end, or early), unless a checkpoint is there already.
  if (last_position_ && (saved_.empty() || saved_.back() != *last_position_)) {
    save(*last_position_, last_logs_);
  }
  manager_->wait();
  seconds_blocking_ = manager_->seconds_blocking();
  seconds_writing_ = manager_->seconds_writing();
  manager_.reset();  // unlocks the folder for whoever resumes from it
}

void ModelCheckpoint::save(const TrainingPosition& position, const train::Logs& logs) {
  TANDEM_ASSERT(manager_ && model() != nullptr, "ModelCheckpoint used outside fit");
  manager_->save(*model(), position, logs, params().steps, params().epochs, history_);
  saved_.push_back(position);
}

}  // namespace tandem::io
