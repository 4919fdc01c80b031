// The `tandem` binary end to end: exit statuses, one-line errors, help texts, devices --json and
// train on tiny (and tiny broken) copies of Fashion-MNIST.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cli/cli_runner.h"
#include "core/text.h"
#include "tandem/cuda.h"
#include "tandem/runtime.h"

namespace tandem::testing {
namespace {

// The runner itself: a program that hangs is stopped at the limit, and the test is told so,
// with what the program's threads were doing (where gdb is installed), rather than waiting for
// CI's limit.
TEST(Cli, AProgramThatHangsIsStoppedAndDescribed) {
  const auto start = std::chrono::steady_clock::now();
  const CliResult result = run_program("sleep", {"60"}, std::chrono::seconds(1));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(50));
  EXPECT_EQ(result.status, 124);
  expect_contains(result.err,
                  "[test] sleep did not finish in 1 s and was stopped; its threads were:");
  const CliResult quick = run_program("true", {}, std::chrono::seconds(1));
  EXPECT_EQ(quick.status, 0);
  EXPECT_EQ(run_program("false", {}).status, 1);
  EXPECT_EQ(run_program("/nonexistent/program", {}).status, 127);
}

TEST(Cli, VersionPrintsTheLibraryVersion) {
  const CliResult result = run_cli({"--version"});
  EXPECT_EQ(result.status, 0);
  EXPECT_EQ(result.out, std::string("tandem ") + version() + "\n");
}

TEST(Cli, HelpListsTheCommands) {
  for (const auto& args : {std::vector<std::string>{"--help"}, std::vector<std::string>{"help"}}) {
    const CliResult result = run_cli(args);
    EXPECT_EQ(result.status, 0);
    expect_contains(result.out, "Usage: tandem <command>");
    expect_contains(result.out, "  train ");
    expect_contains(result.out, "  devices ");
    expect_contains(result.out, "  help ");
  }
}

TEST(Cli, NoCommandIsAUsageError) {
  const CliResult result = run_cli({});
  EXPECT_EQ(result.status, 2);
  expect_contains(result.err, "Usage: tandem <command>");
  expect_contains(result.err, "tandem: error: no command given");
}

TEST(Cli, UnknownCommandListsTheCommands) {
  expect_error({"frobnicate"}, 2,
               {"unknown command 'frobnicate'", "train, devices, ", "doctor, launch", ", help"});
  expect_error({"help", "frobnicate"}, 2, {"unknown command 'frobnicate'"});
  expect_error({"--frobnicate"}, 2, {"unknown option '--frobnicate'"});
}

TEST(Cli, EverySubcommandHasHelp) {
  const CliResult train_help = run_cli({"train", "--help"});
  EXPECT_EQ(train_help.status, 0);
  for (const char* option : {"--model NAME", "--epochs N", "--batch-size N", "--lr RATE",
                             "--threads N", "--seed N", "--data-dir DIR", "--validation-split F",
                             "--report FILE", "--quiet", "--verbose", "--help"}) {
    expect_contains(train_help.out, option);
  }
  expect_contains(train_help.out, "cnn");
  EXPECT_EQ(run_cli({"help", "train"}).out, train_help.out);

  const CliResult devices_help = run_cli({"devices", "--help"});
  EXPECT_EQ(devices_help.status, 0);
  expect_contains(devices_help.out, "--json");
  EXPECT_EQ(run_cli({"help", "devices"}).out, devices_help.out);
}

TEST(Cli, DevicesDescribesTheCpuAndWhyThereIsNoGpu) {
  const CliResult result = run_cli({"devices"});
  EXPECT_EQ(result.status, 0) << result.err;
  expect_contains(result.out, "cpu:0");
  expect_contains(result.out, "topology");
  expect_contains(result.out, "oneDNN");
  // The test machines have no GPU and no TPU.
  expect_contains(result.out, "gpu    none: ");
  expect_contains(result.out, "tpu    none: ");
  expect_contains(result.out, "strategy auto: OneDevice(cpu)");
}

TEST(Cli, DevicesJsonParses) {
  const CliResult result = run_cli({"devices", "--json"});
  EXPECT_EQ(result.status, 0) << result.err;
  JsonChecker json(result.out);
  ASSERT_TRUE(json.valid()) << result.out;
  EXPECT_EQ(json.top_level().count("cpu"), 1u);
  EXPECT_EQ(json.top_level().at("gpus"), "[]");
  EXPECT_EQ(json.top_level().at("gpu_backend_built"), cuda::status().built ? "true" : "false");
  expect_contains(json.top_level().at("cpu"), "\"isa\"");
  expect_contains(json.top_level().at("cpu"), "\"AVX2\"");
  expect_contains(json.top_level().at("cpu"), "\"threads\"");
  expect_contains(json.top_level().at("cpu"), "\"memory_total_bytes\"");
}

TEST(Cli, BadTrainArgumentsAreUsageErrors) {
  expect_error({"train", "--frobnicate"}, 2,
               {"unknown option '--frobnicate'", "tandem train --help"});
  expect_error({"train", "--model", "nope"}, 2, {"unknown model 'nope'", "cnn", "mlp"});
  expect_error({"train", "--lr-schedule", "linear"}, 2,
               {"unknown schedule 'linear' for --lr-schedule", "constant", "cosine"});
  for (const char* bad : {"0", "-3", "abc", "1.5", "", "12abc"}) {
    expect_error({"train", "--batch-size", bad}, 2,
                 {"--batch-size must be a positive integer", std::string("'") + bad + "'"});
    expect_error({"train", std::string("--epochs=") + bad}, 2,
                 {"--epochs must be a positive integer"});
    expect_error({"train", "--threads", bad}, 2, {"--threads must be a positive integer"});
  }
  for (const char* bad : {"0", "-0.1", "abc", "nan", "inf"}) {
    expect_error({"train", "--lr", bad}, 2, {"--lr must be a positive number"});
  }
  expect_error({"train", "--seed", "-1"}, 2, {"--seed must be a non-negative integer"});
  expect_error({"train", "--num-classes", "2147483647"}, 2,
               {"--num-classes must be at most 1000000, got '2147483647'"});
  expect_error({"train", "--validation-split", "1"}, 2,
               {"--validation-split must be a number in [0, 1)"});
  expect_error({"train", "--epochs"}, 2, {"--epochs needs a value"});
  expect_error({"train", "--quiet=yes"}, 2, {"--quiet takes no value"});
  expect_error({"train", "extra"}, 2, {"takes no argument 'extra'"});
  expect_error({"train", "--report", "/nonexistent/dir/report.json"}, 2,
               {"--report", "/nonexistent/dir", "does not exist"});
}

TEST(Cli, MissingDataDirectoryIsNamedWithTheFix) {
  expect_error({"train", "--quiet", "--data-dir", "/nonexistent/fashion"}, 2,
               {"/nonexistent/fashion", "dataset-fashion-mnist", "--data-dir"});
}

TEST(Cli, TruncatedDataFileIsNamed) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 20, 10, 28, 28);
  const std::string images = dir.file("train-images-idx3-ubyte.gz");
  Bytes bytes = idx_header(0x08, {20, 28, 28});
  bytes.resize(bytes.size() + 1000, 7);
  write_file(images, bytes);
  expect_error({"train", "--quiet", "--data-dir", dir.path().string()}, 1,
               {images, "declares shape (20, 28, 28), 15680 bytes of data, but only 1000 follow",
                "cut short"});
}

