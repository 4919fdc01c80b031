// Google's libtpu for real, on a machine without a TPU: installed from PyPI into the project
// virtualenv (scripts/python-env.sh tpu; its licence forbids shipping it) and loaded by the
// `tandem` binary only inside a network namespace with no network and with TPU_SKIP_MDS_QUERY=1,
// so that it never sends a request to the cloud metadata server. A fake PCI tree with one of
// Google's devices (TANDEM_PCI_DEVICES_DIR) makes Tandem try the TPU; libtpu then finds no chip
// and says so, which Tandem must report with its reason, and --strategy auto must step past.
// libtpu lets one process at a time have the TPU (an fcntl lock on /tmp/libtpu_lockfile): these
// tests run at once under ctest -j, so the ones that start libtpu set ALLOW_MULTIPLE_LIBTPU_LOAD=1,
// which makes libtpu take no lock, and one test holds the lock itself to see Tandem name holder.
#include <glob.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/cli_runner.h"
#include "support/file_lock_holder.h"
#include "support/python_env.h"
#include "tandem/xla.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

// libtpu.so in the virtualenv of `python` (.../bin/python), or "".
std::string libtpu_of(const std::string& python) {
  const std::string pattern = fs::path(python).parent_path().parent_path().string() +
                              "/lib/python3*/site-packages/libtpu/libtpu.so";
  glob_t matches{};
  std::string found;
  if (glob(pattern.c_str(), 0, nullptr, &matches) == 0 && matches.gl_pathc > 0) {
    found = matches.gl_pathv[0];
  }
  globfree(&matches);
  return found;
}

// How this system makes a network namespace of its own (no interface but a down loopback): as
// root, or as root of a user namespace; "" when it cannot.
std::string network_namespace_command() {
  for (const char* unshare : {"unshare -n", "unshare -rn"}) {
    if (run_shell(std::string(unshare) + " true >/dev/null 2>&1") == 0) return unshare;
  }
  return "";
}

// A sysfs PCI tree holding one TPU v5e chip (Google's vendor id).
void write_fake_tpu_bus(const fs::path& root) {
  const fs::path chip = root / "0000:00:04.0";
  fs::create_directories(chip);
  std::ofstream(chip / "vendor") << "0x1ae0\n";
  std::ofstream(chip / "device") << "0x0063\n";
  std::ofstream(chip / "class") << "0x120000\n";
}

class LibtpuWithoutATpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!xla::build_info().built) GTEST_SKIP() << xla::build_info().reason;
    unshare_ = network_namespace_command();
    if (unshare_.empty()) {
      GTEST_SKIP() << "this system makes no network namespace (unshare -n and unshare -rn "
                      "failed), and libtpu is never loaded outside one";
    }
    const PythonEnv& env = python_env("tpu");
    if (!env.skip_reason.empty()) GTEST_SKIP() << env.skip_reason;
    ASSERT_TRUE(env.failure.empty()) << env.failure;
    libtpu_ = libtpu_of(env.python);
    ASSERT_FALSE(libtpu_.empty()) << "no libtpu/libtpu.so in the virtualenv of " << env.python;
    write_fake_tpu_bus(dir_.path() / "pci");
    fs::create_directories(dir_.path() / "data");
    write_tiny_fashion_mnist(dir_.path() / "data", 64, 32, 28, 28);
  }

  // `tandem ARGS` with libtpu as the plugin and the fake bus, without network; libtpu's
  // lock is taken and looked at only with `lock`.
  ShellResult tandem(const std::string& args, bool lock = false) const {
    const std::string command =
        std::string(lock ? "" : "ALLOW_MULTIPLE_LIBTPU_LOAD=1 ") +
        "TANDEM_PJRT_PLUGIN=" + shell_quote(libtpu_) +
        " TANDEM_PCI_DEVICES_DIR=" + shell_quote((dir_.path() / "pci").string()) + " " +
        shell_quote(TANDEM_CLI_PATH) + " " + args;
    return run_capturing("TPU_SKIP_MDS_QUERY=1 timeout 120 " + unshare_ + " sh -c " +
                         shell_quote(command) + " 2>&1");
  }

  std::string data() const { return shell_quote((dir_.path() / "data").string()); }

  ScratchDir dir_;
  std::string unshare_;
  std::string libtpu_;
};

