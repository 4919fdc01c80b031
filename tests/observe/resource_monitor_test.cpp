// The resource monitor: CPU and memory of this process and of a child process tree, the sampling
// thread's schedule, the CSV and TensorBoard outputs, and NVML: absent (as on this machine) and
// present through a stand-in library with two GPUs.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "data/idx_files.h"
#include "observe/event_decoder.h"
#include "observe/nvml.h"
#include "observe/process_stats.h"
#include "support/errors.h"
#include "tandem/observe.h"

extern char** environ;

namespace tandem::testing {
namespace {

using observe::ResourceMonitor;
using observe::ResourceMonitorOptions;

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Keeps this thread busy until the process has used `seconds` more CPU time, however loaded the
// machine is (other builds may leave this test a fraction of a core).
double spin_cpu(double seconds) {
  const double end = process_cpu_seconds() + seconds;
  double sink = 0.0;
  while (process_cpu_seconds() < end) {
    for (int i = 0; i < 1000; ++i)
      sink += std::sqrt(static_cast<double>(i) + sink);
  }
  return sink;
}

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream cells_in(line);
    std::string cell;
    while (std::getline(cells_in, cell, ','))
      cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    rows.push_back(cells);
  }
  return rows;
}

TEST(ProcessStats, ReadsThisProcess) {
  const auto before = observe::read_process_times(getpid(), false);
  ASSERT_TRUE(before.has_value());
  EXPECT_GT(before->rss_bytes, 1 << 20);
  EXPECT_NEAR(before->cpu_seconds, process_cpu_seconds(), 0.05);  // clock ticks of 10 ms
  EXPECT_GT(spin_cpu(0.2), 0.0);
  const auto after = observe::read_process_times(getpid(), false);
  EXPECT_NEAR(after->cpu_seconds - before->cpu_seconds, 0.2, 0.05);
  EXPECT_FALSE(observe::read_process_times(0x7FFFFFF0, false).has_value());
  const auto system = observe::read_system_times();
  ASSERT_TRUE(system.has_value());
  EXPECT_GT(system->total, system->busy);
}

TEST(ResourceMonitor, SamplesThisProcessOnSchedule) {
  ScratchDir dir;
  ResourceMonitorOptions options;
  options.interval_seconds = 0.05;
  options.csv_path = dir.file("monitor.csv");
  options.writer = std::make_shared<observe::SummaryWriter>(dir.path().string());
  options.nvml_library = "libnvidia-ml-absent-for-the-test.so.1";
  ResourceMonitor monitor(options);
  const double cpu_before = process_cpu_seconds();
  monitor.start();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_GT(spin_cpu(0.3), 0.0);
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  monitor.stop();
  const double cpu_used = process_cpu_seconds() - cpu_before;
  const observe::ResourceSummary summary = monitor.summary();
  // A tick every 50 ms for at least 0.5 s, and the last sample at stop(): never more than the
  // schedule allows, and at least one tick between the first sample and the last. How many of the
  // ten ticks a thread gets in time depends on the machine's load, so the count is not asserted.
  EXPECT_GE(summary.samples, 3);
  EXPECT_LE(summary.samples, 1 + summary.seconds / 0.05 + 1);
  EXPECT_GT(summary.peak_rss_bytes, 1 << 20);
  EXPECT_GE(summary.mean_system_cpu_percent, 0.0);
  EXPECT_LE(summary.mean_system_cpu_percent, 100.0);
  EXPECT_GE(summary.seconds, 0.5);
  EXPECT_TRUE(summary.gpus.empty());

  const auto rows = read_csv(dir.file("monitor.csv"));
  ASSERT_EQ(static_cast<std::int64_t>(rows.size()), summary.samples + 1);
  EXPECT_EQ(rows[0],
            (std::vector<std::string>{"wall_time", "elapsed_seconds", "process_cpu_percent",
                                      "rss_bytes", "system_cpu_percent"}));
  double previous = 0.0;
  double integrated_cpu = 0.0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 5u);
    const double elapsed = std::stod(rows[i][1]);
    EXPECT_GT(elapsed, previous);
    integrated_cpu += std::stod(rows[i][2]) / 100.0 * (elapsed - previous);
    previous = elapsed;
    EXPECT_GT(std::stoll(rows[i][3]), 1 << 20);
  }
  // Each sample's percentage over its interval adds up to the CPU time the process used from
  // the baseline to the last sample (the kernel counts it in 10 ms clock ticks).
  EXPECT_NEAR(integrated_cpu, cpu_used, 0.05);
  EXPECT_NEAR(summary.seconds, previous, 1e-6);

  const auto values = read_summaries(dir.path());
  const auto cpu = with_tag(values, "monitor/process_cpu_percent");
  ASSERT_EQ(static_cast<std::int64_t>(cpu.size()), summary.samples);
  for (std::size_t i = 0; i < cpu.size(); ++i)
    EXPECT_EQ(cpu[i].step, static_cast<std::int64_t>(i));
  EXPECT_EQ(with_tag(values, "monitor/rss_mib").size(), cpu.size());
  EXPECT_EQ(with_tag(values, "monitor/system_cpu_percent").size(), cpu.size());
  // The wall time is the sample's, within the run.
  EXPECT_LT(std::abs(cpu.front().wall_time - std::stod(rows[1][0])), 1e-3);
}

TEST(ResourceMonitor, WithoutADriverSaysWhyThereAreNoGpus) {
  ResourceMonitorOptions options;
  options.nvml_library = "libnvidia-ml-absent-for-the-test.so.1";
  ResourceMonitor monitor(options);
  EXPECT_NE(monitor.gpu_status().find("no NVIDIA driver: libnvidia-ml-absent-for-the-test.so.1 "
                                      "not found"),
            std::string::npos)
      << monitor.gpu_status();
  EXPECT_TRUE(monitor.sample_now().gpus.empty());
}

