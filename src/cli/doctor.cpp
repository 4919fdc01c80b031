// `tandem doctor`: the checklist a person runs on a fresh cloud machine. Each line is OK, WARN
// (works, but slower or with less than the machine could give) or FAIL (something the user asked
// for will not work), and every line that is not OK says how to fix it.
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/json_text.h"
#include "core/text.h"
#include "tandem/data.h"
#include "tandem/distribute.h"
#include "tandem/runtime.h"
#include "tandem/xla.h"

namespace tandem::cli {
namespace {

constexpr const char* kDefaultLogdir = "logs";
constexpr const char* kDefaultCheckpointDir = "checkpoints";
// Below this much free memory or disk, training the main job or checkpointing gets tight.
constexpr std::int64_t kLowMemoryBytes = std::int64_t{2} << 30;
constexpr std::int64_t kLowDiskBytes = std::int64_t{1} << 30;

enum class Status { ok, warn, fail };

const char* status_name(Status status) {
  switch (status) {
    case Status::ok:
      return "OK";
    case Status::warn:
      return "WARN";
    case Status::fail:
      return "FAIL";
  }
  return "";
}

struct Check {
  std::string name;
  Status status;
  std::string detail;
  std::string fix;  // empty for OK
};

// Whether files can be written in `directory`, or (when it does not exist yet) whether it can be
// created there: tried with a real file, since permissions alone miss read-only mounts.
Check writable_directory(const std::string& name, const std::string& directory,
                         const std::string& option) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path existing = fs::absolute(directory, error);
  while (!existing.empty() && !fs::exists(existing, error))
    existing = existing.parent_path();
  if (existing.empty() || !fs::is_directory(existing, error)) {
    return {name, Status::fail,
            directory + " cannot be created: " + existing.string() + " is not a directory",
            "choose another folder with " + option};
  }
  const fs::path probe = existing / (".tandem-doctor-" + std::to_string(getpid()));
  std::ofstream(probe) << "tandem doctor\n";
  const bool written = fs::exists(probe, error);
  fs::remove(probe, error);
  const std::string where = existing == fs::absolute(directory, error)
                                ? directory
                                : directory + " (to be created in " + existing.string() + ")";
  if (!written) {
    return {name, Status::fail, "cannot write in " + where,
            "fix the permissions (chown/chmod) or choose another folder with " + option};
  }
  struct statvfs disk {};
  if (statvfs(existing.c_str(), &disk) == 0) {
    const auto free_bytes =
        static_cast<std::int64_t>(disk.f_bavail) * static_cast<std::int64_t>(disk.f_frsize);
    if (free_bytes < kLowDiskBytes) {
      return {name, Status::warn,
              where + " is writable but has only " + format_bytes(free_bytes) + " free",
              "free some space or choose a larger disk with " + option};
    }
    return {name, Status::ok, where + " is writable, " + format_bytes(free_bytes) + " free", ""};
  }
  return {name, Status::ok, where + " is writable", ""};
}

std::vector<Check> run_checks(const std::string& data_dir, const std::string& logdir,
                              const std::string& checkpoint_dir) {
  std::vector<Check> checks;
  checks.push_back({"tandem", Status::ok, std::string("version ") + version(), ""});

  const distribute::CpuInfo cpu = distribute::probe_cpu();
  const std::string isa = cpu_backend_description();
  const bool vector_isa = isa.find("avx2") != std::string::npos ||
                          isa.find("avx512") != std::string::npos ||
                          isa.find("amx") != std::string::npos;
  const CpuThreads threads = cpu_threads();
  checks.push_back({"cpu kernels", vector_isa ? Status::ok : Status::warn,
                    isa + " on " + cpu.model + ", " + plural(num_threads(), "thread") +
                        (threads.setting > 0
                             ? " (set)"
                             : " (automatic: " + plural(threads.usable_cores, "usable core") + ")"),
                    vector_isa ? ""
                               : "this CPU (or VM) exposes no AVX2: the kernels run far slower; "
                                 "choose an instance type with AVX2 or AVX-512"});
  const double others = measure_other_runnable_threads(std::chrono::milliseconds(1000));
  const std::string load = fixed(others, 1) + " other runnable threads on average over 1 s, on " +
                           plural(threads.usable_cores, "usable core");
  if (others >= kBusyMachineCores) {
    checks.push_back({"machine load", Status::warn, load,
                      std::string("other processes are using the CPU: speeds measured now "
                                  "(tandem bench) are not comparable with a quiet machine's") +
                          (threads.setting > 0 ? ""
                                               : ", and training runs on fewer threads while "
                                                 "they last") +
                          "; wait for them to finish, or give each program its own cores "
                          "(taskset -c)"});
  } else {
    checks.push_back({"machine load", Status::ok, load, ""});
  }
  if (cpu.memory_available_bytes > 0 && cpu.memory_available_bytes < kLowMemoryBytes) {
    checks.push_back({"memory", Status::warn,
                      format_bytes(cpu.memory_available_bytes) + " available of " +
                          format_bytes(cpu.memory_total_bytes),
                      "close other programs or use a smaller --batch-size"});
  } else {
    checks.push_back({"memory", Status::ok,
                      format_bytes(cpu.memory_available_bytes) + " available of " +
                          format_bytes(cpu.memory_total_bytes),
                      ""});
  }

  const distribute::DeviceInventory inventory = distribute::discover_devices();
  const distribute::CudaInfo& cuda = inventory.cuda;
  const bool gpu_here = !cuda.gpus.empty() || cuda.pci_gpus > 0;
  checks.push_back(
      {"cuda backend", cuda.backend_built || !gpu_here ? Status::ok : Status::fail,
       cuda.backend_built ? "built into this Tandem"
       : gpu_here         ? cuda.backend_reason
                          : "not built, and not needed without an NVIDIA GPU",
       cuda.backend_built || !gpu_here
           ? ""
           : "this machine has NVIDIA GPUs: install the CUDA toolkit with cuDNN and rebuild "
             "Tandem (make run finds nvcc)"});
  if (cuda.driver.loaded && cuda.driver.reason.empty()) {
    checks.push_back({"nvidia driver", Status::ok,
                      "supports CUDA " + cuda.driver.version + " (" + cuda.driver.path + ")", ""});
  } else {
    checks.push_back({"nvidia driver", gpu_here ? Status::fail : Status::ok,
                      gpu_here ? cuda.reason : "not installed; no NVIDIA GPU on the PCI bus",
                      gpu_here ? "install the NVIDIA driver for these GPUs; nvidia-smi must list "
                                 "them"
                               : ""});
  }
  checks.push_back({"cuda runtime", cuda.runtime.loaded || !gpu_here ? Status::ok : Status::warn,
                    cuda.runtime.loaded ? cuda.runtime.version + " (" + cuda.runtime.path + ")"
                                        : cuda.runtime.reason,
                    cuda.runtime.loaded || !gpu_here
                        ? ""
                        : "install the CUDA runtime (libcudart) matching the driver"});
  checks.push_back(
      {"cudnn", inventory.cudnn.loaded || !gpu_here ? Status::ok : Status::fail,
       inventory.cudnn.loaded
           ? inventory.cudnn.version + " (" + inventory.cudnn.path + ")"
           : inventory.cudnn.reason + (gpu_here ? "" : "; not needed without a GPU"),
       inventory.cudnn.loaded || !gpu_here
           ? ""
           : "install cuDNN 9 for the CUDA version of the driver (NVIDIA's cudnn packages)"});
  const bool several_gpus = cuda.gpus.size() > 1;
  checks.push_back(
      {"nccl", inventory.nccl.loaded || !several_gpus ? Status::ok : Status::warn,
       inventory.nccl.loaded
           ? inventory.nccl.version + " (" + inventory.nccl.path + ")"
           : inventory.nccl.reason + (several_gpus ? "" : "; needed for several GPUs only"),
       inventory.nccl.loaded || !several_gpus
           ? ""
           : "install NCCL (libnccl2), or set TANDEM_NCCL_LIBRARY, to train on every GPU at once"});
  if (cuda.usable()) {
    std::string names;
    for (const distribute::GpuInfo& gpu : cuda.gpus) {
      names += (names.empty() ? "" : ", ") + std::string("cuda:") + std::to_string(gpu.index) +
               " " + gpu.name;
    }
    checks.push_back({"gpu", Status::ok, "usable: " + names, ""});
  } else {
    checks.push_back({"gpu", gpu_here ? Status::fail : Status::ok,
                      gpu_here ? (cuda.gpus.empty() ? cuda.reason : cuda.backend_reason)
                               : "none on this machine; training runs on the CPU",
                      gpu_here ? "fix the lines above; then tandem devices lists the GPUs" : ""});
  }

  const distribute::TpuInfo& tpu = inventory.tpu;
  if (tpu.plugin.loaded) {
    checks.push_back(
        {"tpu plugin", tpu.chips.empty() || tpu.usable() ? Status::ok : Status::warn,
         tpu.plugin.path + " loads (PJRT C API " + tpu.plugin.version + ")" +
             (tpu.chips.empty() ? "; no TPU on the PCI bus"
                                : "; " + std::to_string(tpu.chips.size()) + " TPU chips"),
         tpu.chips.empty() || tpu.usable()
             ? ""
             : tpu.reason + "; until then these TPUs stay idle and training runs on the next "
                            "device in line"});
  } else {
    checks.push_back({"tpu plugin", tpu.chips.empty() ? Status::ok : Status::fail,
                      tpu.plugin.reason + (tpu.chips.empty() ? "; no TPU on the PCI bus" : ""),
                      tpu.chips.empty() ? ""
                                        : "install the plugin (pip install libtpu) or point "
                                          "TANDEM_PJRT_PLUGIN at libtpu.so"});
  }

  // XLA: the CPU plugin loaded and asked for its devices; XLA:GPU's only found (loading it
  // starts CUDA).
  const xla::PlatformStatus xla_cpu = xla::cpu_platform_status();
  checks.push_back(
      {"xla-cpu", xla_cpu.usable ? Status::ok : Status::warn,
       xla_cpu.usable ? std::to_string(xla_cpu.devices.size()) + " devices of XLA:" +
                            xla_cpu.platform + " through " + xla_cpu.plugin.path + " (PJRT C API " +
                            std::to_string(xla_cpu.plugin.api_major) + "." +
                            std::to_string(xla_cpu.plugin.api_minor) + ")"
                      : xla_cpu.reason,
       xla_cpu.usable ? "" : "--strategy xla-cpu needs it: run scripts/fetch-pjrt.sh and rebuild"});
  const std::vector<std::string> gpu_plugins = distribute::pjrt_plugin_candidates("gpu");
  checks.push_back({"xla-gpu", Status::ok,
                    gpu_plugins.empty() ? "no XLA:GPU plugin (only --strategy xla-gpu needs one: "
                                          "pip install jax-cuda13-pjrt)"
                                        : "plugin " + gpu_plugins.front(),
                    ""});

  checks.push_back({"mpi", Status::ok,
                    distribute::mpi_library_version() + " (for tandem launch and --strategy "
                                                        "multi-worker)",
                    ""});

  try {
    const data::IdxFiles train_files = data::fashion_mnist_files(data_dir, "train");
    data::fashion_mnist_files(data_dir, "t10k");
    checks.push_back({"data: fashion-mnist", Status::ok,
                      "in " + data_dir + " (" +
                          std::filesystem::path(train_files.images).filename().string() + ", ...)",
                      ""});
  } catch (const Error& error) {
    checks.push_back({"data: fashion-mnist", Status::warn, error.what(),
                      "install dataset-fashion-mnist (scripts/install-deps.sh) or pass "
                      "--data-dir DIR with the four IDX files"});
  }
  checks.push_back(writable_directory("log folder", logdir, "--logdir"));
  checks.push_back(writable_directory("checkpoint folder", checkpoint_dir, "--checkpoint-dir"));
  return checks;
}

}  // namespace

