// Device discovery: NVIDIA GPUs through the CUDA runtime and driver, NCCL and cuDNN versions,
// TPUs through a PJRT plugin and the PCI bus. Every library is loaded at run time, so discovery
// works in every build and on machines without any of them, and says what is missing.
#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/text.h"
#include "distribute/cuda_loader.h"
#include "distribute/dynamic_library.h"
#include "tandem/cuda.h"
#include "tandem/distribute.h"
#include "tandem/xla.h"

namespace tandem::distribute {
namespace {

using detail::DynamicLibrary;

// PCI vendor ids: Google's TPU chips and NVIDIA's GPUs show up under them.
constexpr const char* kGooglePciVendor = "0x1ae0";
constexpr const char* kNvidiaPciVendor = "0x10de";

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::string first_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "12.4" from 12040, the encoding of cudaRuntimeGetVersion and cudaDriverGetVersion.
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// Files matching a shell pattern, sorted.
std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t matches{};
  std::vector<std::string> files;
  if (glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
    for (std::size_t i = 0; i < matches.gl_pathc; ++i)
      files.emplace_back(matches.gl_pathv[i]);
  }
  globfree(&matches);
  return files;
}

LibraryInfo library_info(const DynamicLibrary& library, const std::string& error) {
  LibraryInfo info;
  info.loaded = library.loaded();
  info.path = library.path();
  info.reason = error;
  return info;
}

struct PciFunction {
  std::string address;  // "0000:17:00.0"
  std::string vendor;   // "0x10de"
  std::string device;   // "0x2335"
  std::string klass;    // "0x030200": display controllers are 0x03xxxx
};

// The PCI functions the kernel lists in `devices_dir` (sysfs), sorted by address.
std::vector<PciFunction> pci_functions(const std::string& devices_dir) {
  std::vector<PciFunction> functions;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(devices_dir, error)) {
    functions.push_back({entry.path().filename().string(), first_line(entry.path() / "vendor"),
                         first_line(entry.path() / "device"), first_line(entry.path() / "class")});
  }
  std::sort(functions.begin(), functions.end(),
            [](const PciFunction& a, const PciFunction& b) { return a.address < b.address; });
  return functions;
}

// ---- CUDA ----

void enumerate_gpus(CudaInfo& info, const detail::CudaRuntime* runtime,
                    const detail::CudaDriver* driver) {
  int count = 0;
  if (runtime != nullptr) {
    if (const int error = runtime->get_device_count(&count); error != 0) {
      info.reason = "the CUDA runtime finds no usable GPU (" + runtime->error_text(error) + ")";
      return;
    }
  } else if (driver != nullptr) {
    if (const int result = driver->device_get_count(&count); result != 0) {
      info.reason = "the NVIDIA driver lists no GPU (" + driver->error_text(result) + ")";
      return;
    }
  }
  if (count == 0) {
    const std::string visible = environment("CUDA_VISIBLE_DEVICES");
    info.reason = "the NVIDIA driver sees no GPU" +
                  (std::getenv("CUDA_VISIBLE_DEVICES") != nullptr
                       ? " (CUDA_VISIBLE_DEVICES='" + visible + "' hides the others)"
                       : std::string());
    return;
  }
  for (int index = 0; index < count; ++index) {
    GpuInfo gpu;
    gpu.index = index;
    const auto attribute = [&](int which) {
      int value = 0;
      if (runtime != nullptr) {
        runtime->device_get_attribute(&value, which, index);
      } else {
        driver->device_get_attribute(&value, which, index);
      }
      return value;
    };
    gpu.compute_capability_major = attribute(detail::kAttributeComputeCapabilityMajor);
    gpu.compute_capability_minor = attribute(detail::kAttributeComputeCapabilityMinor);
    gpu.multiprocessors = attribute(detail::kAttributeMultiprocessorCount);
    char bus_id[32] = {};
    if (runtime != nullptr) {
      runtime->device_get_pci_bus_id(bus_id, sizeof bus_id, index);
    } else {
      driver->device_get_pci_bus_id(bus_id, sizeof bus_id, index);
    }
    gpu.pci_bus_id = bus_id;
    // The runtime gives names and memory only inside its cudaDeviceProp struct, whose layout
    // changes between CUDA versions; the driver has a call for each.
    int device = 0;
    if (driver != nullptr && driver->device_get(&device, index) == 0) {
      char name[256] = {};
      if (driver->device_get_name(name, sizeof name, device) == 0) gpu.name = name;
      std::size_t bytes = 0;
      if (driver->device_total_mem(&bytes, device) == 0) {
        gpu.memory_bytes = static_cast<std::int64_t>(bytes);
      }
    }
    if (gpu.name.empty()) gpu.name = "NVIDIA GPU";
    info.gpus.push_back(std::move(gpu));
  }
}

