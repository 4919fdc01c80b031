// A stand-in for NVIDIA's libnvidia-ml.so.1 with two fixed GPUs, for testing the monitor's NVML
// loading and unit conversions on machines without a driver. It exports the C functions the
// monitor resolves with dlsym, with NVML's signatures; the second GPU reports no power reading,
// as some boards do.
#include <cstring>

namespace {

struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};

struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
int devices[2];  // handles are pointers to these

int index_of(void* device) {
  return device == &devices[0] ? 0 : device == &devices[1] ? 1 : -1;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  return kSuccess;
}
int nvmlShutdown() {
  return kSuccess;
}
const char* nvmlErrorString(int) {
  return "fake NVML error";
}

int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  std::strncpy(version, "999.1-fake", length);
  return kSuccess;
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = 2;
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index > 1) return kInvalidArgument;
  *device = &devices[index];
  return kSuccess;
}

int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  std::strncpy(name, index_of(device) == 0 ? "Fake GPU Zero" : "Fake GPU One", length);
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* device, Utilization* utilization) {
  utilization->gpu = index_of(device) == 0 ? 87 : 12;
  utilization->memory = 40;
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  memory->total = 80ull << 30;
  memory->used = index_of(device) == 0 ? (3ull << 30) : (1ull << 20);
  memory->free = memory->total - memory->used;
  return kSuccess;
}

int nvmlDeviceGetPowerUsage(void* device, unsigned* milliwatts) {
  if (index_of(device) == 1) return kNotSupported;
  *milliwatts = 312500;
  return kSuccess;
}

int nvmlDeviceGetTemperature(void* device, int sensor, unsigned* celsius) {
  if (sensor != 0) return kInvalidArgument;
  *celsius = index_of(device) == 0 ? 71 : 35;
  return kSuccess;
}

}  // extern "C"
