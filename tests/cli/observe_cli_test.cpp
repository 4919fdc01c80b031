// `tandem train --logdir/--profile` and `tandem monitor`, run as a user runs them.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/cli_runner.h"

namespace tandem::testing {
namespace {

bool has_event_file(const std::filesystem::path& folder) {
  if (!std::filesystem::is_directory(folder)) return false;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) return true;
  }
  return false;
}

TEST(ObserveCli, TrainWritesLogsMonitorSamplesAndAProfile) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 64, 32, 28, 28);
  const std::string logdir = dir.file("logs");
  const CliResult result =
      run_cli({"train", "--model", "mlp", "--epochs", "2", "--batch-size", "16", "--threads", "1",
               "--quiet", "--data-dir", dir.path().string(), "--logdir", logdir,
               "--monitor-interval", "0.2", "--profile", "--profile-steps", "1:2"});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out, "logs: " + logdir + " (view them with: tensorboard --logdir ");
  expect_contains(result.out, "monitor: ");
  expect_contains(result.out, "process CPU ");
  expect_contains(result.out, "profile: 2 steps, ");
  expect_contains(result.out, "GFLOP/s");
  expect_contains(result.out, "matmul");
  expect_contains(result.out,
                  "trace: " + logdir + "/trace.json (open it at https://ui.perfetto.dev)");
  EXPECT_TRUE(has_event_file(logdir));
  EXPECT_TRUE(has_event_file(logdir + "/train"));
  const std::string monitor = slurp(logdir + "/monitor.csv");
  EXPECT_TRUE(monitor.starts_with("wall_time,elapsed_seconds,process_cpu_percent,rss_bytes,"))
      << monitor;
  JsonChecker trace(slurp(logdir + "/trace.json"));
  EXPECT_TRUE(trace.valid());
  EXPECT_EQ(trace.top_level().count("traceEvents"), 1u);
}

TEST(ObserveCli, AProfileWindowAfterTheLastStepSaysSo) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 32, 16, 28, 28);
  const CliResult result =
      run_cli({"train", "--model", "mlp", "--epochs", "1", "--batch-size", "16", "--quiet",
               "--data-dir", dir.path().string(), "--profile", "--trace", dir.file("trace.json")});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out,
                  "profile: no step was profiled: training ended before step 20; pass an earlier "
                  "--profile-steps, e.g. 0:4");
  EXPECT_FALSE(std::filesystem::exists(dir.file("trace.json")));
}

TEST(ObserveCli, ObserveOptionsWithoutWhatTheyNeedAreUsageErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"train", "--log-every", "5"}, "--log-every only matters with --logdir DIR; add --logdir"},
      {{"train", "--monitor-interval", "2"}, "--monitor-interval only matters with --logdir"},
      {{"train", "--trace", "t.json"}, "--trace only matters with --profile; add --profile"},
      {{"train", "--profile-steps", "1:2"}, "--profile-steps only matters with --profile"},
      {{"train", "--profile", "--profile-steps", "5:2"},
       "--profile-steps 5:2: the last step comes before the first"},
      {{"train", "--profile", "--profile-steps", "a:2"},
       "--profile-steps must be a non-negative integer, got 'a'"},
      {{"train", "--logdir", "x", "--monitor-interval", "-1"},
       "--monitor-interval must be a positive number, got '-1'"},
      {{"train", "--profile", "--trace", "/nonexistent/dir/trace.json"},
       "--trace '/nonexistent/dir/trace.json': directory /nonexistent/dir does not exist"},
  };
  for (const auto& [args, message] : cases) {
    const CliResult result = run_cli(args);
    EXPECT_EQ(result.status, 2) << result.err;
    expect_contains(result.err, message);
  }
}

TEST(ObserveCli, MonitorRunsTheCommandAndExitsWithItsStatus) {
  ScratchDir dir;
  const std::string csv = dir.file("samples.csv");
  const CliResult result =
      run_cli({"monitor", "--interval", "0.1", "--csv", csv, "--logdir", dir.file("logs"), "--",
               "sh", "-c", "echo from the command; sleep 0.5; exit 3"});
  EXPECT_EQ(result.status, 3) << result.err;
  EXPECT_EQ(result.out, "from the command\n");
  expect_contains(result.err, "monitor: ");
  expect_contains(result.err, "samples over ");
  expect_contains(result.err, "GPUs: ");
  const std::string samples = slurp(csv);
  EXPECT_TRUE(samples.starts_with("wall_time,elapsed_seconds,process_cpu_percent,")) << samples;
  EXPECT_GE(std::count(samples.begin(), samples.end(), '\n'), 4);  // header and >= 3 samples
  EXPECT_TRUE(has_event_file(dir.file("logs")));
  // A command that a signal ends: 128 + the signal, as a shell reports it.
  const CliResult killed = run_cli({"monitor", "--quiet", "--", "sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(killed.status, 128 + 15) << killed.err;
  EXPECT_EQ(killed.err, "");
}

TEST(ObserveCli, MonitorMistakesAreClearErrors) {
  const CliResult no_command = run_cli({"monitor"});
  EXPECT_EQ(no_command.status, 2);
  expect_contains(no_command.err, "no command to monitor; give it after --");
  const CliResult positional = run_cli({"monitor", "ls"});
  EXPECT_EQ(positional.status, 2);
  expect_contains(positional.err, "takes no argument 'ls'; put the command to run after --");
  const CliResult missing = run_cli({"monitor", "--", "/nonexistent/command"});
  EXPECT_EQ(missing.status, 1);
  expect_contains(missing.err, "cannot run '/nonexistent/command': No such file or directory");
  const CliResult help = run_cli({"monitor", "--help"});
  EXPECT_EQ(help.status, 0);
  expect_contains(help.out, "tandem monitor [options] -- COMMAND [ARGS...]");
}

}  // namespace
}  // namespace tandem::testing