CudaInfo probe_cuda(const DiscoveryOptions& options) {
  CudaInfo info;
  for (const PciFunction& function : pci_functions(options.pci_devices_dir)) {
    if (function.vendor == kNvidiaPciVendor && function.klass.starts_with("0x03")) ++info.pci_gpus;
  }
  std::string runtime_error;
  const std::unique_ptr<detail::CudaRuntime> runtime =
      detail::load_cuda_runtime(options.cuda_runtime_libraries, runtime_error);
  if (runtime) {
    info.runtime = library_info(runtime->library, "");
    runtime->runtime_get_version(&info.runtime_version);
    runtime->driver_get_version(&info.driver_version);
    info.runtime.version = cuda_version_text(info.runtime_version);
  } else {
    info.runtime.reason = "no CUDA runtime: " + runtime_error;
  }

  std::string driver_error;
  std::unique_ptr<detail::CudaDriver> driver =
      detail::load_cuda_driver({options.cuda_driver_library}, driver_error);
  if (driver) {
    info.driver = library_info(driver->library, "");
    if (const int result = driver->init(0); result != 0) {
      info.driver.reason =
          "the NVIDIA driver does not start (cuInit: " + driver->error_text(result) + ")";
      driver.reset();
    } else if (info.driver_version == 0) {
      driver->driver_get_version(&info.driver_version);
    }
  } else {
    info.driver.reason = "no NVIDIA driver: " + driver_error;
  }
  if (info.driver_version > 0) info.driver.version = cuda_version_text(info.driver_version);

  if (!driver) {
    info.reason =
        (info.pci_gpus > 0
             ? std::to_string(info.pci_gpus) + " NVIDIA GPU(s) on the PCI bus, but " +
                   info.driver.reason + " (install the NVIDIA driver; nvidia-smi should list them)"
             : info.driver.reason + " (and no NVIDIA GPU on the PCI bus)");
  } else {
    enumerate_gpus(info, runtime.get(), driver.get());
  }

  const cuda::Status& backend = cuda::status();
  info.backend_built = backend.built;
  info.backend_available = backend.available;
  info.backend_reason = backend.available ? "" : backend.reason;
  return info;
}

// ---- NCCL and cuDNN: present and which version ----

LibraryInfo probe_nccl(const DiscoveryOptions& options) {
  std::string error;
  const DynamicLibrary library = DynamicLibrary::open_first(options.nccl_libraries, error);
  LibraryInfo info = library_info(library, error.empty() ? "" : "no NCCL: " + error);
  if (!library.loaded()) return info;
  using GetVersion = int (*)(int*);
  const auto get_version = library.function<GetVersion>("ncclGetVersion");
  int code = 0;
  if (get_version == nullptr || get_version(&code) != 0) {
    info.loaded = false;
    info.reason = library.path() + " does not answer ncclGetVersion, so it is not NCCL";
    return info;
  }
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  info.version = std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) + "." +
                 std::to_string(code % 100);
  return info;
}

LibraryInfo probe_cudnn(const DiscoveryOptions& options) {
  std::string error;
  const DynamicLibrary library = DynamicLibrary::open_first(options.cudnn_libraries, error);
  LibraryInfo info = library_info(library, error.empty() ? "" : "no cuDNN: " + error);
  if (!library.loaded()) return info;
  using GetVersion = std::size_t (*)();
  const auto get_version = library.function<GetVersion>("cudnnGetVersion");
  if (get_version == nullptr) {
    info.loaded = false;
    info.reason = library.path() + " has no cudnnGetVersion, so it is not cuDNN";
    return info;
  }
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch, cuDNN 8 major * 1000 + minor * 100.
  const std::size_t code = get_version();
  const std::size_t major_unit = code >= 90000 ? 10000 : 1000;
  info.version = std::to_string(code / major_unit) + "." + std::to_string(code % major_unit / 100) +
                 "." + std::to_string(code % 100);
  return info;
}

// ---- TPU ----

// The first fields of PJRT_Api (xla/pjrt/c/pjrt_c_api.h): every PJRT plugin's GetPjrtApi()
// returns a struct that starts with them, whatever its version.
struct PjrtApiVersion {
  std::size_t struct_size;
  void* extension_start;
  int major_version;
  int minor_version;
};
struct PjrtApiHead {
  std::size_t struct_size;
  void* extension_start;
  PjrtApiVersion pjrt_api_version;
};

// "python3 train.py --epochs 5", the command line of process `pid` (as ps shows it, cut to a
// line), or "" when it cannot be read.
std::string command_line_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::replace(text.begin(), text.end(), '\0', ' ');
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  constexpr std::size_t kWidth = 100;
  if (text.size() > kWidth) text = text.substr(0, kWidth - 3) + "...";
  return text;
}

