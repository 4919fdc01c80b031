// The CPU kernels' automatic thread count as a user meets it: limited by the CPU affinity
// (taskset) and by a cgroup CPU quota (a cgroup this test makes), OMP_NUM_THREADS taken as a
// given count, and `tandem doctor` saying when other processes load the machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "cli/cli_runner.h"
#include "support/busy_processes.h"
#include "support/shell.h"
#include "tandem/runtime.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

// `tandem devices --json` run by `prefix` (a shell command line ending in a program that runs
// the rest), without the tests' OMP_NUM_THREADS unless `omp_threads` is given.
ShellResult devices_json(const std::string& prefix, const std::string& omp_threads = "") {
  const std::string environment =
      omp_threads.empty() ? "env -u OMP_NUM_THREADS" : "env OMP_NUM_THREADS=" + omp_threads;
  return run_capturing(prefix + " " + environment + " " + shell_quote(TANDEM_CLI_PATH) +
                       " devices --json 2>&1");
}

TEST(CpuThreadsCli, TheAffinityAndOmpNumThreadsSetTheCount) {
  if (usable_cpu_cores() < 2) GTEST_SKIP() << "one usable core: nothing to narrow";
  const ShellResult pinned = devices_json("taskset -c 0");
  ASSERT_EQ(pinned.status, 0) << pinned.output;
  expect_contains(pinned.output, "\"threads_available\": 1");
  expect_contains(pinned.output, "\"backend_threads\": 1");

  const ShellResult automatic = devices_json("");
  ASSERT_EQ(automatic.status, 0) << automatic.output;
  expect_contains(automatic.output, "\"backend_threads\": " + std::to_string(usable_cpu_cores()));
  // A count the user gave is used as given, even past the cores (with the usual warning
  // elsewhere).
  const ShellResult given = devices_json("", "3");
  ASSERT_EQ(given.status, 0) << given.output;
  expect_contains(given.output, "\"backend_threads\": 3");
}

// A cgroup of this test's own with a CPU quota, removed at the end; `reason` says why not.
class QuotaCgroup {
 public:
  explicit QuotaCgroup(long quota_us) {
    constexpr long kPeriodUs = 100000;
    const std::string name = "tandem-test-" + std::to_string(::getpid());
    const fs::path root = "/sys/fs/cgroup";
    std::error_code error;
    if (fs::exists(root / "cgroup.controllers")) {  // v2
      // The machine's own setting: a test does not turn controllers on for the whole machine.
      if (slurp((root / "cgroup.subtree_control").string()).find("cpu") == std::string::npos) {
        reason_ = "the cpu controller is not enabled for " + root.string() +
                  "'s children (cgroup.subtree_control)";
        return;
      }
      path_ = root / name;
      if (!fs::create_directory(path_, error)) {
        reason_ = "cannot make a cgroup under " + root.string() + ": " + error.message();
        return;
      }
      std::ofstream(path_ / "cpu.max") << quota_us << " " << kPeriodUs;
      if (slurp((path_ / "cpu.max").string()).find(std::to_string(quota_us)) != 0) {
        reason_ = "the cpu controller is not enabled for " + path_.string();
      }
    } else if (fs::exists(root / "cpu" / "cpu.cfs_quota_us")) {  // v1
      path_ = root / "cpu" / name;
      if (!fs::create_directory(path_, error)) {
        reason_ = "cannot make a cgroup under " + (root / "cpu").string() + ": " + error.message();
        return;
      }
      std::ofstream(path_ / "cpu.cfs_period_us") << kPeriodUs;
      std::ofstream(path_ / "cpu.cfs_quota_us") << quota_us;
      if (slurp((path_ / "cpu.cfs_quota_us").string()).find(std::to_string(quota_us)) != 0) {
        reason_ = "cannot set a quota in " + path_.string();
      }
    } else {
      reason_ = "no cgroup cpu controller under " + root.string();
    }
  }
  ~QuotaCgroup() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove(path_, ignored);  // empty again: its process has exited
  }
  QuotaCgroup(const QuotaCgroup&) = delete;
  QuotaCgroup& operator=(const QuotaCgroup&) = delete;

  const std::string& reason() const { return reason_; }
  // A shell prefix that moves itself into the cgroup, then runs the rest.
  std::string enter() const {
    return "sh -c 'echo $$ > " + (path_ / "cgroup.procs").string() + " && exec \"$@\"' sh";
  }

 private:
  fs::path path_;
  std::string reason_;
};

TEST(CpuThreadsCli, ACgroupQuotaSetsTheCount) {
  if (usable_cpu_cores() < 2) GTEST_SKIP() << "one usable core: nothing to narrow";
  // One CPU's quota gives one thread; a CPU and a half keeps two busy (rounded up).
  for (const auto& [quota_us, threads] : {std::pair{100000L, 1}, std::pair{150000L, 2}}) {
    SCOPED_TRACE(quota_us);
    const QuotaCgroup cgroup(quota_us);
    if (!cgroup.reason().empty()) GTEST_SKIP() << cgroup.reason();
    const ShellResult limited = devices_json(cgroup.enter());
    ASSERT_EQ(limited.status, 0) << limited.output;
    expect_contains(limited.output, "\"threads_available\": " + std::to_string(threads));
    expect_contains(limited.output, "\"backend_threads\": " + std::to_string(threads));
  }
}

TEST(DoctorCommand, SaysWhenOtherProcessesLoadTheMachine) {
  const CliResult result = [] {
    const BusyProcesses busy(usable_cpu_cores());
    return run_cli({"doctor"});
  }();
  expect_contains(result.out, "WARN  machine load        ");
  expect_contains(result.out, "other processes are using the CPU");
}

}  // namespace
}  // namespace tandem::testing
