// `tandem devices`: what Tandem can run on here, and why not where it cannot.
#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json.h"
#include "tandem/distribute.h"
#include "tandem/runtime.h"

namespace tandem::cli {

const CommandSpec& devices_spec() {
  static const CommandSpec spec{
      "devices",
      "List the devices Tandem can use",
      "tandem devices [--json]",
      "Shows the CPU (model, sockets, cores and threads, the instruction sets Tandem's kernels\n"
      "can use, memory, the oneDNN version and the ISA it dispatches to); the NVIDIA GPUs (name,\n"
      "memory, compute capability, driver and runtime versions, through the CUDA runtime and\n"
      "driver loaded at run time) and NCCL; TPUs (a PJRT plugin such as libtpu.so, found on the\n"
      "search path or through TANDEM_PJRT_PLUGIN, and Google's PCI vendor id); each with the\n"
      "reason when absent; and the strategy `tandem train --strategy auto` would choose.",
      {{"--json", "", "print one JSON object (for scripts) instead of text"}},
      /*takes_command=*/false,
      /*operands=*/"",
  };
  return spec;
}

namespace {

std::string cuda_version_line(const distribute::CudaInfo& cuda) {
  const std::string runtime =
      cuda.runtime.loaded ? "runtime " + cuda.runtime.version + " (" + cuda.runtime.path + ")"
                          : cuda.runtime.reason;
  const std::string driver =
      cuda.driver.loaded && cuda.driver.reason.empty()
          ? "driver supports CUDA " + cuda.driver.version + " (" + cuda.driver.path + ")"
          : cuda.driver.reason;
  return runtime + "; " + driver;
}

std::string library_line(const distribute::LibraryInfo& library) {
  return library.loaded ? library.version + " (" + library.path + ")" : library.reason;
}

std::string backend_line(const distribute::CudaInfo& cuda) {
  if (cuda.backend_available) return "the CUDA backend is built and up";
  return cuda.backend_reason;
}

void print_text(const distribute::CpuInfo& cpu, const distribute::DeviceInventory& inventory,
                const distribute::StrategyChoice& choice) {
  std::string available;
  std::string missing;
  for (const distribute::IsaFeature& feature : cpu.features) {
    std::string& list = feature.available ? available : missing;
    list += (list.empty() ? "" : " ") + feature.name;
  }
  std::cout << "cpu:0  " << cpu.model << (cpu.vendor.empty() ? "" : " (" + cpu.vendor + ")") << "\n"
            << "  topology   " << plural(cpu.sockets, "socket") << ", " << plural(cpu.cores, "core")
            << ", " << plural(cpu.threads, "thread") << " (" << cpu.threads_available
            << " available to this process)\n"
            << "  isa        " << (available.empty() ? "none of those Tandem checks" : available)
            << "\n";
  if (!missing.empty()) std::cout << "  missing    " << missing << "\n";
  std::cout << "  memory     " << format_bytes(cpu.memory_total_bytes) << " total, "
            << format_bytes(cpu.memory_available_bytes) << " available\n"
            << "  kernels    " << cpu_backend_description() << ", "
            << plural(num_threads(), "thread") << "\n";

  const distribute::CudaInfo& cuda = inventory.cuda;
  if (cuda.gpus.empty()) std::cout << "gpu    none: " << cuda.reason << "\n";
  for (const distribute::GpuInfo& gpu : cuda.gpus) {
    std::cout << "cuda:" << gpu.index << " " << gpu.name << ", compute capability "
              << gpu.compute_capability_major << "." << gpu.compute_capability_minor << ", "
              << gpu.multiprocessors << " SMs, " << format_bytes(gpu.memory_bytes)
              << (gpu.pci_bus_id.empty() ? "" : ", PCI " + gpu.pci_bus_id) << "\n";
  }
  std::cout << "  cuda       " << cuda_version_line(cuda) << "\n"
            << "  backend    " << backend_line(cuda) << "\n"
            << "  nccl       " << library_line(inventory.nccl) << "\n";

  const distribute::TpuInfo& tpu = inventory.tpu;
  std::cout << "tpu    " << (tpu.usable() ? "available" : "none: " + tpu.reason) << "\n";
  for (const distribute::TpuChip& chip : tpu.chips) {
    std::cout << "  chip       PCI " << chip.pci_address << ", device " << chip.device_id << "\n";
  }
  if (tpu.plugin.loaded) {
    std::cout << "  plugin     " << tpu.plugin.path << ", PJRT C API " << tpu.plugin.version
              << "\n";
  }

  std::cout << "strategy auto: ";
  for (const std::string& line : choice.log) {
    if (line.starts_with("chose ")) std::cout << line.substr(6) << "\n";
  }
  for (const std::string& line : choice.log) {
    if (!line.starts_with("chose ")) std::cout << "  " << line << "\n";
  }
}

JsonObject library_json(const distribute::LibraryInfo& library) {
  JsonObject json;
  json.add_bool("loaded", library.loaded)
      .add_string("path", library.path)
      .add_string("version", library.version)
      .add_string("reason", library.reason);
  return json;
}

void print_json(const distribute::CpuInfo& cpu, const distribute::DeviceInventory& inventory,
                const distribute::StrategyChoice& choice) {
  JsonObject isa;
  for (const distribute::IsaFeature& feature : cpu.features)
    isa.add_bool(feature.name, feature.available);
  JsonObject cpu_json;
  cpu_json.add_string("device", "cpu:0")
      .add_string("model", cpu.model)
      .add_string("vendor", cpu.vendor)
      .add_integer("sockets", cpu.sockets)
      .add_integer("cores", cpu.cores)
      .add_integer("threads", cpu.threads)
      .add_integer("threads_available", cpu.threads_available)
      .add_object("isa", isa)
      .add_integer("memory_total_bytes", cpu.memory_total_bytes)
      .add_integer("memory_available_bytes", cpu.memory_available_bytes)
      .add_string("backend", cpu_backend_description())
      .add_integer("backend_threads", num_threads());

  const distribute::CudaInfo& cuda = inventory.cuda;
  std::vector<JsonObject> gpus;
  for (const distribute::GpuInfo& gpu : cuda.gpus) {
    JsonObject json;
    json.add_string("device", "cuda:" + std::to_string(gpu.index))
        .add_string("name", gpu.name)
        .add_integer("memory_bytes", gpu.memory_bytes)
        .add_string("compute_capability", std::to_string(gpu.compute_capability_major) + "." +
                                              std::to_string(gpu.compute_capability_minor))
        .add_integer("multiprocessors", gpu.multiprocessors)
        .add_string("pci_bus_id", gpu.pci_bus_id);
    gpus.push_back(std::move(json));
  }
  JsonObject cuda_json;
  cuda_json.add_object("runtime", library_json(cuda.runtime))
      .add_integer("runtime_version", cuda.runtime_version)
      .add_object("driver", library_json(cuda.driver))
      .add_integer("driver_version", cuda.driver_version);

  const distribute::TpuInfo& tpu = inventory.tpu;
  std::vector<JsonObject> chips;
  for (const distribute::TpuChip& chip : tpu.chips) {
    JsonObject json;
    json.add_string("pci_address", chip.pci_address).add_string("device_id", chip.device_id);
    chips.push_back(std::move(json));
  }
  JsonObject tpu_json;
  tpu_json.add_bool("usable", tpu.usable())
      .add_object("plugin", library_json(tpu.plugin))
      .add_string_array("searched", tpu.searched)
      .add_object_array("chips", chips)
      .add_bool("backend_built", tpu.backend_built)
      .add_string("reason", tpu.reason);

  JsonObject strategy;
  strategy.add_string("kind", choice.kind);
  std::vector<std::string> devices;
  for (const Device& device : choice.devices)
    devices.push_back(device.str());
  strategy.add_string_array("devices", devices).add_string_array("log", choice.log);

  JsonObject report;
  report.add_string("tandem_version", version())
      .add_object("cpu", cpu_json)
      .add_object_array("gpus", gpus)
      .add_bool("gpu_backend_built", cuda.backend_built)
      .add_bool("gpu_backend_available", cuda.backend_available)
      .add_string("gpu_status", cuda.gpus.empty() ? cuda.reason : backend_line(cuda))
      .add_object("cuda", cuda_json)
      .add_object("nccl", library_json(inventory.nccl))
      .add_object("cudnn", library_json(inventory.cudnn))
      .add_object("tpu", tpu_json)
      .add_object("strategy_auto", strategy);
  std::cout << report.str() << "\n";
}

}  // namespace

int run_devices(const ParsedArgs& args) {
  const distribute::CpuInfo cpu = distribute::probe_cpu();
  const distribute::DeviceInventory inventory = distribute::discover_devices();
  const distribute::StrategyChoice choice =
      distribute::choose_strategy(inventory, distribute::launched_processes());
  if (args.has("--json")) {
    print_json(cpu, inventory, choice);
  } else {
    print_text(cpu, inventory, choice);
  }
  return 0;
}

}  // namespace tandem::cli
