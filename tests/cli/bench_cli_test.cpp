// `tandem bench`, run as a user runs it: a tiny matrix with an absent device, the report files,
// compare, the price table's errors and the option checks; and `tandem bench --inference`.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "tandem/run.h"
#include "tandem/runtime.h"

namespace tandem::testing {
namespace {

TEST(BenchCli, RunsAMatrixWritesReportsAndComparesThem) {
  ScratchDir dir;
  const std::string json = dir.file("a.json");
  const CliResult result = run_cli({"bench",
                                    "--model",
                                    "mlp",
                                    "--devices",
                                    "cpu,cuda:3",
                                    "--batch-size",
                                    "8,16",
                                    "--warmup-steps",
                                    "1",
                                    "--steps",
                                    "2",
                                    "--windows",
                                    "2",
                                    "--threads",
                                    "1",
                                    "--estimate",
                                    "none",
                                    "--json",
                                    json,
                                    "--csv",
                                    dir.file("a.csv"),
                                    "--html",
                                    dir.file("a.html")});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out, "| mlp | cpu (");
  expect_contains(result.out, "| fp32 | 8 |");
  expect_contains(result.out, "| fp32 | 16 |");
  expect_contains(result.out, "Fastest: mlp fp32 ");
  expect_contains(result.out, "Cheapest: mlp fp32 ");
  expect_contains(result.out, "- mlp fp32 batch 8 on cuda:3 (measured): no ");
  expect_contains(result.err, "bench: mlp fp32 batch 8 on cpu ...");
  JsonChecker checker(slurp(json));
  ASSERT_TRUE(checker.valid());
  EXPECT_EQ(checker.top_level().at("format"), "\"tandem-bench-report\"");
  expect_contains(slurp(dir.file("a.csv")), "measured,tandem,");
  expect_contains(slurp(dir.file("a.html")), "<svg id=\"throughput\"");

  const CliResult same = run_cli({"bench", "compare", json, json});
  ASSERT_EQ(same.status, 0) << same.err;
  expect_contains(same.out, "| measured | mlp fp32 b8 cpu |");
  expect_contains(same.out, "| +0.0% |");

