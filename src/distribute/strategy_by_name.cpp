// Strategies by the names a run gives them (tandem train --strategy NAME, a run file's strategy
// key, RunConfig::strategy), and the lines that say where a run trains and why.
#include <algorithm>

#include "core/text.h"
#include "tandem/cuda.h"
#include "tandem/distribute.h"
#include "tandem/runtime.h"
#include "tandem/xla.h"

namespace tandem::distribute {
namespace {

constexpr const char* kStrategies =
    "auto, cpu, gpu, gpu:N, mirrored, multi-worker, xla-cpu, xla-gpu or tpu";

// The XLA platform a strategy name asks for ("xla-cpu" -> "cpu"), or "" for the others.
std::string xla_platform(const std::string& name) {
  if (name == "xla-cpu") return "cpu";
  if (name == "xla-gpu") return "gpu";
  if (name == "tpu") return "tpu";
  return "";
}

// "gpu" and "gpu:N" name one GPU; nullopt for anything else.
std::optional<Device> single_gpu(const std::string& name) {
  if (name == "gpu") return Device::cuda(0);
  if (!name.starts_with("gpu:")) return std::nullopt;
  const std::string number = name.substr(4);
  if (number.empty() || number.size() > 4 ||
      number.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return Device::cuda(std::stoi(number));
}

std::string device_description(Device device) {
  if (device.type == DeviceType::cpu) {
    return "cpu (" + probe_cpu().model + ", " + plural(num_threads(), "thread") + ", " +
           cpu_backend_description() + ")";
  }
  if (device.type == DeviceType::xla) return xla::device_description(device.index) + ", op by op";
  const cuda::Status& status = cuda::status();
  for (const cuda::DeviceProperties& properties : status.devices) {
    if (properties.index == device.index) {
      return device.str() + " (" + properties.name + ", compute capability " +
             std::to_string(properties.major) + "." + std::to_string(properties.minor) + ", " +
             format_bytes(static_cast<std::int64_t>(properties.total_memory)) + ")";
    }
  }
  return device.str();
}

}  // namespace

void check_strategy_name(const std::string& name, const std::string& text) {
  if (text != "auto" && text != "cpu" && text != "mirrored" && text != "multi-worker" &&
      !single_gpu(text) && xla_platform(text).empty()) {
    throw ConfigError("unknown strategy '" + text + "' for " + name + "; choose " + kStrategies);
  }
}

std::shared_ptr<Strategy> make_strategy(const StrategyOptions& options, const SettingName& name) {
  check_strategy_name(name("strategy"), options.name);
  const std::string platform = xla_platform(options.name);
  if (platform.empty() && (options.replicas != 0 || !options.pjrt_plugin.empty())) {
    throw ConfigError(name(options.replicas != 0 ? "replicas" : "pjrt-plugin") +
                      " is for the XLA strategies (xla-cpu, xla-gpu, tpu), not " +
                      name("strategy") + " " + options.name + "; for several GPUs use " +
                      name("strategy") + " mirrored");
  }
  try {
    if (!platform.empty() && options.op_by_op) {
      if (options.replicas > 1) {
        throw ConfigError(name("jit") + " off runs " + name("strategy") + " " + options.name +
                          " op by op on one device, not " + name("replicas") + " " +
                          std::to_string(options.replicas) + "; leave " + name("jit") +
                          " on (the XLA strategies' default) to train on several");
      }
      return xla_op_by_op({platform, 1, options.pjrt_plugin});
    }
    if (platform == "tpu" && options.pjrt_plugin.empty()) {
      return std::make_shared<TPU>(options.replicas);
    }
    if (!platform.empty()) {
      return std::make_shared<Xla>(
          XlaOptions{platform, platform == "tpu" ? options.replicas : std::max(options.replicas, 1),
                     options.pjrt_plugin});
    }
    if (options.name == "auto") return Strategy::auto_select(nullptr, options.multi_worker);
    if (options.name == "cpu") return std::make_shared<OneDevice>(Device::cpu());
    if (options.name == "mirrored") return std::make_shared<Mirrored>();
    if (options.name == "multi-worker") return std::make_shared<MultiWorker>(options.multi_worker);
    return std::make_shared<OneDevice>(*single_gpu(options.name));
  } catch (const DeviceUnavailable& error) {
    throw DeviceUnavailable(name("strategy") + " " + options.name + ": " + error.what());
  }
}

std::string strategy_summary(const Strategy& strategy, const StrategyOptions& options,
                             std::int64_t per_replica_batch_size, const SettingName& name) {
  const auto* xla_strategy = dynamic_cast<const Xla*>(&strategy);
  std::string text = "device: " +
                     (xla_strategy != nullptr ? xla_strategy->device_description()
                                              : device_description(strategy.devices().front())) +
                     "\n";
  const int replicas = strategy.num_replicas_in_sync();
  text += "strategy: " + strategy.description();
  if (replicas > 1) {
    text += ", global batch " + std::to_string(strategy.global_batch_size(per_replica_batch_size)) +
            " = " + std::to_string(per_replica_batch_size) + " per replica x " +
            std::to_string(replicas) + " replicas";
  }
  text += options.name == "auto" ? ", chosen by " + name("strategy") + " auto\n" : "\n";
  for (const std::string& line : strategy.selection_log()) {
    if (!line.starts_with("chose ")) text += "  " + line + "\n";
  }
  return text;
}

std::optional<std::string> thread_count_warning(int threads, const SettingName& name) {
  const int available = probe_cpu().threads_available;
  if (threads <= 0 || available <= 0 || threads <= available) return std::nullopt;
  return name("threads") + " " + std::to_string(threads) + " is more than the " +
         std::to_string(available) +
         " cores this process may use (its CPU affinity and cgroup CPU quota); the extra threads "
         "wait on each other at every kernel and make each step slower (many times over); pass " +
         name("threads") + " " + std::to_string(available) +
         " or less, or leave it out to use the cores that are free";
}

}  // namespace tandem::distribute
