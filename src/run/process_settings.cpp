#include "run/process_settings.h"

#include <algorithm>

#include "tandem/random.h"
#include "tandem/runtime.h"

namespace tandem::run {

ProcessSettingsScope::ProcessSettingsScope()
    : threads_(thread_setting()),
      deterministic_(deterministic()),
      flush_denormals_(flush_denormals()),
      policy_(mixed_precision::global_policy()),
      seed_(default_generator().seed()),
      offset_(default_generator().offset()),
      layer_names_(nn::layer_name_counters()) {}

ProcessSettingsScope::~ProcessSettingsScope() {
  restore();
}

void ProcessSettingsScope::set_memory_limit(Device device, std::size_t bytes) {
  const bool saved = std::any_of(memory_limits_.begin(), memory_limits_.end(),
                                 [&](const auto& limit) { return limit.first == device; });
  if (!saved) memory_limits_.emplace_back(device, memory_info(device).limit);
  tandem::set_memory_limit(device, bytes);
}

void ProcessSettingsScope::restore() {
  if (restored_) return;
  restored_ = true;
  set_num_threads(threads_);
  set_deterministic(deterministic_);
  set_flush_denormals(flush_denormals_);
  if (policy_) {
    mixed_precision::set_global_policy(*policy_);
  } else {
    mixed_precision::clear_global_policy();
  }
  default_generator().set_state(seed_, offset_);
  for (const auto& [device, limit] : memory_limits_)
    tandem::set_memory_limit(device, limit);
  nn::LayerNameCounters names = nn::layer_name_counters();
  for (const auto& [prefix, used] : layer_names_)
    names[prefix] = std::max(names[prefix], used);
  nn::set_layer_name_counters(names);
}

}  // namespace tandem::run