  const CliResult one = run_cli({"bench", "compare", json});
  EXPECT_EQ(one.status, 2);
  expect_contains(one.err, "takes two reports");
  const CliResult missing = run_cli({"bench", "compare", json, dir.file("none.json")});
  EXPECT_EQ(missing.status, 1);
  expect_contains(missing.err, "none.json");
}

TEST(BenchCli, SmokePresetPrintsEachEpochOnEachDevice) {
  // The preset at a size a test affords: ResNet-50 at 32x32, 16 images, batch 8, 2 epochs.
  const CliResult result = run_cli({"bench", "--preset", "smoke", "--image-size", "32",
                                    "--dataset-size", "16", "--batch-size", "8", "--epochs", "2",
                                    "--warmup-steps", "1", "--threads", "1", "--estimate", "none"});
  ASSERT_EQ(result.status, 0) << result.err;
  // The CPU's model name may have parentheses of its own: "Intel(R) Xeon(R) Processor".
  const std::regex epochs(
      "resnet50 fp32 batch 8 on cpu \\(.*\\): epoch 1 [0-9.]+ s, epoch 2 [0-9.]+ s; total "
      "[0-9.]+ s\n");
  EXPECT_TRUE(std::regex_search(result.out, epochs)) << result.out;
  expect_contains(result.out, "| resnet50 | cpu (");
  expect_contains(result.err, "bench: resnet50 fp32 batch 8 on cpu ...");
}

// bf16 on a CPU without AVX-512 runs on the loops: the bench says so once, as train does, before
// the figures it explains; where the CPU has oneDNN's bf16 kernels nothing is said.
TEST(BenchCli, Bf16OnTheCpuIsWarnedAboutWhereItRunsOnTheLoops) {
  const CliResult result = run_cli({"bench", "--model", "mlp", "--precision", "fp32,bf16",
                                    "--batch-size", "8", "--warmup-steps", "1", "--steps", "1",
                                    "--windows", "1", "--threads", "1", "--estimate", "none"});
  ASSERT_EQ(result.status, 0) << result.err;
  const std::optional<std::string> warning = run::precision_warning("bf16", {Device::cpu()});
  EXPECT_EQ(warning.has_value(), !cpu_kernels().bf16);
  const std::string said = warning ? "warning: " + *warning + "\n" : "--precision bf16 on this CPU";
  EXPECT_EQ(result.err.find(said) != std::string::npos, warning.has_value()) << result.err;
}

TEST(BenchCli, PriceTablesAreCheckedAndPrintable) {
  ScratchDir dir;
  const CliResult printed = run_cli({"bench", "--print-prices"});
  ASSERT_EQ(printed.status, 0) << printed.err;
  expect_contains(printed.out, "[device.h100]");
  const std::string prices = dir.file("prices.toml");
  std::ofstream(prices) << printed.out << "\n[device.mine]\nper_hour = cheap\n";
  const CliResult bad = run_cli({"bench", "--prices", prices});
  EXPECT_EQ(bad.status, 1);
  expect_contains(bad.err, prices + ":");
  expect_contains(bad.err, "cannot read the value 'cheap'");
  // Not a file to read to the end: refused before reading, naming the path.
  const CliResult device = run_cli({"bench", "--prices", "/dev/zero"});
  EXPECT_EQ(device.status, 1);
  expect_contains(device.err, "the price table /dev/zero: is a character device");
}

TEST(BenchCli, NothingMeasuredIsAnErrorAndAMissingPriceIsExplained) {
  const std::vector<std::string> quick{"--model",    "mlp", "--batch-size",   "8", "--steps",   "1",
                                       "--windows",  "1",   "--warmup-steps", "1", "--threads", "1",
                                       "--estimate", "none"};
  std::vector<std::string> absent{"bench", "--devices", "cuda:7"};
  absent.insert(absent.end(), quick.begin(), quick.end());
  const CliResult nothing = run_cli(absent);
  EXPECT_EQ(nothing.status, 1) << nothing.err;
  expect_contains(nothing.out, "- mlp fp32 batch 8 on cuda:7 (measured): no ");
  expect_contains(nothing.err, "nothing was measured: every configuration asked for was skipped");

  ScratchDir dir;
  const std::string prices = dir.file("prices.toml");
  std::ofstream(prices) << "currency = \"USD\"\n\n[device.t4]\nmatch = \"T4\"\nper_hour = 0.35\n"
                           "source = \"a test\"\ndate = \"2026-12\"\n";
  std::vector<std::string> unpriced{"bench", "--devices", "cpu", "--prices", prices};
  unpriced.insert(unpriced.end(), quick.begin(), quick.end());
  const CliResult result = run_cli(unpriced);
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out,
                  "no price: no entry of the price table matches 'cpu', so its costs show as -");
}

TEST(BenchCli, OutputsAreCheckedBeforeTheRuns) {
  ScratchDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const CliResult result = run_cli({"bench", "--json", fifo});
  EXPECT_EQ(result.status, 1);
  expect_contains(result.err, "--json " + fifo + ": is a FIFO (named pipe)");
  EXPECT_EQ(result.err.find("bench: mlp"), std::string::npos) << "a run started: " << result.err;
}

TEST(BenchCli, OptionsAreChecked) {
  const CliResult precision = run_cli({"bench", "--precision", "fp8"});
  EXPECT_EQ(precision.status, 2);
  expect_contains(precision.err, "--precision: unknown precision 'fp8'");
  const CliResult model = run_cli({"bench", "--model", "vgg"});
  EXPECT_EQ(model.status, 2);
  expect_contains(model.err, "unknown model 'vgg'");
  const CliResult device = run_cli({"bench", "--devices", "tpu:0"});
  EXPECT_EQ(device.status, 2);
  const CliResult peers = run_cli({"bench", "--peers", "jax"});
  EXPECT_EQ(peers.status, 2);
  const CliResult preset = run_cli({"bench", "--preset", "large"});
  EXPECT_EQ(preset.status, 2);
  const CliResult stray = run_cli({"bench", "now"});
  EXPECT_EQ(stray.status, 2);
  expect_contains(stray.err, "tandem bench compare A.json B.json");
  const CliResult estimate = run_cli({"bench", "--estimate", "B300", "--steps", "1", "--windows",
                                      "1", "--warmup-steps", "1", "--threads", "1"});
  EXPECT_EQ(estimate.status, 1);
  expect_contains(estimate.err, "no published figures for 'B300'");
}

