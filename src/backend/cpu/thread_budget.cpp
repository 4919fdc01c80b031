#include "backend/cpu/thread_budget.h"

#include <dirent.h>
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "tandem/runtime.h"

namespace tandem::cpu {

std::optional<int> parse_procs_running(std::string_view proc_stat) {
  constexpr std::string_view kKey = "procs_running ";
  for (std::size_t start = 0; start < proc_stat.size();) {
    const std::size_t end = std::min(proc_stat.find('\n', start), proc_stat.size());
    const std::string_view line = proc_stat.substr(start, end - start);
    if (line.starts_with(kKey)) {
      const std::string value(line.substr(kKey.size()));
      char* parsed_end = nullptr;
      const long count = std::strtol(value.c_str(), &parsed_end, 10);
      if (parsed_end == value.c_str() || count < 0) return std::nullopt;
      return static_cast<int>(count);
    }
    start = end + 1;
  }
  return std::nullopt;
}

std::optional<char> parse_task_state(std::string_view task_stat) {
  const std::size_t name_end = task_stat.rfind(')');
  if (name_end == std::string_view::npos || name_end + 2 >= task_stat.size()) return std::nullopt;
  return task_stat[name_end + 2];
}

namespace {

// Small /proc files read whole with one read(2): std::ifstream costs several times more, and the
// sampler reads one file per thread of the process.
bool read_proc_file(const char* path, std::string& text) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  text.resize(4096);
  const ssize_t got = ::read(fd, text.data(), text.size());
  ::close(fd);
  if (got <= 0) return false;
  text.resize(static_cast<std::size_t>(got));
  return true;
}

// This process's threads that are running or waiting for a core.
int own_runnable_threads(std::string& buffer) {
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return 1;
  int runnable = 0;
  std::string path;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    path = "/proc/self/task/";
    path += entry->d_name;
    path += "/stat";
    if (read_proc_file(path.c_str(), buffer) && parse_task_state(buffer) == 'R') ++runnable;
  }
  ::closedir(tasks);
  return std::max(runnable, 1);  // the sampling thread itself
}

// Other processes' runnable threads competing for this process's cores: the machine's, less this
// process's own, scaled to the share of the machine's cores this process may use.
std::optional<double> other_runnable_threads(int usable) {
  thread_local std::string buffer;
  if (!read_proc_file("/proc/stat", buffer)) return std::nullopt;
  // /proc/stat outgrows one 4 KiB read on machines with many CPUs: procs_running is near its end.
  if (buffer.size() == 4096) {
    std::ifstream whole("/proc/stat");
    std::ostringstream text;
    text << whole.rdbuf();
    buffer = text.str();
  }
  const auto machine = parse_procs_running(buffer);
  if (!machine) return std::nullopt;
  const int own = own_runnable_threads(buffer);
  const long online = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  const double others = std::max(0, *machine - own);
  return others * std::min(1.0, static_cast<double>(usable) / static_cast<double>(online));
}

int initial_setting() {
  // OMP_NUM_THREADS is a count the user gave: libgomp has parsed it (it may be a list).
  const char* variable = std::getenv("OMP_NUM_THREADS");
  if (variable != nullptr && *variable != '\0') return omp_get_max_threads();
  return 0;
}

class ThreadBudget {
 public:
  static ThreadBudget& instance() {
    static ThreadBudget budget;
    return budget;
  }

  void set(int setting) {
    std::lock_guard lock(sampling_);
    setting_.store(std::max(0, setting), std::memory_order_relaxed);
    // A fresh start: the full team until the first sample says otherwise.
    const int usable = usable_cpu_cores();
    usable_.store(usable, std::memory_order_relaxed);
    automatic_ = AutomaticThreads(usable);
    active_.store(usable, std::memory_order_relaxed);
    last_sample_ = 0;
    samples_ = 0;
    next_sample_.store(0, std::memory_order_relaxed);
  }

  int setting() const { return setting_.load(std::memory_order_relaxed); }
  int usable() const { return usable_.load(std::memory_order_relaxed); }

  // The threads for the next kernel; in automatic mode, samples the machine when a period has
  // passed (a count given needs no sample: no /proc reads on the kernels' path).
  int threads() {
    const int setting = setting_.load(std::memory_order_relaxed);
    if (setting > 0) return setting;
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    if (now >= next_sample_.load(std::memory_order_relaxed)) sample(now);
    return active_.load(std::memory_order_relaxed);
  }

