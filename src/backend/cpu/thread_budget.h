#pragma once
// How many threads a CPU kernel runs on. A count the caller set (set_num_threads(n), or
// OMP_NUM_THREADS) is used as given. Automatic (the default) starts at the cores this process may
// use, its CPU affinity and its cgroup's CPU quota, and runs on fewer while other processes'
// runnable threads want those cores: OpenMP's threads spin at every barrier (libgomp's active
// wait, right on idle cores), and a spinning team whose other member has lost its core to another
// process holds up both (three `tandem train` at once on 2 cores took 115 s with 2 threads each,
// 17 s with one: bench/RESULTS.md, 2026-12-07 "Shared machine").
//
// In automatic mode the machine is sampled from /proc at most every kSamplePeriod by whichever
// thread runs a kernel:
// the runnable threads of the whole machine (/proc/stat's procs_running) less this process's own
// (/proc/self/task/*/stat), smoothed over about half a second.
#include <chrono>
#include <optional>
#include <string_view>

namespace tandem::cpu {

// /proc/stat's "procs_running N": threads running or waiting for a core, machine-wide.
std::optional<int> parse_procs_running(std::string_view proc_stat);
// The state letter of a /proc/<pid>/task/<tid>/stat line ('R' runnable, 'S' sleeping, ...),
// which follows the command name's closing parenthesis (a name may itself hold one).
std::optional<char> parse_task_state(std::string_view task_stat);

// The automatic thread count's decision, fed one sample at a time (kept apart from /proc so a
// test can drive it).
class AutomaticThreads {
 public:
  // Smoothing: a sample's weight is 1 - exp(-elapsed / kSmoothing).
  static constexpr std::chrono::milliseconds kSmoothing{500};
  // The team changes size only when the free cores are this far from it, so that a neighbour
  // whose load hovers near a boundary does not resize it (and rebuild oneDNN primitives) often.
  static constexpr double kHysteresis = 0.75;

  explicit AutomaticThreads(int usable) : usable_(usable), threads_(usable) {}

  // Takes a sample: `other_runnable` threads of other processes wanting a core among `usable`
  // cores, `elapsed` after the previous sample. Returns the threads to run on.
  int observe(double other_runnable, int usable, std::chrono::nanoseconds elapsed);

  int threads() const { return threads_; }
  double other_runnable() const { return other_runnable_; }

 private:
  int usable_;
  int threads_;
  double other_runnable_ = 0;  // smoothed
};

// How often the machine is sampled.
inline constexpr std::chrono::milliseconds kSamplePeriod{100};

// The threads the calling thread's next kernel runs on (sampling the machine when a period has
// passed), made the calling thread's OpenMP team size, which oneDNN reads when it builds and runs
// a primitive.
int apply_kernel_threads();

}  // namespace tandem::cpu
