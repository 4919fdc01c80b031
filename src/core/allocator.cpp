#include "core/allocator.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "tandem/error.h"

namespace tandem {

std::string format_memory_size(std::size_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", value, kUnits[unit]);
  return text;
}

// ---- MemoryLedger ----

void MemoryLedger::reserve(std::size_t nbytes) {
  std::size_t held = held_.load();
  for (;;) {
    const std::size_t limit = limit_.load();
    if (limit != 0 && held + nbytes > limit) {
      throw OutOfMemory("out of memory on " + device_.str() + ": asked for " +
                            format_memory_size(nbytes) + " while Tandem holds " +
                            format_memory_size(held) + " of the " + format_memory_size(limit) +
                            " it may use there (set_memory_limit)",
                        device_.str(), nbytes, held, limit);
    }
    if (held_.compare_exchange_weak(held, held + nbytes)) break;
  }
  const std::size_t now = held + nbytes;
  std::size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
}

void MemoryLedger::release(std::size_t nbytes) {
  held_.fetch_sub(nbytes);
}

void MemoryLedger::refuse(std::size_t nbytes, const std::string& detail) const {
  const std::size_t held = held_.load();
  throw OutOfMemory("out of memory on " + device_.str() + ": asked for " +
                        format_memory_size(nbytes) + " while Tandem holds " +
                        format_memory_size(held) + " (" + detail + ")",
                    device_.str(), nbytes, held, capacity_.load());
}

MemoryInfo MemoryLedger::info() const {
  return {held_.load(), peak_.load(), limit_.load(), capacity_.load()};
}

namespace {

std::size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0
             ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size)
             : 0;
}

// Buffers in mappings of their own that start on a 2 MiB boundary, their whole huge pages advised
// for transparent huge pages (MADV_HUGEPAGE) before anything touches them, so that the kernel
// backs them with 2 MiB pages where it allows (THP "madvise" or "always"; elsewhere the advice is
// refused and they keep 4 KiB pages). Only whole huge pages inside a buffer are advised, so its
// resident size stays its own. Out of glibc's heap, they also leave the small objects a pass
// reads there (oneDNN's primitives, the compiled nodes' state) closer together: at batch 1
// 0.08-0.24 ms faster than with the same buffers on the heap, in three alternating runs
// (bench/RESULTS.md, stop 39). For long-lived buffers only: each is mapped and unmapped whole.
// Counted in the CPU's ledger.
class HugePageAllocator final : public Allocator {
 public:
  explicit HugePageAllocator(MemoryLedger& ledger) : ledger_(ledger) {}
  void* allocate(std::size_t nbytes) override {
    const std::size_t size = nbytes == 0 ? 1 : nbytes;
    ledger_.reserve(size);
    // Mapped a huge page longer, then trimmed to the buffer's pages from a 2 MiB boundary on.
    const std::size_t pages = mapped_bytes(size);
    const std::size_t mapped = pages + kHugePage;
    void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      ledger_.release(size);
      ledger_.refuse(nbytes, "the system refused the allocation");
    }
    const auto begin = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t start = round_up(begin, kHugePage);
    if (start > begin) munmap(raw, start - begin);
    const std::uintptr_t tail = start + pages;
    if (begin + mapped > tail) munmap(reinterpret_cast<void*>(tail), begin + mapped - tail);
    void* data = reinterpret_cast<void*>(start);
    madvise(data, size / kHugePage * kHugePage, MADV_HUGEPAGE);
    return data;
  }
  void deallocate(void* data, std::size_t nbytes) override {
    const std::size_t size = nbytes == 0 ? 1 : nbytes;
    munmap(data, mapped_bytes(size));
    ledger_.release(size);
  }

 private:
  static constexpr std::size_t kHugePage = 2 * 1024 * 1024;
  static std::size_t round_up(std::size_t value, std::size_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
  }
  // The bytes of the whole pages that hold `size` bytes.
  static std::size_t mapped_bytes(std::size_t size) {
    static const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return round_up(size, page);
  }
  MemoryLedger& ledger_;
};

