// The cores this process may use: the cgroup CPU quota read from cgroup v1 and v2 files (written
// here as a container's would be) and rounded to threads. tests/cli/cpu_threads_cli_test.cpp runs
// the CLI in a cgroup of its own and under taskset.
#include "core/usable_cores.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "data/idx_files.h"

namespace tandem::core {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(UsableCores, ReadsTheSmallestCgroupV2QuotaOnThePath) {
  testing::ScratchDir dir;
  const fs::path root = dir.path() / "cgroup";
  write_file(root / "cgroup.controllers", "cpu memory\n");
  write_file(root / "cpu.max", "max 100000\n");  // the root has none
  write_file(root / "batch" / "cpu.max", "300000 100000\n");
  write_file(root / "batch" / "job" / "cpu.max", "150000 100000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("0::/batch/job\n", root).value(), 1.5);
  // A parent's quota binds a child without one, and the smaller of two wins.
  write_file(root / "batch" / "job" / "cpu.max", "max 100000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("0::/batch/job\n", root).value(), 3.0);
  write_file(root / "batch" / "cpu.max", "max 100000\n");
  EXPECT_EQ(cgroup_cpu_limit("0::/batch/job\n", root), std::nullopt);
  // v2 mounted beside v1 hierarchies, at cgroup/unified.
  const fs::path hybrid = dir.path() / "hybrid";
  write_file(hybrid / "unified" / "cgroup.controllers", "cpu\n");
  write_file(hybrid / "unified" / "job" / "cpu.max", "50000 100000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("1:name=systemd:/\n0::/job\n", hybrid).value(), 0.5);
}

TEST(UsableCores, ReadsTheSmallestCgroupV1Quota) {
  testing::ScratchDir dir;
  const fs::path root = dir.path() / "cgroup";
  const fs::path cpu = root / "cpu,cpuacct";
  write_file(cpu / "cpu.cfs_quota_us", "-1\n");
  write_file(cpu / "cpu.cfs_period_us", "100000\n");
  write_file(cpu / "docker" / "c1" / "cpu.cfs_quota_us", "200000\n");
  write_file(cpu / "docker" / "c1" / "cpu.cfs_period_us", "100000\n");
  const std::string cgroup = "5:memory:/docker/c1\n4:cpu,cpuacct:/docker/c1\n3:cpuset:/\n";
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit(cgroup, root).value(), 2.0);
  write_file(cpu / "docker" / "c1" / "cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(cgroup_cpu_limit(cgroup, root), std::nullopt);
  // A process outside any cpu hierarchy, and a machine without cgroups.
  EXPECT_EQ(cgroup_cpu_limit("5:memory:/docker/c1\n", root), std::nullopt);
  EXPECT_EQ(cgroup_cpu_limit("", dir.path() / "none"), std::nullopt);
}

TEST(UsableCores, AQuotaKeepsItsCpusThreadsBusy) {
  EXPECT_EQ(threads_for_cpu_limit(0.5), 1);
  EXPECT_EQ(threads_for_cpu_limit(1.0), 1);
  EXPECT_EQ(threads_for_cpu_limit(1.5), 2);
  EXPECT_EQ(threads_for_cpu_limit(4.0), 4);
}

}  // namespace
}  // namespace tandem::core
