// `tandem devices`: what Tandem can run on here, and why not where it cannot.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/json_text.h"
#include "core/text.h"
#include "tandem/distribute.h"
#include "tandem/runtime.h"
#include "tandem/xla.h"

namespace tandem::cli {

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

// "PJRT C API 0.115, StableHLO 1.20.0": what a plugin says of itself.
std::string plugin_versions(const xla::PluginInfo& plugin) {
  std::string text =
      "PJRT C API " + std::to_string(plugin.api_major) + "." + std::to_string(plugin.api_minor);
  for (const auto& [name, value] : plugin.attributes) {
    if (name == "stablehlo_current_version") text += ", StableHLO " + value;
  }
  return text;
}

std::string backend_line(const distribute::CudaInfo& cuda) {
  if (cuda.backend_available) return "the CUDA backend is built and up";
  return cuda.backend_reason;
}

void print_text(const distribute::CpuInfo& cpu, const distribute::DeviceInventory& inventory,
                const xla::PlatformStatus& xla_cpu, const distribute::StrategyChoice& choice) {
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

  if (xla_cpu.usable) {
    std::string names;
    for (const xla::DeviceInfo& device : xla_cpu.devices)
      names += " " + device.description;
    std::cout << "xla-cpu " << plural(static_cast<std::int64_t>(xla_cpu.devices.size()), "device")
              << " of XLA:CPU through PJRT:" << names << "\n"
              << "  plugin     " << xla_cpu.plugin.path << ", " << plugin_versions(xla_cpu.plugin)
              << "\n";
  } else {
    std::cout << "xla-cpu none: " << xla_cpu.reason << "\n";
  }
  // XLA:GPU's plugin is only found here: loading it starts CUDA, which --strategy xla-gpu does.
  const std::vector<std::string> gpu_plugins = distribute::pjrt_plugin_candidates("gpu");
  std::cout << "xla-gpu "
            << (gpu_plugins.empty()
                    ? "none: no PJRT plugin for XLA:GPU where JAX looks (pip install "
                      "jax-cuda13-pjrt, or --pjrt-plugin PATH)"
                    : "plugin " + gpu_plugins.front() + " (for --strategy xla-gpu)")
            << "\n";

  std::cout << "strategy auto: ";
  for (const std::string& line : choice.log) {
    if (line.starts_with("chose ")) std::cout << line.substr(6) << "\n";
  }
  for (const std::string& line : choice.log) {
    if (!line.starts_with("chose ")) std::cout << "  " << line << "\n";
  }
}

nlohmann::ordered_json library_json(const distribute::LibraryInfo& library) {
  return {{"loaded", library.loaded},
          {"path", library.path},
          {"version", library.version},
          {"reason", library.reason}};
}

void print_json(const distribute::CpuInfo& cpu, const distribute::DeviceInventory& inventory,
                const xla::PlatformStatus& xla_cpu, const distribute::StrategyChoice& choice) {
  nlohmann::ordered_json isa = nlohmann::ordered_json::object();
  for (const distribute::IsaFeature& feature : cpu.features)
    isa[feature.name] = feature.available;
  const nlohmann::ordered_json cpu_json{{"device", "cpu:0"},
                                        {"model", cpu.model},
                                        {"vendor", cpu.vendor},
                                        {"sockets", cpu.sockets},
                                        {"cores", cpu.cores},
                                        {"threads", cpu.threads},
                                        {"threads_available", cpu.threads_available},
                                        {"isa", isa},
                                        {"memory_total_bytes", cpu.memory_total_bytes},
                                        {"memory_available_bytes", cpu.memory_available_bytes},
                                        {"backend", cpu_backend_description()},
                                        {"backend_threads", num_threads()}};

  const distribute::CudaInfo& cuda = inventory.cuda;
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const distribute::GpuInfo& gpu : cuda.gpus) {
    gpus.push_back({{"device", "cuda:" + std::to_string(gpu.index)},
                    {"name", gpu.name},
                    {"memory_bytes", gpu.memory_bytes},
                    {"compute_capability", std::to_string(gpu.compute_capability_major) + "." +
                                               std::to_string(gpu.compute_capability_minor)},
                    {"multiprocessors", gpu.multiprocessors},
                    {"pci_bus_id", gpu.pci_bus_id}});
  }
  const nlohmann::ordered_json cuda_json{{"runtime", library_json(cuda.runtime)},
                                         {"runtime_version", cuda.runtime_version},
                                         {"driver", library_json(cuda.driver)},
                                         {"driver_version", cuda.driver_version}};

