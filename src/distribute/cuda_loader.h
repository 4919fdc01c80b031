#pragma once
// The parts of the CUDA runtime and driver APIs that device discovery calls, loaded at run time so
// that discovery works in every build and on machines without a driver. The signatures are those
// of cuda_runtime_api.h and cuda.h (CUdevice is an int); the C ABI of these functions has been
// stable since CUDA 10.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "distribute/dynamic_library.h"

namespace tandem::distribute::detail {

// Device attributes with the same numbers in cudaDeviceAttr and CUdevice_attribute.
inline constexpr int kAttributeMultiprocessorCount = 16;
inline constexpr int kAttributeComputeCapabilityMajor = 75;
inline constexpr int kAttributeComputeCapabilityMinor = 76;

struct CudaRuntime {
  using Error = int;  // cudaError_t
  Error (*runtime_get_version)(int*) = nullptr;
  Error (*driver_get_version)(int*) = nullptr;
  Error (*get_device_count)(int*) = nullptr;
  Error (*device_get_attribute)(int*, int, int) = nullptr;
  Error (*device_get_pci_bus_id)(char*, int, int) = nullptr;
  const char* (*get_error_string)(Error) = nullptr;
  DynamicLibrary library;

  // "CUDA runtime error 35: CUDA driver version is insufficient for CUDA runtime version"
  std::string error_text(Error error) const;
};

struct CudaDriver {
  using Result = int;  // CUresult
  Result (*init)(unsigned) = nullptr;
  Result (*driver_get_version)(int*) = nullptr;
  Result (*device_get_count)(int*) = nullptr;
  Result (*device_get)(int*, int) = nullptr;
  Result (*device_get_name)(char*, int, int) = nullptr;
  Result (*device_total_mem)(std::size_t*, int) = nullptr;
  Result (*device_get_attribute)(int*, int, int) = nullptr;
  Result (*device_get_pci_bus_id)(char*, int, int) = nullptr;
  Result (*get_error_string)(Result, const char**) = nullptr;
  DynamicLibrary library;

  std::string error_text(Result result) const;
};

// Loads the first of `candidates` and resolves every function; nullptr with `error` saying why
// (not found, not loadable, a missing symbol).
std::unique_ptr<CudaRuntime> load_cuda_runtime(const std::vector<std::string>& candidates,
                                               std::string& error);
std::unique_ptr<CudaDriver> load_cuda_driver(const std::vector<std::string>& candidates,
                                             std::string& error);

}  // namespace tandem::distribute::detail