TEST_F(LibtpuWithoutATpu, StrategyTpuReportsLibtpusReason) {
  const ShellResult result = tandem("train --strategy tpu --epochs 1 --quiet --data-dir " + data());
  EXPECT_EQ(result.status, 1) << result.output;
  expect_contains(result.output, "tandem: error: --strategy tpu: " + libtpu_ +
                                     ": PJRT_Client_Create: TPU initialization failed: No "
                                     "jellyfish device found");
}

TEST_F(LibtpuWithoutATpu, AutoLogsTheTpuFailureAndTrainsOnTheCpu) {
  const ShellResult result =
      tandem("train --model mlp --epochs 1 --threads 1 --data-dir " + data());
  ASSERT_EQ(result.status, 0) << result.output;
  expect_contains(result.output, "strategy: OneDevice(cpu), chosen by --strategy auto");
  expect_contains(result.output, "tpu failed to start: ");
  expect_contains(result.output, "No jellyfish device found");
  expect_contains(result.output, "test accuracy: ");
}

// Another process has the TPU (a notebook's kernel, a run still going): Tandem names it from
// libtpu's lock before starting libtpu, whose own message would be to delete the lock.
TEST_F(LibtpuWithoutATpu, ATpuInUseNamesTheProcessThatHasIt) {
  const FileLockHolder holder("/tmp/libtpu_lockfile");
  const std::string in_use =
      "the TPU is in use by another process: PID " + std::to_string(holder.pid()) + " (";
  const ShellResult refused =
      tandem("train --strategy tpu --epochs 1 --quiet --data-dir " + data(), true);
  EXPECT_EQ(refused.status, 1) << refused.output;
  expect_contains(refused.output,
                  "tandem: error: --strategy tpu: the TPU strategy is not available: " + in_use);
  expect_contains(refused.output, "holds libtpu's lock /tmp/libtpu_lockfile");

  const ShellResult fallback =
      tandem("train --model mlp --epochs 1 --threads 1 --data-dir " + data(), true);
  ASSERT_EQ(fallback.status, 0) << fallback.output;
  expect_contains(fallback.output, "  TPU: not available: " + in_use);
  expect_contains(fallback.output, "strategy: OneDevice(cpu), chosen by --strategy auto");

  const ShellResult devices = tandem("devices", true);
  ASSERT_EQ(devices.status, 0) << devices.output;
  expect_contains(devices.output, "tpu    none: " + in_use);
}

// libtpu compiles Tandem's training step (batch norm, dropout's i64 Philox, Adam's f64 schedule)
// for a TPU v5e 2x2 ahead of time, without a TPU: what a TPU would be given is one it takes.
TEST_F(LibtpuWithoutATpu, CompilesATrainingStepForATpuTopologyAheadOfTime) {
  const std::string command = "ALLOW_MULTIPLE_LIBTPU_LOAD=1 " +
                              shell_quote(TANDEM_TPU_AOT_CHECK_PATH) + " " + shell_quote(libtpu_) +
                              " v5e:2x2";
  const ShellResult result = run_capturing("TPU_SKIP_MDS_QUERY=1 timeout 300 " + unshare_ +
                                           " sh -c " + shell_quote(command) + " 2>&1");
  ASSERT_EQ(result.status, 0) << result.output;
  expect_contains(result.output, "compiled for v5e:2x2: ");
}

TEST_F(LibtpuWithoutATpu, DevicesShowsThePluginAndItsApi) {
  const ShellResult result = tandem("devices");
  ASSERT_EQ(result.status, 0) << result.output;
  expect_contains(result.output, "  chip       PCI 0000:00:04.0, device 0x0063");
  expect_contains(result.output, "  plugin     " + libtpu_ + ", PJRT C API 0.");
}

}  // namespace
}  // namespace tandem::testing
