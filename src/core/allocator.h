#pragma once
// Device memory behind Storage. Core knows the CPU; a backend for another device registers its
// own DeviceMemory when it comes up, so core never depends on a backend.
#include <atomic>
#include <cstddef>
#include <string>

#include "tandem/device.h"
#include "tandem/runtime.h"

namespace tandem {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(std::size_t nbytes) = 0;
  virtual void deallocate(void* data, std::size_t nbytes) = 0;
};

// What one device's allocator holds, with an optional cap. Allocators reserve() before they
// allocate and release() after they free, so limits and out-of-memory messages work the same on
// every device (and tests can exhaust a small cap on any machine).
class MemoryLedger {
 public:
  explicit MemoryLedger(Device device) : device_(device) {}

  // Counts `nbytes` more as held; throws OutOfMemory (naming the device, the request and what
  // is held) when that would pass the limit.
  void reserve(std::size_t nbytes);
  void release(std::size_t nbytes);
  // Throws OutOfMemory for a request the device itself refused; `detail` says what it reported
  // (e.g. "1.2 GiB of the 139.8 GiB GPU free").
  [[noreturn]] void refuse(std::size_t nbytes, const std::string& detail) const;

  MemoryInfo info() const;
  void set_limit(std::size_t bytes) { limit_ = bytes; }
  void set_capacity(std::size_t bytes) { capacity_ = bytes; }
  std::size_t capacity() const { return capacity_.load(); }
  void reset_peak() { peak_ = held_.load(); }

 private:
  Device device_;
  std::atomic<std::size_t> held_{0};
  std::atomic<std::size_t> peak_{0};
  std::atomic<std::size_t> limit_{0};
  std::atomic<std::size_t> capacity_{0};
};

class DeviceMemory : public Allocator {
 public:
  // Copies between this device and the host, or within this device.
  virtual void copy_from_host(void* device_dst, const void* host_src, std::size_t nbytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* device_src, std::size_t nbytes) = 0;
  virtual void copy_within(void* dst, const void* src, std::size_t nbytes) = 0;
  // The allocator of device `index` of this type: the CPU has one, each GPU its own pool.
  virtual Allocator& allocator_for(int index) { return *this; }
  // The ledger of device `index`.
  virtual MemoryLedger& ledger(int index) = 0;
};

// Every CPU buffer is 64-byte aligned: whole cache lines, and AVX-512 loads never split.
inline constexpr std::size_t kCpuAlignment = 64;

// The CPU allocator for large, long-lived buffers a kernel streams on every call (an inference
// model's reordered filters): each buffer starts on a 2 MiB boundary with its whole huge pages
// advised for transparent huge pages before first touch, counted in the CPU's ledger. At batch 1
// a pass streams a model's filters, and from 4 KiB pages that costs a TLB miss (on a VM a
// two-level page walk) every 4 KiB. Not for activations or data: taking huge pages costs the
// kernel zeroing and compaction at first touch (a training epoch's data on them ran 0.4 s slower).
Allocator& cpu_huge_page_allocator();

// The memory of a device type, bringing its backend up on first use (see bring_up_device);
// throws Error saying why when the type is not usable in this build or on this machine.
DeviceMemory& device_memory(DeviceType type);
// Registers the memory of a device type (a backend when it comes up; tests with fakes).
void register_device_memory(DeviceType type, DeviceMemory* memory);

// How a device type comes up: registered by the ops layer's backend registry for each type a
// backend registered (core knows no backend). It registers the type's DeviceMemory and backend
// and returns "", or returns why the type cannot run here ("no NVIDIA driver is loaded ...").
using DeviceBringUp = std::string (*)(DeviceType type);
void register_device_bring_up(DeviceType type, DeviceBringUp bring_up);
// Runs the bring-up of `type` once (a concurrent first use waits for it) and returns its
// answer, the same on every later call: "" when the type is up.
std::string bring_up_device(DeviceType type);

}  // namespace tandem
