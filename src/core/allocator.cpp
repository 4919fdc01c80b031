#include "core/allocator.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "tandem/error.h"

namespace tandem {
namespace {

class CpuMemory final : public DeviceMemory {
 public:
  void* allocate(std::size_t nbytes) override {
    // aligned_alloc needs a size that is a multiple of the alignment.
    const std::size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* data = std::aligned_alloc(kCpuAlignment, rounded == 0 ? kCpuAlignment : rounded);
    if (data == nullptr) {
      throw Error("out of host memory: could not allocate " + std::to_string(nbytes) +
                  " bytes; try a smaller batch size");
    }
    return data;
  }
  void deallocate(void* data, std::size_t) override { std::free(data); }
  void copy_from_host(void* dst, const void* src, std::size_t nbytes) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t nbytes) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void copy_within(void* dst, const void* src, std::size_t nbytes) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
};

std::array<DeviceMemory*, 2>& registry() {
  static CpuMemory cpu_memory;
  static std::array<DeviceMemory*, 2> memories{&cpu_memory, nullptr};
  return memories;
}

}  // namespace

DeviceMemory& device_memory(DeviceType type) {
  DeviceMemory* memory = registry()[static_cast<std::size_t>(type)];
  if (memory == nullptr) {
    throw Error("device type " + Device{type, 0}.str() +
                " is not available in this build or on this machine; run `tandem devices`");
  }
  return *memory;
}

void register_device_memory(DeviceType type, DeviceMemory* memory) {
  registry()[static_cast<std::size_t>(type)] = memory;
}

}  // namespace tandem
