#include "core/usable_cores.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tandem/runtime.h"

namespace tandem::core {
namespace fs = std::filesystem;
namespace {

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::optional<double> number_in(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return std::nullopt;
  return value;
}

// cgroup v2's cpu.max: "max 100000" (no quota) or "150000 100000".
std::optional<double> v2_limit(const fs::path& folder) {
  const auto text = read_text(folder / "cpu.max");
  if (!text || text->starts_with("max")) return std::nullopt;
  std::istringstream fields(*text);
  double quota = 0;
  double period = 0;
  if (!(fields >> quota >> period) || quota <= 0 || period <= 0) return std::nullopt;
  return quota / period;
}

// cgroup v1's cpu.cfs_quota_us (-1: no quota) over cpu.cfs_period_us.
std::optional<double> v1_limit(const fs::path& folder) {
  const auto quota_text = read_text(folder / "cpu.cfs_quota_us");
  const auto period_text = read_text(folder / "cpu.cfs_period_us");
  if (!quota_text || !period_text) return std::nullopt;
  const auto quota = number_in(*quota_text);
  const auto period = number_in(*period_text);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return *quota / *period;
}

// The smallest limit of `path` (relative to `mount`) and every folder above it up to the mount.
template <typename Limit>
std::optional<double> smallest_limit_upwards(const fs::path& mount, std::string_view path,
                                             Limit limit_of) {
  std::optional<double> smallest;
  fs::path relative = fs::path(std::string(path)).relative_path();
  while (true) {
    if (const auto limit = limit_of(mount / relative)) {
      smallest = smallest ? std::min(*smallest, *limit) : *limit;
    }
    if (relative.empty()) break;
    relative = relative.parent_path();
  }
  return smallest;
}

}  // namespace

std::optional<double> cgroup_cpu_limit(std::string_view proc_self_cgroup,
                                       const fs::path& cgroup_root) {
  std::optional<double> smallest;
  const auto take = [&](std::optional<double> limit) {
    if (limit) smallest = smallest ? std::min(*smallest, *limit) : *limit;
  };
  // Lines "hierarchy-id:controllers:path"; v2's is "0::path".
  for (std::size_t start = 0; start < proc_self_cgroup.size();) {
    const std::size_t end = std::min(proc_self_cgroup.find('\n', start), proc_self_cgroup.size());
    const std::string_view line = proc_self_cgroup.substr(start, end - start);
    start = end + 1;
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    if (controllers.empty()) {
      // v2: mounted at the root itself, or beside v1 hierarchies at root/unified.
      for (const fs::path& mount : {cgroup_root, cgroup_root / "unified"}) {
        if (fs::exists(mount / "cgroup.controllers")) {
          take(smallest_limit_upwards(mount, path, v2_limit));
          break;
        }
      }
      continue;
    }
    // v1: the cpu controller, mounted alone or with cpuacct under the controllers' names.
    bool has_cpu = false;
    for (std::size_t from = 0; from <= controllers.size();) {
      const std::size_t comma = std::min(controllers.find(',', from), controllers.size());
      has_cpu = has_cpu || controllers.substr(from, comma - from) == "cpu";
      from = comma + 1;
    }
    if (!has_cpu) continue;
    for (const fs::path& mount : {cgroup_root / std::string(controllers), cgroup_root / "cpu"}) {
      if (fs::exists(mount / "cpu.cfs_quota_us")) {
        take(smallest_limit_upwards(mount, path, v1_limit));
        break;
      }
    }
  }
  return smallest;
}

int threads_for_cpu_limit(double cpus) {
  return std::max(1, static_cast<int>(std::ceil(cpus - 1e-9)));
}

}  // namespace tandem::core

namespace tandem {
namespace {

int affinity_cores() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  return std::max(1, CPU_COUNT(&mask));
}

}  // namespace

int usable_cpu_cores() {
  int cores = affinity_cores();
  if (const auto cgroup = core::read_text("/proc/self/cgroup")) {
    if (const auto limit = core::cgroup_cpu_limit(*cgroup, "/sys/fs/cgroup")) {
      cores = std::min(cores, core::threads_for_cpu_limit(*limit));
    }
  }
  return cores;
}

}  // namespace tandem
