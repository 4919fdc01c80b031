// A checkpoint written by a program through the run layer resumes in `tandem train --resume`, and
// one the CLI wrote resumes in a program: both record the run's settings by the same keys. Either
// way the final weights are an uninterrupted run's, bit for bit (deterministic mode).
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/cli_runner.h"
#include "io/io_support.h"
#include "support/crash_at.h"
#include "tandem/io.h"
#include "tandem/run.h"

namespace tandem::testing {
namespace {

class LibraryAndCli : public ::testing::Test {
 protected:
  void SetUp() override {
    write_tiny_fashion_mnist(dir_.path(), 128, 64, 28, 28);
    // The uninterrupted run, through the CLI: 3 epochs of 8 steps.
    const CliResult whole = run_cli(cli_args({"--save-model", dir_.file("whole")}));
    ASSERT_EQ(whole.status, 0) << whole.err;
  }

  std::vector<std::string> cli_args(std::vector<std::string> extra) const {
    std::vector<std::string> args{"train",
                                  "--model",
                                  "mlp",
                                  "--deterministic",
                                  "--epochs",
                                  "3",
                                  "--batch-size",
                                  "16",
                                  "--threads",
                                  "1",
                                  "--quiet",
                                  "--data-dir",
                                  dir_.path().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // The same run as a program configures it.
  run::RunConfig config() const {
    run::RunConfig config;
    config.model = "mlp";
    config.deterministic = true;
    config.epochs = 3;
    config.batch_size = 16;
    config.threads = 1;
    config.verbosity = 0;
    config.data.images.fashion_mnist_dir = dir_.path().string();
    return config;
  }

  ScratchDir dir_;
};

TEST_F(LibraryAndCli, AProgramsCheckpointResumesInTheCli) {
  run::RunConfig crashing = config();
  crashing.checkpoints.directory = dir_.file("program");
  crashing.checkpoints.every_steps = 4;
  {
    // Gone before the CLI starts: its checkpoint writer finishes and lets go of the folder.
    run::Run run(crashing,
                 {.log = nullptr, .out = nullptr, .callbacks = {std::make_shared<CrashAt>(14)}});
    EXPECT_THROW(run.run(), IoError);
  }
  ASSERT_EQ(io::latest_checkpoint(crashing.checkpoints.directory)->position.step, 12);

  const CliResult resumed = run_cli({"train", "--resume", dir_.file("program"), "--threads", "1",
                                     "--save-model", dir_.file("resumed")});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  expect_contains(resumed.out, "resumed: ");
  expect_contains(resumed.out, "(step 12: epoch 2, 4 of 8 batches done)");
  expect_same_saved_weights(dir_.file("whole"), dir_.file("resumed"));
}

TEST_F(LibraryAndCli, TheClisCheckpointResumesInAProgram) {
  const CliResult written =
      run_cli(cli_args({"--checkpoint-dir", dir_.file("cli"), "--checkpoint-every", "4"}));
  ASSERT_EQ(written.status, 0) << written.err;
  // The oldest checkpoint kept (of three), from the middle of the run.
  const std::vector<io::CheckpointInfo> kept = io::list_checkpoints(dir_.file("cli"));
  ASSERT_EQ(kept.size(), 3u);
  ASSERT_LT(kept.front().position.step, 24);
  run::RunConfig resumed = run::resumed_config(kept.front().path);
  EXPECT_EQ(resumed.model, "mlp");
  EXPECT_EQ(resumed.batch_size, 16);
  EXPECT_TRUE(resumed.deterministic);
  resumed.threads = 1;
  resumed.verbosity = 0;
  resumed.checkpoints.save_model = dir_.file("resumed");
  const run::Report report = run::Run(resumed, {.log = nullptr, .out = nullptr}).run();
  EXPECT_TRUE(report.saved);
  expect_same_saved_weights(dir_.file("whole"), dir_.file("resumed"));
  // The whole run's history, the epochs before the checkpoint included.
  EXPECT_EQ(report.history.at("loss").size(), 3u);
}

}  // namespace
}  // namespace tandem::testing
