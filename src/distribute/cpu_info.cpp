// distribute::probe_cpu (tandem/distribute.h): what `tandem devices` reports about the host CPU.
#include "tandem/distribute.h"

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "tandem/runtime.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TANDEM_X86 1
#endif

namespace tandem::distribute {
namespace {

std::string trim(const std::string& text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

#ifdef TANDEM_X86
struct CpuidRegisters {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegisters cpuid(unsigned leaf, unsigned subleaf = 0) {
  CpuidRegisters r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

bool bit(unsigned word, int index) {
  return (word >> index) & 1u;
}

// XCR0: which register files the OS saves on a context switch. A CPU feature whose registers the
// OS does not save cannot be used, whatever cpuid says.
std::uint64_t enabled_register_state() {
  unsigned low = 0, high = 0;
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return (std::uint64_t{high} << 32) | low;
}

void probe_cpuid(CpuInfo& info) {
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  const CpuidRegisters vendor = cpuid(0);
  char vendor_text[13] = {};
  std::memcpy(vendor_text, &vendor.ebx, 4);
  std::memcpy(vendor_text + 4, &vendor.edx, 4);
  std::memcpy(vendor_text + 8, &vendor.ecx, 4);
  info.vendor = vendor_text;

  if (__get_cpuid_max(0x80000000, nullptr) >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const CpuidRegisters part = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &part, 16);
    }
    info.model = trim(brand);
  }

  const CpuidRegisters leaf1 = max_leaf >= 1 ? cpuid(1) : CpuidRegisters{};
  const CpuidRegisters leaf7 = max_leaf >= 7 ? cpuid(7, 0) : CpuidRegisters{};
  const CpuidRegisters leaf7_1 = max_leaf >= 7 && leaf7.eax >= 1 ? cpuid(7, 1) : CpuidRegisters{};
  const std::uint64_t xcr0 = bit(leaf1.ecx, 27) ? enabled_register_state() : 0;  // OSXSAVE
  const bool avx_state = (xcr0 & 0x6) == 0x6;                                    // XMM and YMM
  const bool avx512_state = avx_state && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM halves
  const bool amx_state = (xcr0 & 0x60000) == 0x60000;            // XTILECFG, XTILEDATA

  info.features = {
      {"SSE4.2", bit(leaf1.ecx, 20)},
      {"AVX", bit(leaf1.ecx, 28) && avx_state},
      {"AVX2", bit(leaf7.ebx, 5) && avx_state},
      {"FMA", bit(leaf1.ecx, 12) && avx_state},
      {"AVX-512F", bit(leaf7.ebx, 16) && avx512_state},
      {"AVX-512BW", bit(leaf7.ebx, 30) && avx512_state},
      {"AVX-512VL", bit(leaf7.ebx, 31) && avx512_state},
      {"AVX512-VNNI", bit(leaf7.ecx, 11) && avx512_state},
      {"AVX512-BF16", bit(leaf7_1.eax, 5) && avx512_state},
      {"AMX-TILE", bit(leaf7.edx, 24) && amx_state},
      {"AMX-BF16", bit(leaf7.edx, 22) && amx_state},
      {"AMX-INT8", bit(leaf7.edx, 25) && amx_state},
  };
}
#endif

void probe_proc_cpuinfo(CpuInfo& info) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::string> sockets;
  std::set<std::pair<std::string, std::string>> cores;
  std::string physical_id;
  int processors = 0;
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (key == "processor") {
      ++processors;
      physical_id.clear();  // a kernel that lists no sockets has one
    } else if (key == "physical id") {
      physical_id = value;
      sockets.insert(value);
    } else if (key == "core id") {
      cores.emplace(physical_id, value);
    } else if (key == "model name" && info.model.empty()) {
      info.model = value;
    }
  }
  info.threads = processors;
  info.sockets = sockets.empty() ? 1 : static_cast<int>(sockets.size());
  // Without core ids (some VMs and non-x86 kernels) each logical processor counts as a core.
  info.cores = cores.empty() ? processors : static_cast<int>(cores.size());
}

void probe_memory(CpuInfo& info) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::int64_t kibibytes = 0;
  std::string unit;
  while (meminfo >> key >> kibibytes) {
    std::getline(meminfo, unit);
    if (key == "MemTotal:") info.memory_total_bytes = kibibytes * 1024;
    if (key == "MemAvailable:") info.memory_available_bytes = kibibytes * 1024;
  }
}

}  // namespace

CpuInfo probe_cpu() {
  CpuInfo info;
#ifdef TANDEM_X86
  probe_cpuid(info);
#endif
  probe_proc_cpuinfo(info);
  probe_memory(info);
  info.threads_available = usable_cpu_cores();
  if (info.threads == 0) info.threads = info.threads_available;
  if (info.model.empty()) info.model = "unknown CPU";
  return info;
}

}  // namespace tandem::distribute
