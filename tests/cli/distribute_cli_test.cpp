// The device, doctor, launch and --strategy parts of the `tandem` command end to end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "cli/cli_runner.h"
#include "support/xla_cpu.h"
#include "tandem/data.h"
#include "tandem/distribute.h"
#include "tandem/xla.h"

namespace tandem::testing {
namespace {

TEST(DevicesCommand, JsonCarriesEveryDeviceKindAndTheAutoChoice) {
  const CliResult result = run_cli({"devices", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  JsonChecker json(result.out);
  ASSERT_TRUE(json.valid()) << result.out;
  for (const char* key : {"cpu", "gpus", "gpu_backend_built", "gpu_status", "cuda", "nccl", "cudnn",
                          "tpu", "xla_cpu", "strategy_auto"}) {
    EXPECT_EQ(json.top_level().count(key), 1u) << key;
  }
  // XLA:CPU: its devices through the fetched plugin, or why not.
  const std::string& xla_cpu = json.top_level().at("xla_cpu");
  if (xla_cpu.find("\"usable\": true") != std::string::npos) {
    expect_contains(xla_cpu, "\"platform\": \"cpu\"");
    expect_contains(xla_cpu, "\"name\": \"cpu:0\"");
    expect_contains(xla_cpu, "PJRT C API 0.");
  } else {
    expect_contains(xla_cpu, "scripts/fetch-pjrt.sh");
  }
  expect_contains(json.top_level().at("cuda"), "\"runtime_version\"");
  expect_contains(json.top_level().at("tpu"), "\"searched\"");
  expect_contains(json.top_level().at("strategy_auto"), "\"kind\": \"one_device\"");
  expect_contains(json.top_level().at("strategy_auto"), "TPU: not available");
}

TEST(DevicesCommand, AFailingCudaDriverAndPluginAreNamed) {
  ScratchDir dir;
  const std::string broken = dir.file("libcuda.so.1");
  std::ofstream(broken) << "not a library\n";
  const std::string command =
      "TANDEM_CUDA_DRIVER=" + shell_quote(broken) + " TANDEM_PJRT_PLUGIN=/nonexistent/libtpu.so " +
      shell_quote(TANDEM_CLI_PATH) + " devices >" + shell_quote(dir.file("out")) + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0);
  const std::string out = slurp(dir.file("out"));
  expect_contains(out, "gpu    none: no NVIDIA driver: " + broken);
  expect_contains(out, "/nonexistent/libtpu.so");
  expect_contains(out, "strategy auto: OneDevice(cpu)");
}

TEST(DoctorCommand, ChecksEachLineWithAFix) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 20, 10, 28, 28);
  const CliResult ok = run_cli({"doctor", "--data-dir", dir.path().string(), "--logdir",
                                dir.file("logs"), "--checkpoint-dir", dir.file("checkpoints")});
  EXPECT_EQ(ok.status, 0) << ok.out << ok.err;
  for (const char* check : {"tandem", "cpu kernels", "cuda backend", "nvidia driver", "cudnn",
                            "nccl", "gpu", "tpu plugin", "xla-cpu", "xla-gpu", "mpi",
                            "data: fashion-mnist", "log folder", "checkpoint folder"}) {
    expect_contains(ok.out, std::string(check));
  }
  if (xla::build_info().built && !xla::fetched_cpu_plugin().empty()) {
    expect_contains(ok.out, "4 devices of XLA:cpu through ");
  }
  expect_contains(ok.out, "OK    data: fashion-mnist");
  expect_contains(ok.out, "OK    log folder");
  expect_contains(ok.out, "doctor: 0 failures");