TEST(Cli, BadHeaderIsNamed) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 20, 10, 28, 28, "");
  const std::string labels = dir.file("t10k-labels-idx1-ubyte");
  write_file(labels, concat(Bytes{0x00, 0x00, 0x09, 0x00}, Bytes(10, 1)));
  expect_error({"train", "--quiet", "--data-dir", dir.path().string()}, 1,
               {labels, "impossible shape"});
  write_file(labels, concat(Bytes{'P', 'K', 0x03, 0x04, 0, 0, 0, 10}, Bytes(10, 1)));  // a zip
  expect_error({"train", "--quiet", "--data-dir", dir.path().string()}, 1,
               {labels, "not an IDX file", "0x504B0304"});
}

TEST(Cli, TrainsOnATinyDatasetAndWritesTheReport) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 64, 32, 28, 28);
  const std::string report = dir.file("report.json");
  const CliResult result =
      run_cli({"train", "--model", "mlp", "--epochs", "2", "--batch-size", "16", "--threads", "1",
               "--seed", "7", "--data-dir", dir.path().string(), "--report", report});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out, "device: cpu");
  expect_contains(result.out, "strategy: OneDevice(cpu), chosen by --strategy auto");
  expect_contains(result.out, "test accuracy: ");
  expect_contains(result.out, "samples/s");
  expect_contains(result.out, "% of the step time waiting for batches");  // the main job's input
  JsonChecker json(slurp(report));
  ASSERT_TRUE(json.valid()) << slurp(report);
  const auto& members = json.top_level();
  for (const char* key :
       {"model", "device", "epochs", "batch_size", "threads", "seed", "test_accuracy", "test_loss",
        "samples_per_sec", "wall_seconds", "train_seconds", "tandem_version", "input_wait_share"}) {
    EXPECT_EQ(members.count(key), 1u) << key;
  }
  EXPECT_EQ(members.at("model"), "\"mlp\"");
  EXPECT_EQ(members.at("device"), "\"cpu\"");
  EXPECT_EQ(members.at("epochs"), "2");
  EXPECT_EQ(members.at("batch_size"), "16");
  EXPECT_EQ(members.at("threads"), "1");
  EXPECT_EQ(members.at("seed"), "7");
  // What the CLI prints is what it reports, to the digits it prints (the figures themselves are
  // the run layer's, tested in tests/run/run_test.cpp).
  const auto printed = [&](const std::string& label) {
    const std::size_t at = result.out.find(label);
    EXPECT_NE(at, std::string::npos) << label << " is not printed: " << result.out;
    if (at == std::string::npos) return std::string();
    const std::size_t start = at + label.size();
    return result.out.substr(start, result.out.find('\n', start) - start);
  };
  EXPECT_EQ(printed("test accuracy: "), fixed(std::stod(members.at("test_accuracy")), 4));
  EXPECT_EQ(printed("test loss: "), fixed(std::stod(members.at("test_loss")), 4));
  const std::string rate = fixed(std::stod(members.at("samples_per_sec")), 1);
  expect_contains(result.out, "throughput: " + rate + " samples/s");
  const std::string wait = fixed(100.0 * std::stod(members.at("input_wait_share")), 1);
  expect_contains(result.out, "input: " + wait + "% of the step time waiting for batches");
  expect_contains(result.out, "report: " + report + "\n");

  const CliResult quiet = run_cli(
      {"train", "--model", "mlp", "--epochs", "1", "--quiet", "--data-dir", dir.path().string()});
  ASSERT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_TRUE(quiet.out.starts_with("test accuracy: ")) << quiet.out;
}

}  // namespace
}  // namespace tandem::testing
