// Run files (src/cli/run_file.h): `tandem train --config run.toml`, the command line over the
// file, the resolved configuration in the report and the log folder (which repeats the run), and
// every mistake in a file named by file, line and key with the fix.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/cli_runner.h"
#include "cli/commands.h"
#include "cli/run_file.h"

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

  // with_run_file on `tandem train`'s options, checking values the way the CLI's reader does for
  // --batch-size (a positive integer); any other value is accepted.
  static ParsedArgs read(const std::string& file, std::vector<std::string> command_line = {}) {
    command_line.push_back("--config=" + file);
    return with_run_file(train_spec(), parse_args(train_spec(), command_line),
                         [](const std::string& option, const std::string& text) {
                           if (option == "--batch-size") parse_positive_integer(option, text);
                         });
  }
  static std::string error_of(const std::string& file) {
    try {
      read(file);
    } catch (const UsageError& error) {
      return error.what();
    }
    return "(no error)";
  }

  std::filesystem::path folder_;
};

TEST_F(RunFile, KeysAreLongOptionsAtTheTopOrInTablesAndTheCommandLineWins) {
  const std::string file = write("run.toml",
                                 "model = \"mlp\"\n"
                                 "epochs = 3\n"
                                 "deterministic = true\n"
                                 "validation-split = 0.25\n"
                                 "[optimizer]\n"
                                 "lr = 2e-3\n"
                                 "lr-schedule = \"constant\"\n"
                                 "[input]\n"
                                 "batch-size = 64\n");
  const ParsedArgs args = read(file, {"--batch-size", "128"});
  EXPECT_EQ(args.value("--model"), "mlp");
  EXPECT_EQ(args.value("--epochs"), "3");
  EXPECT_TRUE(args.has("--deterministic"));
  EXPECT_EQ(args.value("--validation-split"), "0.25");
  EXPECT_EQ(args.value("--lr"), "0.002");
  EXPECT_EQ(args.value("--lr-schedule"), "constant");
  EXPECT_EQ(args.value("--batch-size"), "128");  // the command line's
  // A flag set to false is left off.
  EXPECT_FALSE(read(write("off.toml", "deterministic = false\n")).has("--deterministic"));
}

TEST_F(RunFile, EveryMistakeNamesTheFileTheLineAndTheKey) {
  struct Case {
    std::string text;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases{
      {"epochs = 2\nbatch-sise = 64\n",
       {"bad.toml:2: unknown key 'batch-sise' (did you mean 'batch-size'?)",
        "long options of 'tandem train' without their dashes"}},
      {"[optimizer]\nlearning-rate = 0.1\n", {"bad.toml:2: unknown key 'optimizer.learning-rate'"}},
      {"batch-size = \"many\"\n",
       {"bad.toml:1: key 'batch-size': --batch-size", "'many'", "correct the value in the file"}},
      {"batch-size = -3\n", {"bad.toml:1: key 'batch-size'", "-3"}},
      {"epochs = true\n", {"bad.toml:1: key 'epochs' needs a value (--epochs N)"}},
      {"model = [\"mlp\"]\n", {"bad.toml:1: key 'model' needs a value"}},
      {"deterministic = \"yes\"\n",
       {"bad.toml:1: key 'deterministic' is a flag", "deterministic = true"}},
      {"epochs = 2\n[more]\nepochs = 3\n",
       {"bad.toml:3: key 'epochs' is given twice (also on line 1", "keep one"}},
      {"config = \"other.toml\"\n", {"bad.toml:1: key 'config' names another run file"}},
      {"[a.b]\nepochs = 1\n", {"bad.toml", "is nested", "one level deep"}},
      {"epochs = = 2\n", {"bad.toml:1: bad TOML", "https://toml.io"}},
  };
  for (const Case& c : cases) {
    const std::string message = error_of(write("bad.toml", c.text));
    for (const std::string& part : c.expected)
      EXPECT_NE(message.find(part), std::string::npos) << c.text << " -> " << message;
  }
}

TEST_F(RunFile, MissingOrNonRegularFilesAreNamed) {
  const std::string missing = error_of(path("missing.toml"));
  EXPECT_NE(missing.find("--config " + path("missing.toml") + ": no such file"), std::string::npos)
      << missing;
  const std::string folder = error_of(folder_.string());
  EXPECT_NE(folder.find("not a regular file"), std::string::npos) << folder;
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
