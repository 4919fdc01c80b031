#include "distribute/cuda_loader.h"

namespace tandem::distribute::detail {
namespace {

// Resolves `name` into `slot`; records the first missing symbol in `missing`.
template <typename F>
void resolve(const DynamicLibrary& library, const char* name, F& slot, std::string& missing) {
  slot = library.function<F>(name);
  if (slot == nullptr && missing.empty()) missing = name;
}

}  // namespace

std::string CudaRuntime::error_text(Error error) const {
  const char* text = get_error_string != nullptr ? get_error_string(error) : nullptr;
  return "CUDA runtime error " + std::to_string(error) +
         (text != nullptr ? ": " + std::string(text) : "");
}

std::string CudaDriver::error_text(Result result) const {
  const char* text = nullptr;
  if (get_error_string != nullptr) get_error_string(result, &text);
  return "CUDA driver error " + std::to_string(result) +
         (text != nullptr ? ": " + std::string(text) : "");
}

std::unique_ptr<CudaRuntime> load_cuda_runtime(const std::vector<std::string>& candidates,
                                               std::string& error) {
  auto runtime = std::make_unique<CudaRuntime>();
  runtime->library = DynamicLibrary::open_first(candidates, error);
  if (!runtime->library.loaded()) return nullptr;
  std::string missing;
  const DynamicLibrary& library = runtime->library;
  resolve(library, "cudaRuntimeGetVersion", runtime->runtime_get_version, missing);
  resolve(library, "cudaDriverGetVersion", runtime->driver_get_version, missing);
  resolve(library, "cudaGetDeviceCount", runtime->get_device_count, missing);
  resolve(library, "cudaDeviceGetAttribute", runtime->device_get_attribute, missing);
  resolve(library, "cudaDeviceGetPCIBusId", runtime->device_get_pci_bus_id, missing);
  resolve(library, "cudaGetErrorString", runtime->get_error_string, missing);
  if (!missing.empty()) {
    error = runtime->library.path() + " has no " + missing + ", so it is not a CUDA runtime";
    return nullptr;
  }
  return runtime;
}

std::unique_ptr<CudaDriver> load_cuda_driver(const std::vector<std::string>& candidates,
                                             std::string& error) {
  auto driver = std::make_unique<CudaDriver>();
  driver->library = DynamicLibrary::open_first(candidates, error);
  if (!driver->library.loaded()) return nullptr;
  std::string missing;
  const DynamicLibrary& library = driver->library;
  resolve(library, "cuInit", driver->init, missing);
  resolve(library, "cuDriverGetVersion", driver->driver_get_version, missing);
  resolve(library, "cuDeviceGetCount", driver->device_get_count, missing);
  resolve(library, "cuDeviceGet", driver->device_get, missing);
  resolve(library, "cuDeviceGetName", driver->device_get_name, missing);
  resolve(library, "cuDeviceTotalMem_v2", driver->device_total_mem, missing);
  resolve(library, "cuDeviceGetAttribute", driver->device_get_attribute, missing);
  resolve(library, "cuDeviceGetPCIBusId", driver->device_get_pci_bus_id, missing);
  resolve(library, "cuGetErrorString", driver->get_error_string, missing);
  if (!missing.empty()) {
    error = driver->library.path() + " has no " + missing + ", so it is not the NVIDIA driver";
    return nullptr;
  }
  return driver;
}

}  // namespace tandem::distribute::detail
