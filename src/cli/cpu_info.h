#pragma once
// What `tandem devices` reports about the host CPU: cpuid for the instruction sets (and whether
// the OS saves their registers), /proc/cpuinfo for topology, /proc/meminfo for memory.
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::cli {

struct IsaFeature {
  std::string name;  // "AVX-512F"
  bool available;    // the CPU has it and the OS enabled its register state
};

struct CpuInfo {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD"; empty off x86
  std::string model;   // brand string, e.g. "Intel(R) Xeon(R) Platinum 8480+"
  int sockets = 0;
  int cores = 0;              // physical cores across all sockets
  int threads = 0;            // logical processors the OS lists
  int threads_available = 0;  // in this process's affinity mask
  std::vector<IsaFeature> features;
  std::int64_t memory_total_bytes = 0;
  std::int64_t memory_available_bytes = 0;
};

CpuInfo probe_cpu();

}  // namespace tandem::cli
