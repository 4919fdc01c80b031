#include "observe/nvml.h"

#include <dlfcn.h>

#include <cmath>
#include <limits>

namespace tandem::observe {
namespace {

// The few NVML declarations used, from NVML's stable C ABI (nvml.h): return codes are ints,
// 0 meaning success; device handles are opaque pointers.
using Return = int;
using DeviceHandle = void*;
constexpr Return kSuccess = 0;
constexpr int kTemperatureGpu = 0;       // NVML_TEMPERATURE_GPU
constexpr unsigned kNameLength = 96;     // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kVersionLength = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

struct Utilization {
  unsigned int gpu;     // percent of the sample period a kernel ran
  unsigned int memory;  // percent of the period device memory was read or written
};

struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

struct Nvml::Api {
  void* library = nullptr;
  bool initialised = false;
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*driver_version)(char*, unsigned) = nullptr;
  Return (*device_count)(unsigned*) = nullptr;
  Return (*device_handle)(unsigned, DeviceHandle*) = nullptr;
  Return (*device_name)(DeviceHandle, char*, unsigned) = nullptr;
  Return (*utilization)(DeviceHandle, Utilization*) = nullptr;
  Return (*memory)(DeviceHandle, Memory*) = nullptr;
  Return (*power)(DeviceHandle, unsigned*) = nullptr;
  Return (*temperature)(DeviceHandle, int, unsigned*) = nullptr;

  // Resolves `name` into `function`; false when the library lacks it.
  template <typename Function>
  bool bind(Function& function, const char* name) {
    function = reinterpret_cast<Function>(dlsym(library, name));
    return function != nullptr;
  }

  std::string error(Return code) const {
    return error_string != nullptr ? error_string(code) : "NVML error " + std::to_string(code);
  }
};

Nvml::Nvml(const std::string& library) : api_(std::make_unique<Api>()) {
  Api& api = *api_;
  api.library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api.library == nullptr) {
    status_ = "no NVIDIA driver: " + library + " not found (" + dlerror() + ")";
    return;
  }
  const bool complete = api.bind(api.init, "nvmlInit_v2") &&
                        api.bind(api.shutdown, "nvmlShutdown") &&
                        api.bind(api.error_string, "nvmlErrorString") &&
                        api.bind(api.driver_version, "nvmlSystemGetDriverVersion") &&
                        api.bind(api.device_count, "nvmlDeviceGetCount_v2") &&
                        api.bind(api.device_handle, "nvmlDeviceGetHandleByIndex_v2") &&
                        api.bind(api.device_name, "nvmlDeviceGetName") &&
                        api.bind(api.utilization, "nvmlDeviceGetUtilizationRates") &&
                        api.bind(api.memory, "nvmlDeviceGetMemoryInfo") &&
                        api.bind(api.power, "nvmlDeviceGetPowerUsage") &&
                        api.bind(api.temperature, "nvmlDeviceGetTemperature");
  if (!complete) {
    status_ = library + " lacks NVML functions Tandem needs (a driver older than NVML v2?)";
    return;
  }
  if (const Return code = api.init(); code != kSuccess) {
    status_ = "NVML could not start: " + api.error(code) + " (is the NVIDIA driver loaded?)";
    return;
  }
  api.initialised = true;
  unsigned count = 0;
  if (const Return code = api.device_count(&count); code != kSuccess) {
    status_ = "NVML could not count the GPUs: " + api.error(code);
    return;
  }
  for (unsigned index = 0; index < count; ++index) {
    DeviceHandle handle = nullptr;
    char name[kNameLength] = {};
    if (api.device_handle(index, &handle) != kSuccess) continue;
    if (api.device_name(handle, name, kNameLength) != kSuccess) name[0] = '\0';
    devices_.push_back(handle);
    names_.emplace_back(name);
  }
  char version[kVersionLength] = {};
  const std::string driver =
      api.driver_version(version, kVersionLength) == kSuccess ? version : "unknown";
  status_ = std::to_string(devices_.size()) + (devices_.size() == 1 ? " GPU" : " GPUs") +
            " through NVML (driver " + driver + ")";
}

Nvml::~Nvml() {
  if (api_->initialised) api_->shutdown();
  if (api_->library != nullptr) dlclose(api_->library);
}

bool Nvml::available() const {
  return api_->initialised && !devices_.empty();
}

const std::string& Nvml::status() const {
  return status_;
}

int Nvml::device_count() const {
  return static_cast<int>(devices_.size());
}

std::vector<GpuSample> Nvml::sample() const {
  std::vector<GpuSample> samples;
  if (!api_->initialised) return samples;
  const Api& api = *api_;
  for (std::size_t index = 0; index < devices_.size(); ++index) {
    DeviceHandle device = devices_[index];
    GpuSample sample;
    sample.index = static_cast<int>(index);
    sample.name = names_[index];
    Utilization utilization{};
    sample.utilization_percent =
        api.utilization(device, &utilization) == kSuccess ? utilization.gpu : kNaN;
    Memory memory{};
    if (api.memory(device, &memory) == kSuccess) {
      sample.memory_used_bytes = static_cast<std::int64_t>(memory.used);
      sample.memory_total_bytes = static_cast<std::int64_t>(memory.total);
    } else {
      sample.memory_used_bytes = -1;
      sample.memory_total_bytes = -1;
    }
    unsigned milliwatts = 0;
    sample.power_watts = api.power(device, &milliwatts) == kSuccess ? milliwatts * 1e-3 : kNaN;
    unsigned celsius = 0;
    sample.temperature_celsius =
        api.temperature(device, kTemperatureGpu, &celsius) == kSuccess ? celsius : kNaN;
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace tandem::observe
