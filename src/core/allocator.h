#pragma once
// Device memory behind Storage. Core knows the CPU; a backend for another device registers its
// own DeviceMemory at start-up, so core never depends on a backend.
#include <cstddef>

#include "tandem/device.h"

namespace tandem {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(std::size_t nbytes) = 0;
  virtual void deallocate(void* data, std::size_t nbytes) = 0;
};

class DeviceMemory : public Allocator {
 public:
  // Copies between this device and the host, or within this device.
  virtual void copy_from_host(void* device_dst, const void* host_src, std::size_t nbytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* device_src, std::size_t nbytes) = 0;
  virtual void copy_within(void* dst, const void* src, std::size_t nbytes) = 0;
};

// Every CPU buffer is 64-byte aligned: whole cache lines, and AVX-512 loads never split.
inline constexpr std::size_t kCpuAlignment = 64;

DeviceMemory& device_memory(DeviceType type);
// Registers the memory of a device type (e.g. the CUDA backend at start-up).
void register_device_memory(DeviceType type, DeviceMemory* memory);

}  // namespace tandem
