#pragma once
// The process-wide settings a run changes, saved when it starts and put back when it ends, so
// that runs one after another in a process (a notebook, an in-process sweep) do not leak into
// each other nor into the program around them. The layer-name counters too: a run names its
// model's layers afresh (nn::clear_session), and the program's counters come back raised to what
// the run used, so that names stay unique.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tandem/device.h"
#include "tandem/mixed_precision.h"
#include "tandem/nn.h"

namespace tandem::run {

class ProcessSettingsScope {
 public:
  // Saves the settings as they are now.
  ProcessSettingsScope();
  // Puts them back (restore()).
  ~ProcessSettingsScope();
  ProcessSettingsScope(const ProcessSettingsScope&) = delete;
  ProcessSettingsScope& operator=(const ProcessSettingsScope&) = delete;

  // Caps `device`'s memory for the run, saving its cap first.
  void set_memory_limit(Device device, std::size_t bytes);
  // Puts every saved setting back; later calls do nothing.
  void restore();

 private:
  bool restored_ = false;
  int threads_;
  bool deterministic_;
  bool flush_denormals_;
  std::optional<mixed_precision::Policy> policy_;
  std::uint64_t seed_;
  std::uint64_t offset_;
  nn::LayerNameCounters layer_names_;
  std::vector<std::pair<Device, std::size_t>> memory_limits_;  // each device's cap before
};

}  // namespace tandem::run
