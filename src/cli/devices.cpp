// `tandem devices`: what Tandem can run on here.
#include <iostream>

#include "cli/commands.h"
#include "cli/cpu_info.h"
#include "cli/format.h"
#include "cli/json.h"
#include "tandem/runtime.h"

namespace tandem::cli {

std::string gpu_backend_status() {
  return "this build of Tandem has no GPU backend yet (CUDA comes in a later release)";
}

const CommandSpec& devices_spec() {
  static const CommandSpec spec{
      "devices",
      "List the devices Tandem can use",
      "tandem devices [--json]",
      "Shows the CPU (model, sockets, cores and threads, the instruction sets Tandem's kernels "
      "can\n"
      "use, memory, the oneDNN version and the ISA it dispatches to) and whether a GPU backend\n"
      "is built.",
      {{"--json", "", "print one JSON object (for scripts) instead of text"}},
  };
  return spec;
}

namespace {

void print_text(const CpuInfo& cpu) {
  std::string available;
  std::string missing;
  for (const IsaFeature& feature : cpu.features) {
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
            << plural(num_threads(), "thread") << "\n"
            << "gpu    none: " << gpu_backend_status() << "\n";
}

void print_json(const CpuInfo& cpu) {
  JsonObject isa;
  for (const IsaFeature& feature : cpu.features)
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
  JsonObject report;
  report.add_string("tandem_version", version())
      .add_object("cpu", cpu_json)
      .add_string_array("gpus", {})
      .add_bool("gpu_backend_built", false)
      .add_string("gpu_status", gpu_backend_status());
  std::cout << report.str() << "\n";
}

}  // namespace

int run_devices(const ParsedArgs& args) {
  const CpuInfo cpu = probe_cpu();
  if (args.has("--json")) {
    print_json(cpu);
  } else {
    print_text(cpu);
  }
  return 0;
}

}  // namespace tandem::cli
