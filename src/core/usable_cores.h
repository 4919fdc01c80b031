#pragma once
// The cores this process may use: its CPU affinity, capped by its cgroup's CPU quota (v1 or v2),
// which a container limited to one CPU by quota does not show in its affinity.
#include <filesystem>
#include <optional>
#include <string_view>

namespace tandem::core {

// The CPUs the cgroup CPU quota lets this process use (e.g. 1.5), or nullopt without a quota: the
// smallest quota of its cgroup and every cgroup above it, cgroup v2 (cpu.max) or v1
// (cpu.cfs_quota_us over cpu.cfs_period_us), found through `proc_self_cgroup` (the text of
// /proc/self/cgroup) under `cgroup_root` (/sys/fs/cgroup).
std::optional<double> cgroup_cpu_limit(std::string_view proc_self_cgroup,
                                       const std::filesystem::path& cgroup_root);
// The threads a quota of `cpus` CPUs gives work to: rounded up, at least 1 (1.5 CPUs keep two
// threads busy three quarters of the time).
int threads_for_cpu_limit(double cpus);

}  // namespace tandem::core