namespace {

struct DoctorOptions {
  std::string data_dir = data::kFashionMnistDefaultDir;
  std::string logdir = kDefaultLogdir;
  std::string checkpoint_dir = kDefaultCheckpointDir;
  bool json = false;
};

const OptionTable<DoctorOptions>& doctor_options() {
  using O = DoctorOptions;
  static const OptionTable<O> table({
      {"--data-dir", "DIR",
       "where the Fashion-MNIST files should be (default " + O{}.data_dir + ")",
       into(&O::data_dir, parse_directory)},
      {"--logdir", "DIR", "the folder TensorBoard logs will go to (default " + O{}.logdir + ")",
       into(&O::logdir, parse_directory)},
      {"--checkpoint-dir", "DIR",
       "the folder checkpoints will go to (default " + O{}.checkpoint_dir + ")",
       into(&O::checkpoint_dir, parse_directory)},
      {"--json", "", "print one JSON object (for scripts) instead of text", flag(&O::json)},
  });
  return table;
}

}  // namespace

const CommandSpec& doctor_spec() {
  static const CommandSpec spec{
      "doctor",
      "Check this machine for training: backends, GPU/TPU, libraries, data, folders",
      "tandem doctor [options]",
      "Runs the checklist for a fresh machine: Tandem's version, the backends built in,\n"
      "oneDNN's ISA, the NVIDIA driver, CUDA runtime, cuDNN and NCCL and whether a GPU is\n"
      "usable, whether a TPU plugin loads, MPI, the data set, and write access to the log and\n"
      "checkpoint folders. Each line is OK, WARN or FAIL, with the fix. Exits with status 1 when\n"
      "a check fails.",
      doctor_options().specs(),
      /*takes_command=*/false,
      /*operands=*/"",
  };
  return spec;
}