  // A folder that cannot be written fails, a missing data set warns, each with its fix.
  const std::string read_only = dir.file("read-only");
  std::filesystem::create_directory(read_only);
  std::filesystem::permissions(
      read_only, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const bool root = geteuid() == 0;  // root writes anywhere: /proc stands in then
  const CliResult failing = run_cli({"doctor", "--data-dir", dir.file("nowhere"), "--logdir",
                                     root ? "/proc/tandem-logs" : read_only + "/logs", "--json"});
  EXPECT_EQ(failing.status, 1) << failing.out;
  JsonChecker json(failing.out);
  ASSERT_TRUE(json.valid()) << failing.out;
  EXPECT_EQ(json.top_level().at("failures"), "1");
  const std::size_t log_check = failing.out.find("\"check\": \"log folder\"");
  ASSERT_NE(log_check, std::string::npos) << failing.out;
  EXPECT_EQ(failing.out.find("\"status\": \"FAIL\"", log_check),
            failing.out.find("\"status\": ", log_check))
      << failing.out;
  expect_contains(failing.out, "--logdir");
  expect_contains(failing.out, "\"status\": \"WARN\"");
  expect_contains(failing.out, "install dataset-fashion-mnist");
}

TEST(TrainCommand, StrategyOptionsAreChecked) {
  const auto usage_error = [](const std::vector<std::string>& args, const std::string& part) {
    const CliResult result = run_cli(args);
    EXPECT_EQ(result.status, 2) << result.err;
    expect_contains(result.err, part);
  };
  usage_error({"train", "--strategy", "tpu-pod"},
              "unknown strategy 'tpu-pod' for --strategy; choose auto, cpu, gpu, gpu:N, mirrored, "
              "multi-worker, xla-cpu, xla-gpu or tpu");
  usage_error({"train", "--strategy", "cpu", "--replicas", "2"},
              "--replicas is for the XLA strategies (xla-cpu, xla-gpu, tpu), not --strategy cpu");
  usage_error({"train", "--replicas", "0"}, "--replicas must be a positive integer");
  usage_error({"train", "--lr-scaling", "sqrt"}, "unknown rule 'sqrt' for --lr-scaling");
  usage_error({"train", "--collective-timeout", "0"}, "--collective-timeout must be a positive");
  usage_error({"train", "--bucket-kib", "-1"}, "--bucket-kib must be a positive integer");
}

TEST(TrainCommand, AGpuThatDoesNotExistIsARuntimeError) {
  const CliResult result = run_cli({"train", "--strategy", "gpu:1", "--quiet"});
  EXPECT_EQ(result.status, 1);
  expect_contains(result.err, "tandem: error: --strategy gpu:1: cuda:1 does not exist");
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
}

TEST(TrainCommand, LinearScalingMultipliesTheRateByTheReplicas) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 64, 32, 28, 28);
  const CliResult result =
      run_cli({"train", "--model", "mlp", "--epochs", "1", "--threads", "1", "--strategy",
               "mirrored", "--lr-scaling", "linear", "--data-dir", dir.path().string()});
  ASSERT_EQ(result.status, 0) << result.err;
  // Mirrored without GPUs is one replica on the CPU: the rate stays.
  expect_contains(result.out, "strategy: Mirrored(cpu)");
  expect_contains(result.out, "Adam lr 0.001");
}

// The bar for XLA:CPU: the tutorial CNN, one epoch of the real Fashion-MNIST, the whole
// step compiled by XLA, at least 85% test accuracy.
TEST(TrainCommand, XlaCpuTrainsTheCnnToTutorialAccuracy) {
  SKIP_WITHOUT_XLA_CPU();
  if (!std::filesystem::exists(std::string(data::kFashionMnistDefaultDir) +
                               "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not in " << data::kFashionMnistDefaultDir
                 << " (make deps puts it there)";
  }
  ScratchDir dir;
  const std::string report = (dir.path() / "report.json").string();
  const CliResult result = run_cli(
      {"train", "--strategy", "xla-cpu", "--epochs", "1", "--threads", "2", "--report", report});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out, "strategy: Xla(cpu");
  // 60,000 = 1,875 batches of 32: one program.
  expect_contains(result.out, "xla: 1 program compiled in ");
  JsonChecker json(slurp(report));
  ASSERT_TRUE(json.valid());
  EXPECT_GE(std::stod(json.top_level().at("test_accuracy")), 0.85) << result.out;
}