TEST(ResourceMonitor, ReadsEveryGpuThroughNvml) {
  ScratchDir dir;
  ResourceMonitorOptions options;
  options.nvml_library = TANDEM_FAKE_NVML_PATH;
  options.csv_path = dir.file("monitor.csv");
  options.writer = std::make_shared<observe::SummaryWriter>(dir.path().string());
  ResourceMonitor monitor(options);
  EXPECT_EQ(monitor.gpu_status(), "2 GPUs through NVML (driver 999.1-fake)");
  const observe::ResourceSample sample = monitor.sample_now();
  ASSERT_EQ(sample.gpus.size(), 2u);
  const observe::GpuSample& first = sample.gpus[0];
  EXPECT_EQ(first.index, 0);
  EXPECT_EQ(first.name, "Fake GPU Zero");
  EXPECT_EQ(first.utilization_percent, 87.0);
  EXPECT_EQ(first.memory_used_bytes, 3ll << 30);
  EXPECT_EQ(first.memory_total_bytes, 80ll << 30);
  EXPECT_EQ(first.power_watts, 312.5);  // NVML reports milliwatts
  EXPECT_EQ(first.temperature_celsius, 71.0);
  EXPECT_EQ(sample.gpus[1].name, "Fake GPU One");
  EXPECT_TRUE(std::isnan(sample.gpus[1].power_watts));  // not supported by that board

  const auto rows = read_csv(dir.file("monitor.csv"));
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(rows[0].size(), 15u);
  EXPECT_EQ(rows[0][5], "gpu0_utilization_percent");
  EXPECT_EQ(rows[0][14], "gpu1_temperature_celsius");
  EXPECT_EQ(rows[1][5], "87");
  EXPECT_EQ(rows[1][6], std::to_string(3ll << 30));
  EXPECT_EQ(rows[1][8], "312.5");
  EXPECT_EQ(rows[1][13], "");  // GPU 1's power: an empty cell
  options.writer->flush();
  const auto values = read_summaries(dir.path());
  ASSERT_EQ(with_tag(values, "monitor/gpu0/utilization_percent").size(), 1u);
  EXPECT_EQ(
      with_tag(values, "monitor/gpu0/utilization_percent")[0].value.float_value(tb::kSimpleValue),
      87.0f);
  EXPECT_EQ(with_tag(values, "monitor/gpu0/memory_used_mib")[0].value.float_value(tb::kSimpleValue),
            3072.0f);
  EXPECT_EQ(with_tag(values, "monitor/gpu1/temperature_celsius").size(), 1u);
  EXPECT_TRUE(with_tag(values, "monitor/gpu1/power_watts").empty());

  const observe::ResourceSummary summary = monitor.summary();
  ASSERT_EQ(summary.gpus.size(), 2u);
  EXPECT_EQ(summary.gpus[0].peak_utilization_percent, 87.0);
  EXPECT_EQ(summary.gpus[0].peak_power_watts, 312.5);
}

TEST(ResourceMonitor, CountsAChildProcessTree) {
  // sh starts a busy child of its own: the tree's CPU is the grandchild's.
  const char* argv[] = {"sh", "-c", "sh -c 'while :; do :; done' & wait", nullptr};
  // In a process group of its own, so that one kill ends the shell and its busy child.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t shell = 0;
  const int spawned =
      posix_spawnp(&shell, "sh", nullptr, &attributes, const_cast<char**>(argv), environ);
  posix_spawnattr_destroy(&attributes);
  ASSERT_EQ(spawned, 0);
  ResourceMonitorOptions options;
  options.pid = shell;
  options.interval_seconds = 0.1;
  options.nvml_library = "libnvidia-ml-absent-for-the-test.so.1";
  ResourceMonitor monitor(options);
  monitor.start();
  // Until the busy child has used 0.3 CPU seconds, however long a loaded machine takes to give
  // them: the test waits for work done, not for a time.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    const auto times = observe::read_process_times(shell, true);
    if ((times && times->cpu_seconds >= 0.3) || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  monitor.stop();
  const observe::ResourceSummary tree = monitor.summary();
  // The shell alone only waits.
  options.include_children = false;
  ResourceMonitor shell_only(options);
  shell_only.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  shell_only.stop();
  const auto tree_times = observe::read_process_times(shell, true);
  const auto shell_times = observe::read_process_times(shell, false);
  kill(-shell, SIGKILL);
  waitpid(shell, nullptr, 0);
  ASSERT_TRUE(tree_times && shell_times);
  // The tree's CPU is the busy child's, which the shell's own figures leave out.
  EXPECT_GT(tree_times->cpu_seconds, shell_times->cpu_seconds + 0.1);
  EXPECT_GT(tree.peak_process_cpu_percent, 0.0);
  EXPECT_GT(tree.peak_process_cpu_percent, shell_only.summary().peak_process_cpu_percent);
  EXPECT_GT(tree.peak_rss_bytes, shell_only.summary().peak_rss_bytes);
}

TEST(ResourceMonitor, BadOptionsAreClearErrors) {
  EXPECT_NE(error_of([] {
              ResourceMonitor monitor({.interval_seconds = 0});
            }).find("interval_seconds must be a positive number"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ResourceMonitor monitor({.pid = 0x7FFFFFF0});
            }).find("no process 2147483632 to watch"),
            std::string::npos);
  ResourceMonitor monitor({.csv_path = "/nonexistent-folder/monitor.csv",
                           .nvml_library = "libnvidia-ml-absent-for-the-test.so.1"});
  EXPECT_THROW(monitor.start(), IoError);
}

}  // namespace
}  // namespace tandem::testing