int run_doctor(const ParsedArgs& args) {
  const DoctorOptions options = doctor_options().read(args);
  const std::vector<Check> checks =
      run_checks(options.data_dir, options.logdir, options.checkpoint_dir);
  int failures = 0;
  int warnings = 0;
  for (const Check& check : checks) {
    failures += check.status == Status::fail;
    warnings += check.status == Status::warn;
  }
  if (options.json) {
    nlohmann::ordered_json items = nlohmann::ordered_json::array();
    for (const Check& check : checks) {
      items.push_back({{"check", check.name},
                       {"status", status_name(check.status)},
                       {"detail", check.detail},
                       {"fix", check.fix}});
    }
    const nlohmann::ordered_json report{{"tandem_version", version()},
                                        {"checks", items},
                                        {"failures", failures},
                                        {"warnings", warnings}};
    std::cout << json_text(report) << "\n";
  } else {
    for (const Check& check : checks) {
      const std::string status = status_name(check.status);
      std::cout << status << std::string(6 - status.size(), ' ') << check.name
                << std::string(check.name.size() < 20 ? 20 - check.name.size() : 1, ' ')
                << check.detail << "\n";
      if (!check.fix.empty()) std::cout << std::string(26, ' ') << "fix: " << check.fix << "\n";
    }
    std::cout << "doctor: " << plural(failures, "failure") << ", " << plural(warnings, "warning")
              << "\n";
  }
  return failures > 0 ? 1 : 0;
}

}  // namespace tandem::cli