  double other_runnable() {
    std::lock_guard lock(sampling_);
    return automatic_.other_runnable();
  }

 private:
  ThreadBudget() { set(initial_setting()); }

  void sample(std::int64_t now) {
    std::unique_lock lock(sampling_, std::try_to_lock);
    if (!lock.owns_lock()) return;
    if (now < next_sample_.load(std::memory_order_relaxed)) return;  // another thread just did
    const std::int64_t previous = last_sample_;
    last_sample_ = now;
    next_sample_.store(now + std::chrono::nanoseconds(kSamplePeriod).count(),
                       std::memory_order_relaxed);
    // The affinity and the quota seldom change: read again once a second, not every sample
    // (the cgroup files cost as much as the sample itself).
    if (++samples_ % kSamplesPerUsableRead == 0) {
      usable_.store(usable_cpu_cores(), std::memory_order_relaxed);
    }
    const int usable = usable_.load(std::memory_order_relaxed);
    const auto others = other_runnable_threads(usable);
    if (!others) return;  // no /proc: the full team
    const std::chrono::nanoseconds elapsed = previous == 0
                                                 ? std::chrono::nanoseconds(kSamplePeriod)
                                                 : std::chrono::nanoseconds(now - previous);
    active_.store(automatic_.observe(*others, usable, elapsed), std::memory_order_relaxed);
  }

  std::mutex sampling_;
  std::atomic<int> setting_{0};
  std::atomic<int> usable_{1};
  std::atomic<int> active_{1};
  std::atomic<std::int64_t> next_sample_{0};
  static constexpr int kSamplesPerUsableRead = 10;
  std::int64_t last_sample_ = 0;  // under sampling_
  int samples_ = 0;               // under sampling_
  AutomaticThreads automatic_{1};
};

}  // namespace

int AutomaticThreads::observe(double other_runnable, int usable, std::chrono::nanoseconds elapsed) {
  const double weight = 1.0 - std::exp(-std::chrono::duration<double>(elapsed).count() /
                                       std::chrono::duration<double>(kSmoothing).count());
  other_runnable_ += std::clamp(weight, 0.0, 1.0) * (other_runnable - other_runnable_);
  if (usable != usable_) {
    // The affinity or the quota changed: start over from the new count.
    usable_ = usable;
    threads_ = std::min(threads_, usable);
  }
  const double free_cores =
      std::clamp(usable_ - other_runnable_, 1.0, static_cast<double>(usable_));
  if (std::abs(free_cores - threads_) >= kHysteresis) {
    threads_ = std::clamp(static_cast<int>(std::lround(free_cores)), 1, usable_);
  }
  return threads_;
}

int apply_kernel_threads() {
  const int threads = ThreadBudget::instance().threads();
  // Per thread in OpenMP: a thread that has not run a kernel yet has the process's default.
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
  return threads;
}

}  // namespace tandem::cpu

namespace tandem {

void set_num_threads(int threads) {
  cpu::ThreadBudget::instance().set(threads);
  cpu::apply_kernel_threads();
}

int num_threads() {
  auto& budget = cpu::ThreadBudget::instance();
  return budget.setting() > 0 ? budget.setting() : budget.usable();
}

int thread_setting() {
  return cpu::ThreadBudget::instance().setting();
}

double measure_other_runnable_threads(std::chrono::milliseconds window) {
  const int samples = std::max<int>(1, static_cast<int>(window / cpu::kSamplePeriod));
  const int usable = usable_cpu_cores();
  double sum = 0;
  int taken = 0;
  for (int i = 0; i < samples; ++i) {
    if (i > 0) std::this_thread::sleep_for(cpu::kSamplePeriod);
    if (const auto others = cpu::other_runnable_threads(usable)) {
      sum += *others;
      ++taken;
    }
  }
  return taken == 0 ? 0.0 : sum / taken;
}

CpuThreads cpu_threads() {
  auto& budget = cpu::ThreadBudget::instance();
  CpuThreads state;
  state.setting = budget.setting();
  state.active = budget.threads();
  state.usable_cores = budget.usable();
  state.other_runnable = budget.other_runnable();
  return state;
}

}  // namespace tandem
