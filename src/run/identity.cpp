// A run's identity in its checkpoints: the settings that define it and those a resumed run
// carries, recorded by key, so that a checkpoint resumes whether a program or the CLI wrote it.
#include <algorithm>

#include "run/checkpoints.h"
#include "run/settings_table.h"
#include "tandem/run.h"

namespace tandem::run {
namespace {

// The record's key for the number of replicas a run trained on (not a setting).
constexpr const char* kReplicasKey = "replicas-in-sync";

// A record as checkpoints before run-file keys wrote it ("--batch-size", and "replicas" for the
// count), in today's keys.
io::RunConfig current_keys(const io::RunConfig& record) {
  const bool dashed = std::any_of(record.begin(), record.end(),
                                  [](const auto& item) { return item.first.starts_with("--"); });
  if (!dashed) return record;
  io::RunConfig current;
  for (const auto& [key, text] : record) {
    if (key.starts_with("--")) {
      current[key.substr(2)] = text;
    } else if (key == "replicas") {
      current[kReplicasKey] = text;
    }
  }
  return current;
}

}  // namespace

io::RunConfig checkpoint_record(const RunConfig& config, int replicas) {
  io::RunConfig record;
  for (const Entry& entry : entries()) {
    if (entry.setting.workers_agree || entry.setting.on_resume != OnResume::none) {
      record.emplace(entry.setting.key, entry.write(config));
    }
  }
  record.emplace(kReplicasKey, std::to_string(replicas));
  return record;
}

RunConfig resumed_config(const std::string& checkpoint, const std::set<std::string>& overridden,
                         const SettingName& name) {
  const io::CheckpointInfo info = io::read_checkpoint_info(checkpoint);
  const io::RunConfig record = current_keys(info.config);
  std::set<std::string> overridden_groups;
  for (const std::string& key : overridden) {
    const Setting* setting = find_setting(key);
    if (setting != nullptr && !setting->group.empty()) overridden_groups.insert(setting->group);
  }
  RunConfig config;
  for (const Entry& entry : entries()) {
    const Setting& setting = entry.setting;
    if (setting.on_resume == OnResume::none) continue;
    const auto recorded = record.find(setting.key);
    if (recorded == record.end()) {
      if (setting.on_resume == OnResume::carry) continue;
      throw ConfigError(name("resume") + " " + checkpoint + ": the checkpoint does not record " +
                        name(setting.key) +
                        "; it was not written by a training run (tandem train or run::Run) but "
                        "by a ModelCheckpoint of a program's own fit: restore it with "
                        "io::restore_checkpoint");
    }
    if (setting.on_resume == OnResume::carry &&
        (overridden.contains(setting.key) || overridden_groups.contains(setting.group))) {
      continue;
    }
    // An empty text is the field's unset state (no pruning's schedule, say), and the default's
    // text is the default: nothing to set (nor to check: the default Fashion-MNIST folder of a
    // run that read other data need not exist here).
    if (!recorded->second.empty() && recorded->second != entry.write(config)) {
      entry.read(config, name(setting.key), recorded->second);
    }
  }
  config.checkpoints.resume = checkpoint;
  return config;
}

void check_resumable(const RunConfig& config, const io::CheckpointInfo& checkpoint,
                     const SettingName& name) {
  const io::RunConfig record = current_keys(checkpoint.config);
  for (const Entry& entry : entries()) {
    if (entry.setting.on_resume != OnResume::keep) continue;
    const auto recorded = record.find(entry.setting.key);
    if (recorded == record.end()) {
      throw ConfigError(name("resume") + " " + checkpoint.path +
                        ": the checkpoint does not record " + name(entry.setting.key) +
                        "; it was not written by a training run (tandem train or run::Run) but "
                        "by a ModelCheckpoint of a program's own fit: restore it with "
                        "io::restore_checkpoint");
    }
    const std::string text = entry.write(config);
    if (text == recorded->second) continue;
    const std::string setting = name(entry.setting.key);
    throw ConfigError(setting + " " + text + " differs from the run being resumed (" + setting +
                      " " + recorded->second + " in " + checkpoint.path +
                      "); a resumed run keeps its settings: leave " + setting +
                      " out, or give it as the run had it");
  }
}

void check_replicas(const io::CheckpointInfo& checkpoint, int replicas, const SettingName& name) {
  const io::RunConfig record = current_keys(checkpoint.config);
  const auto recorded_replicas = record.find(kReplicasKey);
  if (recorded_replicas != record.end() && recorded_replicas->second != std::to_string(replicas)) {
    throw ConfigError(
        name("resume") + " " + checkpoint.path + ": the run trained on " +
        recorded_replicas->second + " replicas, this one has " + std::to_string(replicas) +
        "; resume it with as many replicas as it had, e.g. `tandem launch -n " +
        recorded_replicas->second + " -- tandem train --strategy multi-worker --resume ...`");
  }
}

std::string data_source_difference(const RunConfig& config, const io::CheckpointInfo& checkpoint,
                                   const SettingName& name) {
  const io::RunConfig record = current_keys(checkpoint.config);
  // Where the run read its training data: its spec, or the Fashion-MNIST folder.
  const auto source = [&](const auto& text_of) {
    const std::string data = text_of("data");
    return data.empty() ? std::pair{std::string("data-dir"), text_of("data-dir")}
                        : std::pair{std::string("data"), data};
  };
  const auto [then_key, then_text] = source([&](const std::string& key) {
    const auto found = record.find(key);
    return found == record.end() ? std::string() : found->second;
  });
  const auto [now_key, now_text] =
      source([&](const std::string& key) { return setting_text(config, key); });
  if (then_key == now_key && then_text == now_text) return "";
  return "the run read its training data from " + name(then_key) + " " + then_text +
         ", this one from " + name(now_key) + " " + now_text;
}

bool same_run(const RunConfig& config, const io::CheckpointInfo& checkpoint) {
  const io::RunConfig record = current_keys(checkpoint.config);
  for (const Entry& entry : entries()) {
    if (entry.setting.on_resume != OnResume::keep) continue;
    const auto recorded = record.find(entry.setting.key);
    if (recorded == record.end() || recorded->second != entry.write(config)) return false;
  }
  return true;
}

}  // namespace tandem::run