  const distribute::TpuInfo& tpu = inventory.tpu;
  nlohmann::ordered_json chips = nlohmann::ordered_json::array();
  for (const distribute::TpuChip& chip : tpu.chips)
    chips.push_back({{"pci_address", chip.pci_address}, {"device_id", chip.device_id}});
  const nlohmann::ordered_json tpu_json{
      {"usable", tpu.usable()}, {"plugin", library_json(tpu.plugin)}, {"searched", tpu.searched},
      {"chips", chips},         {"backend_built", tpu.backend_built}, {"reason", tpu.reason}};

  nlohmann::ordered_json xla_devices = nlohmann::ordered_json::array();
  for (const xla::DeviceInfo& device : xla_cpu.devices)
    xla_devices.push_back({{"id", device.id}, {"kind", device.kind}, {"name", device.description}});
  const nlohmann::ordered_json xla_json{
      {"usable", xla_cpu.usable},
      {"reason", xla_cpu.reason},
      {"plugin", xla_cpu.plugin.path},
      {"versions", xla_cpu.usable ? plugin_versions(xla_cpu.plugin) : std::string()},
      {"platform", xla_cpu.platform},
      {"devices", xla_devices}};

  std::vector<std::string> devices;
  for (const Device& device : choice.devices)
    devices.push_back(device.str());
  const nlohmann::ordered_json strategy{
      {"kind", choice.kind}, {"devices", devices}, {"log", choice.log}};

  const nlohmann::ordered_json report{
      {"tandem_version", version()},
      {"cpu", cpu_json},
      {"gpus", gpus},
      {"gpu_backend_built", cuda.backend_built},
      {"gpu_backend_available", cuda.backend_available},
      {"gpu_status", cuda.gpus.empty() ? cuda.reason : backend_line(cuda)},
      {"cuda", cuda_json},
      {"nccl", library_json(inventory.nccl)},
      {"cudnn", library_json(inventory.cudnn)},
      {"tpu", tpu_json},
      {"xla_cpu", xla_json},
      {"xla_gpu", {{"plugins", distribute::pjrt_plugin_candidates("gpu")}}},
      {"strategy_auto", strategy}};
  std::cout << json_text(report) << "\n";
}

struct DevicesOptions {
  bool json = false;
};

const OptionTable<DevicesOptions>& devices_options() {
  static const OptionTable<DevicesOptions> table({
      {"--json", "", "print one JSON object (for scripts) instead of text",
       flag(&DevicesOptions::json)},
  });
  return table;
}

}  // namespace

const CommandSpec& devices_spec() {
  static const CommandSpec spec{
      "devices",
      "List the devices Tandem can use",
      "tandem devices [--json]",
      "Shows the CPU (model, sockets, cores and threads, the instruction sets Tandem's kernels\n"
      "can use, memory, the oneDNN version and the ISA it dispatches to); the NVIDIA GPUs (name,\n"
      "memory, compute capability, driver and runtime versions, through the CUDA runtime and\n"
      "driver loaded at run time) and NCCL; TPUs (a PJRT plugin such as libtpu.so, found on the\n"
      "search path, in site-packages or through TANDEM_PJRT_PLUGIN, and Google's PCI vendor id);\n"
      "XLA:CPU's devices through the PJRT plugin scripts/fetch-pjrt.sh fetches; XLA:GPU's plugin\n"
      "(jax-cuda13-pjrt) where JAX looks; each with the reason when absent;\n"
      "and the strategy `tandem train --strategy auto` would choose.",
      devices_options().specs(),
      /*takes_command=*/false,
      /*operands=*/"",
  };
  return spec;
}

int run_devices(const ParsedArgs& args) {
  const distribute::CpuInfo cpu = distribute::probe_cpu();
  const distribute::DeviceInventory inventory = distribute::discover_devices();
  const distribute::StrategyChoice choice =
      distribute::choose_strategy(inventory, distribute::launched_processes());
  const xla::PlatformStatus xla_cpu = xla::cpu_platform_status();
  if (devices_options().read(args).json) {
    print_json(cpu, inventory, xla_cpu, choice);
  } else {
    print_text(cpu, inventory, xla_cpu, choice);
  }
  return 0;
}

}  // namespace tandem::cli
