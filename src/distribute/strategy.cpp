// Strategy's common part, its scope, OneDevice, the TPU slot and auto-selection with a logged
// reason for every fallback.
#include <ostream>

#include "distribute/replication.h"
#include "tandem/cuda.h"
#include "tandem/distribute.h"
#include "train/distribution.h"

namespace tandem::distribute {
namespace {

// Why the GPUs of this inventory cannot be trained on (empty when they can).
std::string gpu_unusable_reason(const CudaInfo& cuda) {
  if (cuda.gpus.empty()) return cuda.reason;
  if (!cuda.backend_available) {
    return std::to_string(cuda.gpus.size()) + " GPU" + (cuda.gpus.size() == 1 ? "" : "s") +
           " found (" + cuda.gpus.front().name + "), but " + cuda.backend_reason;
  }
  return "";
}

std::vector<Device> all_gpus(const CudaInfo& cuda) {
  std::vector<Device> devices;
  for (const GpuInfo& gpu : cuda.gpus)
    devices.push_back(Device::cuda(gpu.index));
  return devices;
}

}  // namespace

// ---- StrategyScope ----

struct StrategyScope::Impl {
  explicit Impl(std::shared_ptr<train::detail::Distribution> distribution)
      : scope(std::move(distribution)) {}
  train::detail::DistributionScope scope;
};

StrategyScope::StrategyScope(std::shared_ptr<train::detail::Distribution> distribution)
    : impl_(std::make_unique<Impl>(std::move(distribution))) {}
StrategyScope::~StrategyScope() = default;
StrategyScope::StrategyScope(StrategyScope&&) noexcept = default;

// ---- Strategy ----

Strategy::~Strategy() = default;

void Strategy::initialize(std::shared_ptr<train::detail::Distribution> distribution,
                          std::vector<Device> devices, int num_workers, int worker_index) {
  distribution_ = std::move(distribution);
  devices_ = std::move(devices);
  num_workers_ = num_workers;
  worker_index_ = worker_index;
}

std::int64_t Strategy::global_batch_size(std::int64_t per_replica_batch_size) const {
  if (per_replica_batch_size < 1) {
    throw InvalidArgument(
        "Strategy::global_batch_size: the per-replica batch size must be "
        "positive, got " +
        std::to_string(per_replica_batch_size));
  }
  return per_replica_batch_size * num_replicas_in_sync();
}

double Strategy::scaled_learning_rate(double learning_rate, LearningRateScaling rule) const {
  return rule == LearningRateScaling::linear ? learning_rate * num_replicas_in_sync()
                                             : learning_rate;
}

StrategyScope Strategy::scope() const {
  return StrategyScope(distribution_);
}

// ---- OneDevice ----

OneDevice::OneDevice(Device device)
    : OneDevice(device,
                device.type == DeviceType::cuda ? detail::gpu_inventory() : DeviceInventory{}) {}

OneDevice::OneDevice(Device device, const DeviceInventory& inventory) {
  detail::check_device_exists(device, inventory);
  initialize(std::make_shared<detail::OneDeviceDistribution>(device), {device}, 1, 0);
}

std::string OneDevice::description() const {
  return "OneDevice(" + devices().front().str() + ")";
}

// ---- TPU ----

std::string TPU::unavailable_reason(const DeviceInventory& inventory) {
  return inventory.tpu.usable() ? "" : inventory.tpu.reason;
}

namespace {

// The Xla strategy's options for the inventory's TPU, or DeviceUnavailable saying why not.
XlaOptions tpu_options(const DeviceInventory& inventory, int replicas) {
  if (const std::string why = TPU::unavailable_reason(inventory); !why.empty()) {
    throw DeviceUnavailable("the TPU strategy is not available: " + why);
  }
  return {.platform = "tpu", .replicas = replicas, .plugin = inventory.tpu.plugin.path};
}

}  // namespace

TPU::TPU(int replicas) : TPU(discover_devices(), replicas) {}

TPU::TPU(const DeviceInventory& inventory, int replicas) : Xla(tpu_options(inventory, replicas)) {}

std::string TPU::description() const {
  return "TPU(" + std::to_string(num_replicas_in_sync()) + " replicas, " + device_description() +
         ")";
}

// ---- Selection ----

StrategyChoice choose_strategy(const DeviceInventory& inventory, int processes) {
  StrategyChoice choice;
  std::vector<std::string>& log = choice.log;
  const CudaInfo& cuda = inventory.cuda;
  const std::string gpu_reason = gpu_unusable_reason(cuda);

  if (inventory.tpu.usable()) {
    choice.kind = "tpu";
    log.push_back("chose TPU: " + std::to_string(inventory.tpu.chips.size()) + " chips");
    return choice;
  }
  log.push_back("TPU: not available: " + inventory.tpu.reason);

  if (processes > 1) {
    choice.kind = "multi_worker";
    if (cuda.usable()) {
      choice.devices = {Device::cuda(0)};
      log.push_back("chose MultiWorker: " + std::to_string(processes) +
                    " processes were launched together; each trains on one GPU of its node, "
                    "all-reduced with NCCL");
    } else {
      choice.devices = {Device::cpu()};
      log.push_back("GPU: not available: " + gpu_reason);
      log.push_back("chose MultiWorker: " + std::to_string(processes) +
                    " processes were launched together; each trains on its CPU, all-reduced "
                    "with MPI");
    }
    return choice;
  }

  if (cuda.usable() && cuda.gpus.size() > 1 && inventory.nccl.loaded) {
    choice.kind = "mirrored";
    choice.devices = all_gpus(cuda);
    log.push_back("chose Mirrored over " + std::to_string(cuda.gpus.size()) + " GPUs (" +
                  detail::device_list(choice.devices) + "), all-reduced with NCCL " +
                  inventory.nccl.version);
    return choice;
  }
  if (!cuda.usable()) {
    log.push_back("several GPUs: not available: " + gpu_reason);
  } else if (cuda.gpus.size() > 1) {
    log.push_back("several GPUs: " + std::to_string(cuda.gpus.size()) +
                  " found, but NCCL cannot be loaded to combine their gradients (" +
                  inventory.nccl.reason + ")");
  } else {
    log.push_back("several GPUs: not available: this machine has one GPU");
  }

  if (cuda.usable()) {
    choice.kind = "one_device";
    choice.devices = {Device::cuda(0)};
    log.push_back("chose OneDevice(cuda:0): " + cuda.gpus.front().name);
    return choice;
  }
  log.push_back("one GPU: not available: " + gpu_reason);
  choice.kind = "one_device";
  choice.devices = {Device::cpu()};
  log.push_back("chose OneDevice(cpu)");
  return choice;
}

std::shared_ptr<Strategy> Strategy::auto_select(std::ostream* log,
                                                const MultiWorkerOptions& multi_worker) {
  return auto_select(discover_devices(), log, multi_worker);
}

std::shared_ptr<Strategy> Strategy::auto_select(const DeviceInventory& inventory, std::ostream* log,
                                                const MultiWorkerOptions& multi_worker) {
  const StrategyChoice choice = choose_strategy(inventory, launched_processes());
  std::vector<std::string> lines = choice.log;
  std::shared_ptr<Strategy> strategy;
  // A choice can still fail while starting (NCCL cannot initialise, MPI cannot start); the
  // next one down the chain is taken then, with the reason logged.
  try {
    if (choice.kind == "tpu") {
      strategy = std::make_shared<TPU>(inventory);
    } else if (choice.kind == "mirrored") {
      strategy = std::make_shared<Mirrored>(choice.devices, inventory);
    } else if (choice.kind == "multi_worker") {
      MultiWorkerOptions options = multi_worker;
      options.cpu_only = choice.devices.front().type == DeviceType::cpu;
      strategy = std::make_shared<MultiWorker>(options, inventory);
    } else {
      strategy = std::make_shared<OneDevice>(choice.devices.front(), inventory);
    }
  } catch (const DeviceUnavailable& error) {
    // MultiWorker has no fallback: the other workers are waiting for this one.
    if (choice.kind == "multi_worker") throw;
    lines.push_back(choice.kind + " failed to start: " + error.what());
    if (choice.kind == "tpu") {
      // The rest of the chain, as if there were no TPU: its log after its TPU line.
      DeviceInventory without_tpu = inventory;
      without_tpu.tpu.plugin.loaded = false;
      without_tpu.tpu.reason = std::string("failed to start: ") + error.what();
      strategy = auto_select(without_tpu, nullptr, multi_worker);
      lines.insert(lines.end(), strategy->selection_log_.begin() + 1,
                   strategy->selection_log_.end());
    } else {
      const Device fallback = choice.kind == "mirrored" ? choice.devices.front() : Device::cpu();
      lines.push_back("chose OneDevice(" + fallback.str() + ")");
      strategy = std::make_shared<OneDevice>(fallback, inventory);
    }
  }
  strategy->selection_log_ = lines;
  if (log != nullptr) {
    for (const std::string& line : lines)
      *log << "strategy: " << line << "\n";
  }
  return strategy;
}

}  // namespace tandem::distribute
