// A small matrix run on this machine: measured rows with their statistics, MFU and cost, an
// absent device skipped with its reason, estimates kept apart, and peers through a stand-in
// run_peer.py that follows its contract (exit 3: not installed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "data/idx_files.h"
#include "tandem/bench.h"
#include "tandem/cuda.h"
#include "tandem/xla.h"

namespace tandem::bench {
namespace {

using tandem::testing::ScratchDir;

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing '" << part << "' in:\n" << text;
}

BenchOptions tiny_options() {
  BenchOptions options;
  options.models = {"mlp"};
  options.batch_sizes = {16};
  options.warmup_steps = 2;
  options.steps = 4;
  options.windows = 2;
  options.threads = 1;
  options.estimates = {"A100", "TPU v5e"};
  options.cpu_name = "test cpu";
  return options;
}

// XLA:CPU as a bench device: the same model trained through the Xla strategy, beside Tandem's
// own kernels, with the eager row's FLOPs (the profiler sees no op inside the plugin).
TEST(BenchRun, XlaCpuIsMeasuredBesideTheCpu) {
  if (!xla::build_info().built) GTEST_SKIP() << xla::build_info().reason;
  if (xla::fetched_cpu_plugin().empty())
    GTEST_SKIP() << "no XLA:CPU plugin: run scripts/fetch-pjrt.sh";
  BenchOptions options = tiny_options();
  options.devices = {"cpu", "xla-cpu", "tpu"};
  options.estimates.clear();
  std::ostringstream log;
  const Report report = run(options, log);
  ASSERT_EQ(report.rows.size(), 2u) << log.str();
  const Row& eager = report.rows[0].device == "cpu" ? report.rows[0] : report.rows[1];
  const Row& lowered = report.rows[0].device == "cpu" ? report.rows[1] : report.rows[0];
  EXPECT_EQ(lowered.device, "xla-cpu");
  EXPECT_EQ(lowered.device_name, "test cpu");
  EXPECT_GT(lowered.samples_per_second, 0.0);
  EXPECT_EQ(lowered.step_seconds.size(), 8u);
  EXPECT_EQ(lowered.flops_per_step, eager.flops_per_step);
  EXPECT_GT(lowered.mfu, 0.0);
  EXPECT_GT(lowered.price_per_hour, 0.0);
  EXPECT_GT(lowered.compile_seconds, 0.0);
  EXPECT_GT(lowered.first_step_seconds, lowered.compile_seconds);
  EXPECT_EQ(eager.compile_seconds, -1.0);
  // No TPU here: skipped with the reason, never initialised.
  ASSERT_EQ(report.skipped.size(), 1u);
  expect_contains(report.skipped[0].reason, "no TPU: no TPU on the PCI bus");
}

TEST(BenchRun, MeasuresPresentDevicesAndSkipsAbsentOnesWithTheReason) {
  BenchOptions options = tiny_options();
  options.devices = {"cpu", "cuda:7"};
  options.precisions = {"fp32", "bf16"};
  std::ostringstream log;
  const Report report = run(options, log);
  std::vector<const Row*> measured;
  for (const Row& row : report.rows) {
    if (row.kind == "measured") measured.push_back(&row);
  }
  ASSERT_EQ(measured.size(), 2u) << log.str();
  for (const Row* row : measured) {
    EXPECT_EQ(row->device, "cpu");
    EXPECT_EQ(row->device_name, "test cpu");
    EXPECT_EQ(row->threads, 1);
    EXPECT_EQ(row->step_seconds.size(), 8u);  // 2 windows of 4 steps, warm-up left out
    EXPECT_EQ(row->window_samples_per_second.size(), 2u);
    EXPECT_GT(row->samples_per_second, 0.0);
    EXPECT_LE(row->step.p10, row->step.median);
    EXPECT_LE(row->step.median, row->step.p90);
    // A training step: the forward products, their backward ones (both for the second layer,
    // the weights' only for the first: the images need no gradient) and Adam.
    const double forward = 2.0 * 16 * (784 * 128 + 128 * 10);
    EXPECT_GT(row->flops_per_step, 2 * forward);
    EXPECT_LT(row->flops_per_step, 3 * forward);
    EXPECT_GT(row->peak_flops, 1e8);
    EXPECT_GT(row->memory_bandwidth, 1e8);
    EXPECT_GT(row->mfu, 0.0);
    EXPECT_GT(row->peak_memory_bytes, 16 * 784 * 4);
    EXPECT_GE(row->device_utilization_percent, 0.0);
    EXPECT_GE(row->machine_cpu_percent, 0.0);
    // The machine's CPU use less this run's: within the machine's cores (a unit slip, percent
    // for cores, would pass it by a hundredfold).
    EXPECT_GE(row->other_cpu_cores, 0.0);
    EXPECT_LE(row->other_cpu_cores, static_cast<double>(std::thread::hardware_concurrency()));
    EXPECT_GE(row->input_wait_share, 0.0);
    EXPECT_LT(row->input_wait_share, 1.0);
    EXPECT_EQ(row->epoch_examples, 60000);
    EXPECT_NEAR(row->epoch_seconds_projected, 3750 * row->step.median, 1e-9);
    EXPECT_NEAR(row->price_per_hour, 0.031611, 1e-12);  // one core
    EXPECT_NEAR(row->cost.per_million_samples,
                row->price_per_hour / 3600 * row->step.median * 1e6 / 16, 1e-12);
    EXPECT_FALSE(row->ops.empty());
  }
  EXPECT_GE(report.fastest, 0);
  EXPECT_GE(report.cheapest, 0);
  if (!cuda::is_available()) {
    int absent = 0;
    for (const Skipped& skip : report.skipped) {
      if (skip.what.find("cuda:7") == std::string::npos) continue;
      ++absent;
      EXPECT_EQ(skip.kind, "measured");
      expect_contains(skip.reason, "no CUDA device: ");
    }
    EXPECT_EQ(absent, 2);
    expect_contains(log.str(), "bench: skipped mlp fp32 batch 16 on cuda:7: no CUDA device: ");
  }
  // Estimates: A100 for both precisions; TPU v5e for bf16 only (no published fp32 rate).
  int estimates = 0;
  for (const Row& row : report.rows) {
    if (row.kind != "estimate") continue;
    ++estimates;
    EXPECT_GE(row.calibration_ratio, 1.0);
    EXPECT_EQ(row.calibrated_on, "cpu (test cpu)");
  }
  EXPECT_EQ(estimates, 3);
}

TEST(BenchRun, EpochModeTimesFullPassesOverADataSet) {
  ScratchDir dir;
  tandem::testing::write_tiny_fashion_mnist(dir.path(), 96, 16, 28, 28);
  BenchOptions options = tiny_options();
  options.epochs = 2;
  options.data_dir = dir.path().string();
  options.estimates.clear();
  std::ostringstream log;
  const Report report = run(options, log);
  ASSERT_EQ(report.rows.size(), 1u) << log.str();
  const Row& row = report.rows[0];
  EXPECT_EQ(row.epoch_seconds.size(), 2u);
  EXPECT_EQ(row.epoch_examples, 96);
  EXPECT_EQ(row.step_seconds.size(), 2u * 6 - 2);  // 6 steps an epoch, 2 warm-up
}

TEST(BenchRun, DataSetsFitImageModelsOnly) {
  BenchOptions options = tiny_options();
  options.models = {"transformer"};
  options.epochs = 1;
  options.data_dir = "/nonexistent";
  std::ostringstream log;
  try {
    run(options, log);
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& error) {
    expect_contains(error.what(), "--data holds Fashion-MNIST/MNIST images");
  }
}

TEST(BenchRun, PeersFollowRunPeerContract) {
  ScratchDir dir;
  const std::string script = dir.file("run_peer.py");
  const std::string arguments = dir.file("arguments");
  // A stand-in for bench/peers/run_peer.py: tf "measures" 4 steps of 0.01-0.04 s; torch is
  // not installed.
  std::ofstream(script) << "import json, sys\n"
                           "args = sys.argv[1:]\n"
                           "open('"
                        << arguments
                        << "', 'a').write(' '.join(args) + '\\n')\n"
                           "framework = args[args.index('--framework') + 1]\n"
                           "if framework == 'torch':\n"
                           "    print('torch is not installed: No module named torch', "
                           "file=sys.stderr)\n"
                           "    sys.exit(3)\n"
                           "batch = int(args[args.index('--batch-size') + 1])\n"
                           "steps = [0.01, 0.02, 0.03, 0.04]\n"
                           "print('some log line')\n"
                           "print(json.dumps({'framework': 'tf', 'version': '2.15.1', "
                           "'model': 'mlp', 'batch_size': batch, 'precision': 'fp32', "
                           "'threads': 1, 'step_seconds': steps, 'samples_per_second': "
                           "batch / 0.025}))\n";
  BenchOptions options = tiny_options();
  options.estimates.clear();
  options.peers = {"tf", "torch"};
  options.peer_python = "python3";
  options.peer_script = script;
  std::ostringstream log;
  const Report report = run(options, log);
  ASSERT_EQ(report.rows.size(), 2u) << log.str();
  const Row& tandem_row = report.rows[0];
  const Row& peer = report.rows[1];
  EXPECT_EQ(peer.kind, "peer");
  EXPECT_EQ(peer.framework, "tf");
  EXPECT_EQ(peer.framework_version, "2.15.1");
  EXPECT_DOUBLE_EQ(peer.samples_per_second, 16 / 0.025);
  EXPECT_DOUBLE_EQ(peer.step.median, 0.025);
  EXPECT_NEAR(peer.tandem_ratio, tandem_row.samples_per_second / (16 / 0.025), 1e-9);
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_EQ(report.skipped[0].kind, "peer");
  expect_contains(report.skipped[0].reason,
                  "torch is not installed: torch is not installed: No module named torch");
  std::ifstream recorded(arguments);
  std::string first;
  std::getline(recorded, first);
  expect_contains(first,
                  "--framework tf --model mlp --batch-size 16 --precision fp32 "
                  "--warmup-steps 2 --steps 8 --threads 1 --classes 10");
  // A missing script is a skip with the reason, not a failure.
  options.peer_script = dir.file("missing.py");
  options.peers = {"tf"};
  const Report without = run(options, log);
  ASSERT_EQ(without.skipped.size(), 1u);
  expect_contains(without.skipped[0].reason, "missing.py not found");
}

}  // namespace
}  // namespace tandem::bench
