#include "cli/strategy_options.h"

#include <algorithm>
#include <ostream>

#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "tandem/cuda.h"
#include "tandem/distribute.h"
#include "tandem/runtime.h"
#include "tandem/xla.h"

namespace tandem::cli {
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
    return "cpu (" + distribute::probe_cpu().model + ", " + plural(num_threads(), "thread") + ", " +
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

const OptionTable<StrategyOptions>& strategy_options() {
  using O = StrategyOptions;
  static const OptionTable<O> table({
      {"--strategy", "NAME",
       "where to train: auto (the best of TPU, several GPUs, one GPU, the CPU, with the reason "
       "for each fallback), cpu, gpu or gpu:N (one GPU), mirrored (every local GPU), "
       "multi-worker (one process per device, under mpirun or `tandem launch`), xla-cpu, "
       "xla-gpu (the whole step compiled by XLA through a PJRT plugin), tpu (default auto)",
       [](O& options, const std::string& option, const std::string& text) {
         if (text != "auto" && text != "cpu" && text != "mirrored" && text != "multi-worker" &&
             !single_gpu(text) && xla_platform(text).empty()) {
           throw UsageError("unknown strategy '" + text + "' for " + option + "; choose " +
                            kStrategies);
         }
         options.name = text;
       }},
      {"--replicas", "N",
       "xla-cpu, xla-gpu, tpu: train on N devices of the platform together, one replica each "
       "(default 1; tpu: every core)",
       [](O& options, const std::string& option, const std::string& text) {
         const std::int64_t replicas = parse_positive_integer(option, text);
         if (replicas > 4096) {
           throw UsageError(option + " must be at most 4096, got '" + text + "'");
         }
         options.replicas = static_cast<int>(replicas);
       }},
      {"--pjrt-plugin", "PATH",
       "xla-cpu, xla-gpu, tpu: the PJRT plugin to load (default: the one found for the platform)",
       [](O& options, const std::string&, const std::string& text) { options.pjrt_plugin = text; }},
      {"--lr-scaling", "RULE",
       "none: --lr applies to the global batch as given; linear: multiplied by the number of "
       "replicas (default none)",
       [](O& options, const std::string& option, const std::string& text) {
         options.lr_scaling = parse_choice(option, text, {"none", "linear"}, "rule") == "linear"
                                  ? distribute::LearningRateScaling::linear
                                  : distribute::LearningRateScaling::none;
       }},
      {"--join-timeout", "SECONDS",
       "multi-worker: how long to wait for every worker to start (default 300)",
       [](O& options, const std::string& option, const std::string& text) {
         options.multi_worker.join_timeout_seconds = parse_positive_number(option, text);
       }},
      {"--collective-timeout", "SECONDS",
       "multi-worker: how long one all-reduce may take before the workers stop, naming the "
       "missing ones (default 300)",
       [](O& options, const std::string& option, const std::string& text) {
         options.multi_worker.collective_timeout_seconds = parse_positive_number(option, text);
       }},
      {"--bucket-kib", "N",
       "multi-worker: gradients are all-reduced in buckets of about N KiB, started during the "
       "backward pass (default 64 on CPUs, 25600 on GPUs)",
       [](O& options, const std::string& option, const std::string& text) {
         const std::int64_t kib = parse_positive_integer(option, text);
         if (kib > (std::int64_t{1} << 22)) {
           throw UsageError(option + " must be at most 4194304 (4 GiB), got '" + text + "'");
         }
         options.multi_worker.bucket_bytes = static_cast<std::size_t>(kib) * 1024;
       }},
  });
  return table;
}

std::shared_ptr<distribute::Strategy> make_strategy(const StrategyOptions& options) {
  const std::string platform = xla_platform(options.name);
  if (platform.empty() && (options.replicas != 0 || !options.pjrt_plugin.empty())) {
    throw UsageError(std::string(options.replicas != 0 ? "--replicas" : "--pjrt-plugin") +
                     " is for the XLA strategies (xla-cpu, xla-gpu, tpu), not --strategy " +
                     options.name + "; for several GPUs use --strategy mirrored");
  }
  try {
    if (!platform.empty() && options.op_by_op) {
      if (options.replicas > 1) {
        throw UsageError("--jit off runs --strategy " + options.name +
                         " op by op on one device, not --replicas " +
                         std::to_string(options.replicas) +
                         "; leave --jit on (the XLA strategies' default) to train on several");
      }
      return distribute::xla_op_by_op({platform, 1, options.pjrt_plugin});
    }
    if (platform == "tpu" && options.pjrt_plugin.empty()) {
      return std::make_shared<distribute::TPU>(options.replicas);
    }
    if (!platform.empty()) {
      return std::make_shared<distribute::Xla>(distribute::XlaOptions{
          platform, platform == "tpu" ? options.replicas : std::max(options.replicas, 1),
          options.pjrt_plugin});
    }
    if (options.name == "auto") {
      return distribute::Strategy::auto_select(nullptr, options.multi_worker);
    }
    if (options.name == "cpu") return std::make_shared<distribute::OneDevice>(Device::cpu());
    if (options.name == "mirrored") return std::make_shared<distribute::Mirrored>();
    if (options.name == "multi-worker") {
      return std::make_shared<distribute::MultiWorker>(options.multi_worker);
    }
    return std::make_shared<distribute::OneDevice>(*single_gpu(options.name));
  } catch (const distribute::DeviceUnavailable& error) {
    throw distribute::DeviceUnavailable("--strategy " + options.name + ": " + error.what());
  }
}

void describe_strategy(const distribute::Strategy& strategy, const StrategyOptions& options,
                       std::int64_t per_replica_batch_size, std::ostream& out) {
  const auto* xla_strategy = dynamic_cast<const distribute::Xla*>(&strategy);
  out << "device: "
      << (xla_strategy != nullptr ? xla_strategy->device_description()
                                  : device_description(strategy.devices().front()))
      << "\n";
  const int replicas = strategy.num_replicas_in_sync();
  out << "strategy: " << strategy.description();
  if (replicas > 1) {
    out << ", global batch " << strategy.global_batch_size(per_replica_batch_size) << " = "
        << per_replica_batch_size << " per replica x " << replicas << " replicas";
  }
  out << (options.name == "auto" ? ", chosen by --strategy auto" : "") << "\n";
  for (const std::string& line : strategy.selection_log()) {
    if (!line.starts_with("chose ")) out << "  " << line << "\n";
  }
}

std::string strategy_device(const distribute::Strategy& strategy) {
  return strategy.devices().front().str();
}

namespace {

double step_seconds(const train::History& history) {
  double total = 0;
  for (const std::vector<double>& epoch : history.step_seconds()) {
    for (const double seconds : epoch)
      total += seconds;
  }
  return total;
}

}  // namespace

void print_communication(const distribute::Strategy& strategy, const train::History& history,
                         std::ostream& out) {
  const distribute::CommunicationStats stats = strategy.communication_stats();
  const double total = step_seconds(history);
  if (stats.steps == 0 || total <= 0) return;
  out << "all-reduce: " << fixed(100.0 * stats.wait_seconds / total, 1)
      << "% of the step time waiting for the other workers, "
      << fixed(100.0 * stats.pack_seconds / total, 1) << "% packing ("
      << fixed(static_cast<double>(stats.collectives) / static_cast<double>(stats.steps), 1)
      << " collectives, " << format_memory_size(static_cast<std::size_t>(stats.bytes / stats.steps))
      << " per step; " << stats.overlapped_buckets << " of " << stats.gradient_buckets
      << " gradient buckets started during the backward pass)\n";
}

void add_communication(const distribute::Strategy& strategy, const train::History& history,
                       nlohmann::ordered_json& report) {
  const distribute::CommunicationStats stats = strategy.communication_stats();
  const double total = step_seconds(history);
  if (stats.steps == 0 || total <= 0) return;
  report["allreduce_wait_share"] = stats.wait_seconds / total;
  report["allreduce_pack_share"] = stats.pack_seconds / total;
  report["allreduce_bytes_per_step"] = stats.bytes / stats.steps;
  report["allreduce_gradient_buckets"] = stats.gradient_buckets;
  report["allreduce_overlapped_buckets"] = stats.overlapped_buckets;
}

std::optional<std::string> thread_count_warning(int threads) {
  const int available = distribute::probe_cpu().threads_available;
  if (threads <= 0 || available <= 0 || threads <= available) return std::nullopt;
  return "--threads " + std::to_string(threads) + " is more than the " + std::to_string(available) +
         " hardware threads this process may run on; the extra threads wait on each other at "
         "every kernel and make each step slower (many times over); pass --threads " +
         std::to_string(available) + " or less, or leave it out to use every core";
}

}  // namespace tandem::cli
