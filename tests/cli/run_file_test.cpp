// Run files through the CLI: `tandem train --config run.toml`, the command line over the file, the
// configuration in the report and the log folder (which repeats the run), and mistakes named by
// the option. The run layer's reading of them is tested in tests/run/run_file_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace tandem::cli {
namespace {

using testing::run_cli;

class RunFile : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = std::filesystem::temp_directory_path() /
              ("tandem_run_file_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(folder_);
    std::filesystem::create_directories(folder_);
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (folder_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string path(const std::string& name) const { return (folder_ / name).string(); }

  std::filesystem::path folder_;
};

// A mistake in a run file is a usage error that names the file, the line, the key and the
// option, before anything runs.
TEST_F(RunFile, MistakesNameTheOption) {
  const auto result = run_cli({"train", "--config", write("bad.toml", "[optimizer]\nlr = -1\n")});
  EXPECT_EQ(result.status, 2);
  EXPECT_NE(result.err.find("bad.toml:2: key 'optimizer.lr': --lr must be a positive number, "
                            "got '-1'; correct the value in the file"),
            std::string::npos)
      << result.err;
  const auto unknown = run_cli({"train", "--config", write("typo.toml", "batch-sise = 8\n")});
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("typo.toml:1: unknown key 'batch-sise' (did you mean "
                             "'batch-size'?); the keys are the long options of 'tandem train' "
                             "without their dashes"),
            std::string::npos)
      << unknown.err;
  const auto missing = run_cli({"train", "--config", path("missing.toml")});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--config " + path("missing.toml") + ": no such file"),
            std::string::npos)
      << missing.err;
}

// The whole path through the binary: a run file with a command-line override trains; the
// report holds the resolved options and the file's name; the log folder's run.toml, passed back
// with --config, gives the same configuration. A bad value is refused before training, with
// the CLI's own check of it.
TEST_F(RunFile, TheResolvedConfigurationRepeatsTheRun) {
  const std::string file = write("run.toml",
                                 "model = \"mlp\"\nepochs = 1\nquiet = true\n"
                                 "[optimizer]\nlr = 0.002\nlr-schedule = \"constant\"\n"
                                 "[input]\nbatch-size = 64\n");
  const std::string logs = path("logs");
  const auto first = run_cli({"train", "--config", file, "--batch-size", "128", "--report",
                              path("first.json"), "--logdir", logs});
  ASSERT_EQ(first.status, 0) << first.err;
  const auto report = nlohmann::json::parse(std::ifstream(path("first.json")));
  EXPECT_EQ(report["batch_size"], 128);
  EXPECT_EQ(report["learning_rate"], 0.002);
  EXPECT_EQ(report["lr_schedule"], "constant");
  EXPECT_EQ(report["config_file"], file);
  EXPECT_EQ(report["config"]["batch-size"], "128");
  EXPECT_EQ(report["config"]["quiet"], true);
  ASSERT_TRUE(std::filesystem::exists(logs + "/run.toml"));

  const auto second = run_cli({"train", "--config", logs + "/run.toml", "--report",
                               path("second.json"), "--logdir", path("logs2")});
  ASSERT_EQ(second.status, 0) << second.err;
  auto repeated = nlohmann::json::parse(std::ifstream(path("second.json")))["config"];
  auto original = report["config"];
  for (auto* config : {&repeated, &original}) {
    config->erase("report");
    config->erase("logdir");
  }
  EXPECT_EQ(repeated, original);

  const auto bad = run_cli({"train", "--config", write("bad.toml", "lr-schedule = \"linear\"\n")});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("bad.toml:1: key 'lr-schedule'"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("linear"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace tandem::cli