// The process holding libtpu's lock on `lockfile`, "PID 1234 (python3 train.py)", or "" when
// none does or there is no such file. F_GETLK asks without taking the lock, so discovery never
// stands in the way of the process that is about to open the TPU.
std::string libtpu_lock_holder(const std::string& lockfile) {
  if (lockfile.empty()) return "";
  const int file = ::open(lockfile.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (file < 0) return "";
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  const int result = ::fcntl(file, F_GETLK, &probe);
  ::close(file);
  if (result != 0 || probe.l_type == F_UNLCK) return "";
  // A holder in another PID namespace (another container on the same host) has no PID here.
  if (probe.l_pid <= 0) return "a process outside this container";
  const std::string command = command_line_of(probe.l_pid);
  return "PID " + std::to_string(probe.l_pid) + (command.empty() ? "" : " (" + command + ")");
}

TpuInfo probe_tpu(const DiscoveryOptions& options) {
  TpuInfo info;
  info.searched = options.pjrt_plugins;
  for (const PciFunction& function : pci_functions(options.pci_devices_dir)) {
    if (function.vendor == kGooglePciVendor)
      info.chips.push_back({function.address, function.device});
  }
  std::string error;
  const DynamicLibrary plugin = DynamicLibrary::open_first(options.pjrt_plugins, error);
  if (plugin.loaded()) {
    using GetPjrtApi = const PjrtApiHead* (*)();
    const auto get_api = plugin.function<GetPjrtApi>("GetPjrtApi");
    const PjrtApiHead* api = get_api != nullptr ? get_api() : nullptr;
    info.plugin.path = plugin.path();
    if (api == nullptr) {
      info.plugin.reason = plugin.path() + " is not a PJRT plugin (it has no GetPjrtApi)";
    } else {
      info.plugin.loaded = true;
      info.plugin.version = std::to_string(api->pjrt_api_version.major_version) + "." +
                            std::to_string(api->pjrt_api_version.minor_version);
    }
  } else {
    info.plugin.reason = "no PJRT plugin: " + error;
  }

  const std::string plugin_part = info.plugin.loaded
                                      ? "the PJRT plugin " + info.plugin.path +
                                            " loads (PJRT C API " + info.plugin.version + ")"
                                      : info.plugin.reason;
  const std::string chips_part = info.chips.empty()
                                     ? "no TPU on the PCI bus (no device of Google's vendor id " +
                                           std::string(kGooglePciVendor) + " in " +
                                           options.pci_devices_dir + ")"
                                     : std::to_string(info.chips.size()) + " TPU chip" +
                                           (info.chips.size() == 1 ? "" : "s") + " on the PCI bus";
  info.backend_built = xla::build_info().built;
  if (!info.chips.empty()) info.held_by = libtpu_lock_holder(options.libtpu_lockfile);
  if (!info.held_by.empty()) {
    info.reason = "the TPU is in use by another process: " + info.held_by +
                  " holds libtpu's lock " + options.libtpu_lockfile +
                  "; a TPU serves one process at a time: let that one finish or stop it (kill " +
                  "the PID; a notebook's kernel holds the TPU until it is shut down), then run " +
                  "again";
  } else if (!info.usable()) {
    const std::string fix =
        info.plugin.loaded ? "" : " (pip install libtpu, or point TANDEM_PJRT_PLUGIN at libtpu.so)";
    info.reason = (info.backend_built ? "" : xla::build_info().reason + "; ") + chips_part + "; " +
                  plugin_part + fix;
  }
  return info;
}

// The site-packages folders Python packages are installed in, where JAX finds its plugins: of
// each python3 on PATH (a virtualenv's or conda's first), $VIRTUAL_ENV, ~/.local and the
// system's.
std::vector<std::string> site_packages_folders() {
  std::vector<std::string> prefixes;
  const std::string path = environment("PATH");
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string folder = path.substr(start, end - start);
    std::error_code error;
    if (!folder.empty() && std::filesystem::exists(folder + "/python3", error)) {
      prefixes.push_back(std::filesystem::path(folder).parent_path().string() + "/lib");
    }
    start = end + 1;
  }
  if (const std::string venv = environment("VIRTUAL_ENV"); !venv.empty()) {
    prefixes.push_back(venv + "/lib");
  }
  if (const std::string home = environment("HOME"); !home.empty()) {
    prefixes.push_back(home + "/.local/lib");
  }
  prefixes.emplace_back("/usr/local/lib");
  prefixes.emplace_back("/usr/lib");
  std::vector<std::string> folders;
  for (const std::string& prefix : prefixes) {
    for (const char* packages : {"site-packages", "dist-packages"}) {
      for (std::string& folder : glob_files(prefix + "/python3*/" + packages)) {
        if (std::find(folders.begin(), folders.end(), folder) == folders.end())
          folders.push_back(std::move(folder));
      }
    }
  }
  return folders;
}

