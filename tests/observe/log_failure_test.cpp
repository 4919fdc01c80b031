// Logs never stop a run: a full disk under the log folder, during training or after it, is
// reported once, the logs stop, and fit, the monitor's summary and every destructor go on
// without throwing. The disk fills through core's fault-injection seam, for the log folder only.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "data/idx_files.h"
#include "support/shell.h"
#include "support/write_fault.h"
#include "tandem/nn.h"
#include "tandem/observe.h"
#include "tandem/random.h"

namespace tandem::testing {
namespace {

struct SmallRun {
  Tensor images;  // (32, 6, 6, 1)
  Tensor labels;  // (32,)
  nn::Model model;
};

SmallRun small_mlp() {
  manual_seed(11);
  Tensor images = random_uniform({32, 6, 6, 1}, 0.0, 1.0);
  std::vector<std::int32_t> labels(32);
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int32_t>(i % 4);
  nn::Sequential layers({nn::Flatten(), nn::Dense(8, "relu"), nn::Dense(4)}, "small");
  layers.build({6, 6, 1});
  nn::Model model(std::move(layers));
  model.compile({.optimizer = train::Adam(0.01),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  return {images, Tensor::from_vector(labels, {32}), std::move(model)};
}

// The TensorBoard callback and the resource monitor of one log folder, sharing one guard, as
// `tandem train --logdir` sets them up.
struct Logs {
  std::shared_ptr<observe::LogGuard> guard;
  std::shared_ptr<observe::TensorBoard> board;
  std::unique_ptr<observe::ResourceMonitor> monitor;

  explicit Logs(const std::string& folder)
      : guard(std::make_shared<observe::LogGuard>("the logs in " + folder)) {
    observe::TensorBoardOptions options;
    options.log_dir = folder;
    options.update_freq = 1;
    options.hparams = {{"batch_size", 4.0}};
    // Written every few milliseconds, so that the disk fills while fit runs.
    options.writer.flush_seconds = 0.005;
    options.writer.guard = guard;
    board = std::make_shared<observe::TensorBoard>(options);
    observe::ResourceMonitorOptions sampling;
    sampling.interval_seconds = 0.01;
    sampling.csv_path = folder + "/monitor.csv";
    sampling.writer = board->run_writer();
    sampling.guard = guard;
    sampling.nvml_library = "libnvidia-ml-absent-for-the-test.so.1";
    monitor = std::make_unique<observe::ResourceMonitor>(sampling);
    monitor->start();
  }
};

TEST(LogFailure, AFullLogDiskDuringFitIsReportedOnceAndTrainingGoesOn) {
  ScratchDir dir;
  const std::string folder = dir.file("logs");
  SmallRun run = small_mlp();
  ::testing::internal::CaptureStderr();
  train::History history;
  {
    Logs logs(folder);
    // The disk under the log folder fills after the first few kilobytes.
    ScopedWriteFault full({.after_bytes = 4096, .error = ENOSPC, .path_prefix = folder});
    history = run.model.fit(
        run.images, run.labels,
        {.batch_size = 4, .epochs = 6, .verbose = 0, .callbacks = {logs.board}, .seed = 1});
    logs.monitor->stop();
    EXPECT_TRUE(logs.guard->stopped());
    EXPECT_FALSE(logs.board->logging());
    EXPECT_NE(logs.guard->failure().find("ENOSPC"), std::string::npos) << logs.guard->failure();
    // The monitor's summary still has every sample, taken after the logs stopped as well.
    EXPECT_GE(logs.monitor->summary().samples, 1);
  }  // the writers, the callback and the monitor go here: none throws, none reports again
  const std::string errors = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(history.history().at("loss").size(), 6u) << "training stopped with the logs";
  EXPECT_EQ(occurrences(errors, "logging stopped for the logs in " + folder), 1u) << errors;
  EXPECT_EQ(occurrences(errors, "tandem: warning:"), 2u)
      << "one failure, one report (the error and what it stops):\n"
      << errors;
  EXPECT_NE(errors.find("training goes on"), std::string::npos) << errors;
}

TEST(LogFailure, AFullLogDiskAfterTrainingLetsTheRunFinish) {
  ScratchDir dir;
  const std::string folder = dir.file("logs");
  SmallRun run = small_mlp();
  ::testing::internal::CaptureStderr();
  {
    Logs logs(folder);
    run.model.fit(
        run.images, run.labels,
        {.batch_size = 8, .epochs = 2, .verbose = 0, .callbacks = {logs.board}, .seed = 1});
    // Training done; the last writes (the monitor's last sample, the flushes, the closes) meet a
    // full disk, inside stop() and the destructors.
    ScopedWriteFault full({.after_bytes = 0, .error = ENOSPC, .path_prefix = folder});
    logs.board->run_writer()->add_scalar("test_accuracy", 0.5, 0);
    logs.board->run_writer()->flush();
    EXPECT_TRUE(logs.guard->stopped());
  }
  const std::string errors = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(occurrences(errors, "logging stopped for"), 1u) << errors;
}

TEST(LogFailure, AMonitorStoppedByItsDestructorOnAFullDiskDoesNotThrow) {
  ScratchDir dir;
  ::testing::internal::CaptureStderr();
  {
    observe::ResourceMonitorOptions options;
    options.interval_seconds = 0.01;
    options.csv_path = dir.file("monitor.csv");
    options.writer = std::make_shared<observe::SummaryWriter>(dir.path().string());
    options.nvml_library = "libnvidia-ml-absent-for-the-test.so.1";
    observe::ResourceMonitor monitor(options);
    monitor.start();
    ScopedWriteFault full({.after_bytes = 0, .error = ENOSPC, .path_prefix = dir.path()});
    monitor.sample_now();
    EXPECT_GE(monitor.summary().samples, 1);
  }  // stop() and the writer's flush inside the destructor
  const std::string errors = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(errors.find("logging stopped for the resource monitor's logs"), std::string::npos)
      << errors;
}

TEST(LogFailure, ATraceThatCannotBeWrittenIsAWarningNotTheEndOfTraining) {
  ScratchDir dir;
  const std::string trace = dir.file("trace.json");
  SmallRun run = small_mlp();
  auto profiler = std::make_shared<observe::Profiler>();
  auto callback = std::make_shared<observe::ProfilerCallback>(profiler, 1, 2, trace);
  ::testing::internal::CaptureStderr();
  train::History history;
  {
    ScopedWriteFault full({.after_bytes = 10, .error = ENOSPC, .path_prefix = dir.path()});
    history = run.model.fit(
        run.images, run.labels,
        {.batch_size = 4, .epochs = 2, .verbose = 0, .callbacks = {callback}, .seed = 1});
  }
  const std::string errors = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(history.history().at("loss").size(), 2u);
  EXPECT_TRUE(callback->finished());
  EXPECT_FALSE(callback->trace_written());
  EXPECT_FALSE(std::filesystem::exists(trace)) << "a half-written trace was left";
  EXPECT_NE(errors.find("logging stopped for the profiler's trace"), std::string::npos) << errors;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    ADD_FAILURE() << "left behind: " << entry.path();
}

}  // namespace
}  // namespace tandem::testing
