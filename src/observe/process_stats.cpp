#include "observe/process_stats.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace tandem::observe {
namespace {

struct StatLine {
  int parent = 0;
  double ticks = 0.0;         // utime + stime
  double reaped_ticks = 0.0;  // cutime + cstime: children it has waited for
  std::int64_t rss_pages = 0;
};

// /proc/<pid>/stat: "pid (comm) state ppid ... utime stime cutime cstime ... rss ...". The
// command name may hold spaces and parentheses, so fields are counted after the last ')'. Read
// with plain system calls: a monitor scanning every process each second should cost nothing.
std::optional<StatLine> read_stat(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[1024];
  const ssize_t size = ::read(fd, buffer, sizeof buffer - 1);
  ::close(fd);
  if (size <= 0) return std::nullopt;
  buffer[size] = '\0';
  const char* cursor = std::strrchr(buffer, ')');
  if (cursor == nullptr) return std::nullopt;
  cursor += 2;  // ") " then field 3 (state)
  // fields[n] is stat(5)'s field n + 3, parsed as numbers (field 3, the state letter, gives 0).
  double fields[22] = {};
  for (double& field : fields) {
    char* end = nullptr;
    field = std::strtod(cursor, &end);
    if (end == cursor) {  // not a number (the state): skip the word
      while (*cursor != '\0' && *cursor != ' ')
        ++cursor;
    } else {
      cursor = end;
    }
    while (*cursor == ' ')
      ++cursor;
    if (*cursor == '\0') break;
  }
  const auto field = [&](int number) { return fields[number - 3]; };
  StatLine stat;
  stat.parent = static_cast<int>(field(4));
  stat.ticks = field(14) + field(15);
  stat.reaped_ticks = field(16) + field(17);
  stat.rss_pages = static_cast<std::int64_t>(field(24));
  return stat;
}

// Every process's parent, from one pass over /proc.
std::unordered_map<int, std::vector<int>> children_by_parent() {
  std::unordered_map<int, std::vector<int>> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    if (const std::optional<StatLine> stat = read_stat(static_cast<int>(pid))) {
      children[stat->parent].push_back(static_cast<int>(pid));
    }
  }
  closedir(proc);
  return children;
}

}  // namespace

std::optional<ProcessTimes> read_process_times(int pid, bool include_children) {
  const std::optional<StatLine> root = read_stat(pid);
  if (!root) return std::nullopt;
  const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page_bytes = static_cast<double>(sysconf(_SC_PAGESIZE));
  double ticks = root->ticks + root->reaped_ticks;
  double pages = static_cast<double>(root->rss_pages);
  if (include_children) {
    const auto children = children_by_parent();
    std::vector<int> pending{pid};
    while (!pending.empty()) {
      const int parent = pending.back();
      pending.pop_back();
      const auto found = children.find(parent);
      if (found == children.end()) continue;
      for (int child : found->second) {
        // Its reaped children are in its own cutime; its live ones are visited in turn.
        if (const std::optional<StatLine> stat = read_stat(child)) {
          ticks += stat->ticks + stat->reaped_ticks;
          pages += static_cast<double>(stat->rss_pages);
        }
        pending.push_back(child);
      }
    }
  }
  return ProcessTimes{ticks / ticks_per_second, static_cast<std::int64_t>(pages * page_bytes)};
}

std::optional<SystemTimes> read_system_times() {
  std::ifstream file("/proc/stat");
  std::string label;
  if (!file || !(file >> label) || label != "cpu") return std::nullopt;
  // user nice system idle iowait irq softirq steal (guest time is inside user already).
  double values[8] = {};
  for (double& value : values) {
    if (!(file >> value)) return std::nullopt;
  }
  SystemTimes times;
  for (double value : values)
    times.total += value;
  times.busy = times.total - values[3] - values[4];
  return times;
}

}  // namespace tandem::observe