// PJRT_NAMES_AND_LIBRARY_PATHS ("cuda:/path/a.so,tpu:/path/b.so"), as JAX reads it: the paths
// given for `name`.
std::vector<std::string> named_plugin_paths(const std::string& name) {
  std::vector<std::string> paths;
  const std::string list = environment("PJRT_NAMES_AND_LIBRARY_PATHS");
  for (std::size_t start = 0; start < list.size();) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    const std::string entry = list.substr(start, end - start);
    const std::size_t colon = entry.find(':');
    if (colon != std::string::npos && entry.substr(0, colon) == name) {
      paths.push_back(entry.substr(colon + 1));
    }
    start = end + 1;
  }
  return paths;
}

int positive_integer(const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && value > 0 ? value : 0;
}

}  // namespace

std::vector<std::string> pjrt_plugin_candidates(const std::string& platform) {
  std::vector<std::string> candidates;
  if (platform == "cpu") {
    candidates = named_plugin_paths("cpu");
    if (std::string fetched = xla::fetched_cpu_plugin(); !fetched.empty()) {
      candidates.push_back(std::move(fetched));
    }
    return candidates;
  }
  if (platform == "gpu") {
    candidates = named_plugin_paths("cuda");
    // pip install jax-cuda13-pjrt (or -cuda12-) puts XLA:GPU under jax_plugins.
    for (const std::string& folder : site_packages_folders()) {
      for (const char* package : {"xla_cuda13", "xla_cuda12"}) {
        const std::string file = folder + "/jax_plugins/" + package + "/xla_cuda_plugin.so";
        if (std::filesystem::exists(file)) candidates.push_back(file);
      }
    }
    return candidates;
  }
  if (platform != "tpu") {
    throw InvalidArgument("no PJRT platform '" + platform +
                          "': the platforms are cpu, gpu and tpu");
  }
  if (const std::string path = environment("TPU_LIBRARY_PATH"); !path.empty()) {
    candidates.push_back(path);
  }
  for (std::string& path : named_plugin_paths("tpu"))
    candidates.push_back(std::move(path));
  candidates.emplace_back("libtpu.so");
  // pip install libtpu puts the plugin in site-packages.
  for (const std::string& folder : site_packages_folders()) {
    const std::string file = folder + "/libtpu/libtpu.so";
    if (std::filesystem::exists(file)) candidates.push_back(file);
  }
  return candidates;
}

TpuInfo discover_tpu(const DiscoveryOptions& options) {
  return probe_tpu(options);
}

DiscoveryOptions DiscoveryOptions::from_environment() {
  DiscoveryOptions options;
  const std::string runtime = environment("TANDEM_CUDA_RUNTIME");
  options.cuda_runtime_libraries =
      runtime.empty() ? std::vector<std::string>{"libcudart.so.13", "libcudart.so.12",
                                                 "libcudart.so.11.0", "libcudart.so"}
                      : std::vector<std::string>{runtime};
  const std::string driver = environment("TANDEM_CUDA_DRIVER");
  options.cuda_driver_library = driver.empty() ? "libcuda.so.1" : driver;
  const std::string nccl = environment("TANDEM_NCCL_LIBRARY");
  options.nccl_libraries = nccl.empty() ? std::vector<std::string>{"libnccl.so.2", "libnccl.so"}
                                        : std::vector<std::string>{nccl};
  options.cudnn_libraries = {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"};
  // An explicit plugin is the only one tried: falling back elsewhere would hide a typo.
  const std::string plugin = environment("TANDEM_PJRT_PLUGIN");
  options.pjrt_plugins =
      plugin.empty() ? pjrt_plugin_candidates("tpu") : std::vector<std::string>{plugin};
  if (const std::string pci = environment("TANDEM_PCI_DEVICES_DIR"); !pci.empty()) {
    options.pci_devices_dir = pci;
  }
  const std::string several_loads = lower(environment("ALLOW_MULTIPLE_LIBTPU_LOAD"));
  for (const char* yes : {"1", "true", "t", "yes", "y"}) {
    if (several_loads == yes) options.libtpu_lockfile.clear();
  }
  return options;
}

DeviceInventory discover_devices(const DiscoveryOptions& options) {
  DeviceInventory inventory;
  inventory.cuda = probe_cuda(options);
  inventory.nccl = probe_nccl(options);
  inventory.cudnn = probe_cudnn(options);
  inventory.tpu = probe_tpu(options);
  return inventory;
}

int launched_processes() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"}) {
    if (const int size = positive_integer(environment(variable)); size > 0) return size;
  }
  return 1;
}

}  // namespace tandem::distribute
