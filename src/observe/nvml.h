#pragma once
// NVIDIA's management library (NVML), loaded with dlopen when a monitor starts, so that Tandem
// builds without the CUDA toolkit and runs where there is no driver: then available() is false
// and status() says why.
#include <memory>
#include <string>
#include <vector>

#include "tandem/observe.h"

namespace tandem::observe {

class Nvml {
 public:
  // Loads `library` (normally libnvidia-ml.so.1, which the driver installs) and initialises it.
  explicit Nvml(const std::string& library);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool available() const;
  // "2 GPUs through NVML (driver 550.54.15)", or why there are none.
  const std::string& status() const;
  int device_count() const;
  // One reading per GPU. A figure the GPU does not report (power on some boards) is NaN, or -1
  // for memory.
  std::vector<GpuSample> sample() const;

  struct Api;

 private:
  std::unique_ptr<Api> api_;
  std::string status_;
  std::vector<void*> devices_;
  std::vector<std::string> names_;
};

}  // namespace tandem::observe