TEST(TrainCommand, XlaReplicasSplitTheGlobalBatch) {
  SKIP_WITHOUT_XLA_CPU();
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 70, 32, 28, 28);
  const CliResult result = run_cli({"train", "--model", "mlp", "--epochs", "1", "--threads", "1",
                                    "--strategy", "xla-cpu", "--replicas", "4", "--batch-size", "8",
                                    "--data-dir", dir.path().string()});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out, "strategy: Xla(cpu, 4 replicas");
  expect_contains(result.out, "global batch 32 = 8 per replica x 4 replicas");
  // 70 = 2 x 32 + 6, and 6 examples do not split over 4 replicas.
  expect_contains(result.out,
                  "data: the last 6 training examples of each epoch are left out: that partial "
                  "batch does not split over 4 XLA replicas");
  expect_contains(result.out, "the whole step compiled by XLA");
  expect_contains(result.out, "test accuracy: ");
}

// --jit off: the same strategy's device, each op run alone (compiled once, then cached).
TEST(TrainCommand, XlaCpuWithJitOffRunsOpByOp) {
  SKIP_WITHOUT_XLA_CPU();
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 64, 32, 28, 28);
  const CliResult result =
      run_cli({"train", "--model", "mlp", "--epochs", "2", "--threads", "1", "--strategy",
               "xla-cpu", "--jit", "off", "--data-dir", dir.path().string()});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out, "device: xla:0 (XLA:cpu ");
  expect_contains(result.out, "), op by op\n");
  expect_contains(result.out, "strategy: OneDevice(xla:0)");
  expect_contains(result.out, ", eager step\n");
  expect_contains(result.out, " ops run one by one, from ");
  expect_contains(result.out, "test accuracy: ");

  const CliResult replicas =
      run_cli({"train", "--strategy", "xla-cpu", "--jit", "off", "--replicas", "2", "--quiet"});
  EXPECT_EQ(replicas.status, 2) << replicas.err;
  expect_contains(replicas.err, "--jit off runs --strategy xla-cpu op by op on one device");
}

TEST(TrainCommand, XlaStrategiesNameWhatIsMissing) {
  const CliResult plugin = run_cli({"train", "--strategy", "xla-cpu", "--pjrt-plugin",
                                    "/nonexistent/pjrt_plugin.so", "--quiet"});
  EXPECT_EQ(plugin.status, 1);
  expect_contains(plugin.err, "tandem: error: --strategy xla-cpu: ");
  expect_contains(plugin.err,
                  xla::build_info().built ? "/nonexistent/pjrt_plugin.so" : "has no XLA backend");
}

TEST(LaunchCommand, BuildsTheMpirunCommand) {
  const CliResult result = run_cli(
      {"launch", "-n", "3", "--dry-run", "--", "tandem", "train", "--strategy", "multi-worker"});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out, "mpirun -np 3 ");
  if (geteuid() == 0) expect_contains(result.out, "--allow-run-as-root");
  // This binary runs on every worker.
  expect_contains(result.out, std::string(TANDEM_CLI_PATH) + " train --strategy multi-worker\n");

  const CliResult hosts =
      run_cli({"launch", "-n", "4", "--hosts", "a:2,b:2", "--dry-run", "--", "./app"});
  expect_contains(hosts.out, "--host a:2,b:2 ./app");
  EXPECT_EQ(hosts.out.find("--oversubscribe"), std::string::npos);
}

TEST(LaunchCommand, MistakesAreUsageErrors) {
  EXPECT_EQ(run_cli({"launch", "--", "tandem", "devices"}).status, 2);
  const CliResult no_command = run_cli({"launch", "-n", "2"});
  EXPECT_EQ(no_command.status, 2);
  expect_contains(no_command.err, "no command to launch; give it after --");
  const CliResult zero = run_cli({"launch", "-n", "0", "--", "true"});
  expect_contains(zero.err, "-n must be a positive integer");
  const CliResult missing =
      run_cli({"launch", "-n", "2", "--mpirun", "/nonexistent/mpirun", "--", "true"});
  EXPECT_EQ(missing.status, 1);
  expect_contains(missing.err, "/nonexistent/mpirun not found: install Open MPI");
}

}  // namespace
}  // namespace tandem::testing
