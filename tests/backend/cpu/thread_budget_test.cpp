// The CPU kernels' thread count: read from /proc (driven here with written copies), decided from
// samples of the machine's other runnable threads, and applied to the running process while busy
// processes compete with it.
#include "backend/cpu/thread_budget.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "support/busy_processes.h"
#include "support/thread_count.h"
#include "tandem/ops.h"
#include "tandem/runtime.h"

namespace tandem::cpu {
namespace {

using std::chrono::milliseconds;

TEST(ThreadBudget, ReadsTheMachinesRunnableThreads) {
  EXPECT_EQ(parse_procs_running("cpu  1 2 3\nctxt 99\nprocs_running 7\nprocs_blocked 1\n"), 7);
  EXPECT_EQ(parse_procs_running("procs_running 12"), 12);
  EXPECT_EQ(parse_procs_running("cpu 1 2 3\nprocs_blocked 1\n"), std::nullopt);
  EXPECT_EQ(parse_procs_running("procs_running x\n"), std::nullopt);
}

TEST(ThreadBudget, ReadsATasksStateAfterItsName) {
  EXPECT_EQ(parse_task_state("4242 (tandem) R 1 4242 4242 0 -1"), 'R');
  // A thread may name itself anything, parentheses and state letters included.
  EXPECT_EQ(parse_task_state("4243 (a) R (b) S 1 4242"), 'S');
  EXPECT_EQ(parse_task_state("4244 (truncated"), std::nullopt);
  EXPECT_EQ(parse_task_state(""), std::nullopt);
}

// Feeds `samples` samples of `others`, a period apart; returns the last decision.
int feed(AutomaticThreads& automatic, double others, int usable, int samples) {
  int threads = automatic.threads();
  for (int i = 0; i < samples; ++i)
    threads = automatic.observe(others, usable, kSamplePeriod);
  return threads;
}

TEST(ThreadBudget, RunsOnTheCoresOtherProcessesLeave) {
  AutomaticThreads automatic(8);
  EXPECT_EQ(feed(automatic, 0, 8, 5), 8);
  // Three busy processes: five free cores, once the smoothing has seen them for a while.
  EXPECT_EQ(feed(automatic, 3, 8, 1), 8);
  EXPECT_EQ(feed(automatic, 3, 8, 30), 5);
  // More than the machine: one thread still runs.
  EXPECT_EQ(feed(automatic, 20, 8, 30), 1);
  EXPECT_EQ(feed(automatic, 0, 8, 30), 8);
}

TEST(ThreadBudget, ANeighbourNearABoundaryDoesNotResizeTheTeam) {
  AutomaticThreads automatic(2);
  // Two cores, half a core's worth of others: 1.5 free, within the hysteresis of two threads...
  EXPECT_EQ(feed(automatic, 0.5, 2, 30), 2);
  // ...and of one, once there.
  EXPECT_EQ(feed(automatic, 1.0, 2, 30), 1);
  EXPECT_EQ(feed(automatic, 0.5, 2, 30), 1);
  EXPECT_EQ(feed(automatic, 0.0, 2, 30), 2);
  // A quota or affinity that shrinks takes effect at once.
  EXPECT_EQ(automatic.observe(0, 1, kSamplePeriod), 1);
}

// Runs small kernels (each samples the machine when a period has passed) until `done` says so or
// `patience` passes; returns the last state.
template <typename Done>
CpuThreads run_kernels_until(Done done, std::chrono::seconds patience) {
  const Tensor x = Tensor::ones({64});
  const auto give_up = std::chrono::steady_clock::now() + patience;
  CpuThreads state = cpu_threads();
  while (!done(state) && std::chrono::steady_clock::now() < give_up) {
    (void)add(x, x);
    std::this_thread::sleep_for(milliseconds(20));
    state = cpu_threads();
  }
  return state;
}

TEST(ThreadBudget, AutomaticRunsOnOneThreadBesideABusyProcessPerCore) {
  const int usable = usable_cpu_cores();
  if (usable < 2) GTEST_SKIP() << "one usable core: no team to shrink";
  if (usable < static_cast<int>(std::thread::hardware_concurrency())) {
    GTEST_SKIP() << "the affinity or a quota leaves " << usable << " of "
                 << std::thread::hardware_concurrency()
                 << " cores: the machine-wide count of others is scaled down, and these busy "
                    "processes share this one's cores";
  }
  testing::ScopedThreadCount automatic(0);
  EXPECT_EQ(num_threads(), usable);
  const testing::BusyProcesses busy(usable);
  // Other tests may load the machine too, which can only lower the count; the patience is for a
  // machine so loaded that this process's samples come late.
  const CpuThreads state = run_kernels_until([](const CpuThreads& now) { return now.active == 1; },
                                             std::chrono::seconds(60));
  EXPECT_EQ(state.active, 1) << "other runnable threads: " << state.other_runnable;
  EXPECT_GT(state.other_runnable, 0.5);
  EXPECT_EQ(num_threads(), usable) << "the ceiling stays the usable cores";
}

TEST(ThreadBudget, AGivenCountHoldsWhateverTheLoad) {
  testing::ScopedThreadCount two(2);
  const testing::BusyProcesses busy(std::max(2, usable_cpu_cores()));
  // Kernels over ten sample periods, each on the count given: nothing is sampled for it.
  int samples = 0;
  const CpuThreads state =
      run_kernels_until([&](const CpuThreads& now) { return now.active != 2 || ++samples == 50; },
                        std::chrono::seconds(60));
  EXPECT_EQ(samples, 50);
  EXPECT_EQ(state.setting, 2);
  EXPECT_EQ(state.active, 2);
  EXPECT_EQ(state.other_runnable, 0.0) << "no sample taken with a count given";
  EXPECT_EQ(num_threads(), 2);
}

}  // namespace
}  // namespace tandem::cpu