// --jit picks how Tandem runs the step, as tandem train --jit; the default on the CPU is compiled.
// The log line and the JSON row say which ran.
TEST(BenchCli, JitPicksTheCompiledOrTheEagerStep) {
  ScratchDir dir;
  for (const std::string jit : {"default", "off", "on"}) {
    std::vector<std::string> args{"bench",
                                  "--model",
                                  "mlp",
                                  "--batch-size",
                                  "8",
                                  "--warmup-steps",
                                  "1",
                                  "--steps",
                                  "2",
                                  "--windows",
                                  "1",
                                  "--threads",
                                  "1",
                                  "--estimate",
                                  "none",
                                  "--json",
                                  dir.file(jit + ".json")};
    if (jit != "default") args.insert(args.end(), {"--jit", jit});
    const CliResult result = run_cli(args);
    ASSERT_EQ(result.status, 0) << result.err;
    const std::string step = jit == "off" ? "eager" : "compiled";
    expect_contains(result.err, "samples/s, " + step + " step");
    const nlohmann::json report = nlohmann::json::parse(slurp(dir.file(jit + ".json")));
    EXPECT_EQ(report.at("rows").at(0).at("training_step"), step);
  }
  expect_error({"bench", "--jit", "sometimes"}, 2, {"unknown jit 'sometimes' for --jit"});
  expect_error({"bench", "--inference", "--jit", "off"}, 2,
               {"--jit is for training runs; --inference measures inference on the CPU"});
}

// f32 and int8 inference of the CNN: the table, the int8/fp32 line and the JSON report, whose
// int8 model stores a byte per kernel weight.
TEST(BenchCli, InferenceMeasuresLatencyThroughputAndSizeOfF32AndInt8) {
  ScratchDir dir;
  const std::string json = dir.file("inference.json");
  const CliResult result = run_cli({"bench", "--inference", "--model", "cnn", "--precision",
                                    "fp32,int8", "--batch-size", "1,4", "--steps", "2", "--windows",
                                    "2", "--warmup-steps", "1", "--threads", "1", "--json", json});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out,
                  "| model | precision | size | batch 1 p50 ms | p90 ms | p99 ms | "
                  "batch 1 images/s | batch 4 images/s |");
  expect_contains(result.out, "| cnn | fp32 | ");
  expect_contains(result.out, "| cnn | int8 | ");
  expect_contains(result.out, "cnn: int8 / fp32 batch-1 latency ");
  const nlohmann::json report = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(report.at("rows").size(), 2u);
  const nlohmann::json& f32 = report.at("rows")[0];
  const nlohmann::json& int8 = report.at("rows")[1];
  EXPECT_EQ(f32.at("precision"), "fp32");
  EXPECT_EQ(int8.at("precision"), "int8");
  EXPECT_LT(int8.at("model_bytes").get<double>(), 0.3 * f32.at("model_bytes").get<double>());
  for (const nlohmann::json& row : report.at("rows")) {
    EXPECT_GT(row.at("latency_ms").at("p50").get<double>(), 0.0);
    EXPECT_LE(row.at("latency_ms").at("p50").get<double>(),
              row.at("latency_ms").at("p99").get<double>());
    ASSERT_EQ(row.at("images_per_sec").size(), 2u);
    EXPECT_EQ(row.at("images_per_sec")[1].at("batch"), 4);
    EXPECT_GT(row.at("images_per_sec")[1].at("median").get<double>(), 0.0);
  }
}

TEST(BenchCli, InferenceOptionsAreChecked) {
  expect_error({"bench", "--precision", "int8"}, 2, {"use fp32 or bf16 (int8 with --inference)"});
  expect_error({"bench", "--inference", "--precision", "bf16"}, 2,
               {"use fp32 or int8 with --inference"});
  expect_error({"bench", "--inference", "--devices", "cuda"}, 2,
               {"--devices is for training runs; --inference measures inference on the CPU"});
  expect_error({"bench", "--inference", "--csv", "x.csv"}, 2,
               {"--inference writes its report with --json"});
}

}  // namespace
}  // namespace tandem::testing