class CpuMemory final : public DeviceMemory {
 public:
  CpuMemory() {
    // A training step frees and reallocates the same activation sizes every iteration. glibc
    // serves blocks above its mmap threshold with fresh pages and unmaps them on free, so each
    // step would page-fault through every activation again (measured: ~2x the time of a relu on
    // a 2.7 MB tensor). Keeping blocks up to glibc's 32 MiB cap on the heap and not trimming it
    // makes the memory of one step serve the next.
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
    ledger_.set_capacity(physical_memory_bytes());
  }
  void* allocate(std::size_t nbytes) override {
    // aligned_alloc needs a size that is a multiple of the alignment.
    const std::size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    const std::size_t size = rounded == 0 ? kCpuAlignment : rounded;
    // More than the machine has can never be given: refused before the system is asked (which
    // may overcommit, or, under AddressSanitizer, abort on a size past its maximum).
    if (const std::size_t capacity = ledger_.capacity(); capacity != 0 && size > capacity) {
      ledger_.refuse(nbytes,
                     "more than the machine's " + format_memory_size(capacity) + " of memory");
    }
    ledger_.reserve(size);
    void* data = std::aligned_alloc(kCpuAlignment, size);
    if (data == nullptr) {
      ledger_.release(size);
      ledger_.refuse(nbytes, "the system refused the allocation");
    }
    return data;
  }
  void deallocate(void* data, std::size_t nbytes) override {
    std::free(data);
    const std::size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    ledger_.release(rounded == 0 ? kCpuAlignment : rounded);
  }
  void copy_from_host(void* dst, const void* src, std::size_t nbytes) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t nbytes) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void copy_within(void* dst, const void* src, std::size_t nbytes) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  MemoryLedger& ledger(int) override { return ledger_; }
  Allocator& huge_pages() { return huge_pages_; }

 private:
  MemoryLedger ledger_{Device::cpu()};
  HugePageAllocator huge_pages_{ledger_};
};

// The CPU's memory, made on first use and kept to the end of the process: storages that static
// caches hold are freed through it at exit.
CpuMemory& builtin_cpu_memory() {
  static CpuMemory cpu_memory;
  return cpu_memory;
}

std::array<std::atomic<DeviceMemory*>, kNumDeviceTypes>& registry() {
  static_assert(static_cast<int>(DeviceType::cpu) == 0, "the CPU's memory is the first entry");
  static std::array<std::atomic<DeviceMemory*>, kNumDeviceTypes> memories{&builtin_cpu_memory()};
  return memories;
}

struct BringUps {
  std::mutex mutex;
  std::array<DeviceBringUp, kNumDeviceTypes> functions{};
  std::array<bool, kNumDeviceTypes> tried{};
  std::array<std::string, kNumDeviceTypes> answers;
};

BringUps& bring_ups() {
  static BringUps state;
  return state;
}

}  // namespace

void register_device_bring_up(DeviceType type, DeviceBringUp bring_up) {
  BringUps& state = bring_ups();
  std::lock_guard lock(state.mutex);
  state.functions[static_cast<std::size_t>(type)] = bring_up;
}

std::string bring_up_device(DeviceType type) {
  const auto slot = static_cast<std::size_t>(type);
  BringUps& state = bring_ups();
  std::lock_guard lock(state.mutex);
  if (!state.tried[slot]) {
    state.tried[slot] = true;
    state.answers[slot] = state.functions[slot] != nullptr
                              ? state.functions[slot](type)
                              : std::string("this build of Tandem has no backend for ") +
                                    device_type_name(type) + " devices";
  }
  return state.answers[slot];
}

Allocator& cpu_huge_page_allocator() {
  return builtin_cpu_memory().huge_pages();
}

DeviceMemory& device_memory(DeviceType type) {
  const auto slot = static_cast<std::size_t>(type);
  if (registry()[slot] == nullptr) {
    const std::string why_not = bring_up_device(type);
    if (registry()[slot] == nullptr) {
      throw Error(
          std::string(type == DeviceType::cuda ? "CUDA devices are" : "this device is") +
          " not available: " + (why_not.empty() ? "its backend registered no memory" : why_not) +
          "; run `tandem devices` to see what this machine has, or use the CPU");
    }
  }
  return *registry()[slot];
}

void register_device_memory(DeviceType type, DeviceMemory* memory) {
  registry()[static_cast<std::size_t>(type)] = memory;
}

MemoryInfo memory_info(Device device) {
  return device_memory(device.type).ledger(device.index).info();
}

void set_memory_limit(Device device, std::size_t bytes) {
  device_memory(device.type).ledger(device.index).set_limit(bytes);
}

void reset_peak_memory(Device device) {
  device_memory(device.type).ledger(device.index).reset_peak();
}

}  // namespace tandem
