#pragma once
// CPU time and resident memory of a process (and its descendants) and the machine's CPU use,
// from Linux's /proc.
#include <cstdint>
#include <optional>

namespace tandem::observe {

struct ProcessTimes {
  double cpu_seconds = 0.0;  // user + system time, reaped children included
  std::int64_t rss_bytes = 0;
};

// `pid` alone or with every live descendant. Nothing when `pid` is gone.
std::optional<ProcessTimes> read_process_times(int pid, bool include_children);

struct SystemTimes {
  double busy = 0.0;   // clock ticks spent not idle, over all CPUs
  double total = 0.0;  // all clock ticks, over all CPUs
};

// The first line of /proc/stat; nothing where it cannot be read.
std::optional<SystemTimes> read_system_times();

}  // namespace tandem::observe
