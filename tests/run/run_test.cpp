// The training run in process (tandem/run.h): it trains real data to real accuracy, resumes to the
// bits of an uninterrupted run, keeps process-wide settings to itself, lets a caller watch and
// stop it, and refuses bad data and settings before the first step, naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "data/idx_files.h"
#include "support/crash_at.h"
#include "tandem/mixed_precision.h"
#include "tandem/random.h"
#include "tandem/run.h"
#include "tandem/runtime.h"

namespace tandem::run {
namespace {

using testing::CrashAt;
using testing::ScratchDir;
using testing::write_tiny_fashion_mnist;

bool has_fashion_mnist() {
  return std::filesystem::exists(std::string(data::kFashionMnistDefaultDir) +
                                 "/train-images-idx3-ubyte.gz");
}

// A quiet run whose output is kept.
struct QuietRun {
  std::ostringstream log;
  std::ostringstream out;
  std::ostringstream warnings;
  RunOutput output() { return {.log = &log, .out = &out, .warnings = &warnings}; }
};

// Every weight of the model, as bits.
std::vector<std::vector<std::uint8_t>> weight_bits(nn::Model& model) {
  std::vector<std::vector<std::uint8_t>> bits;
  for (const Tensor& weight : model.weights()) {
    const auto* bytes = static_cast<const std::uint8_t*>(weight.raw_data());
    bits.emplace_back(bytes, bytes + weight.nbytes());
  }
  return bits;
}

struct Outcome {
  Report report;
  std::vector<std::vector<std::uint8_t>> weights;
};

Outcome run_to_end(const RunConfig& config, RunOutput output = {.log = nullptr, .out = nullptr}) {
  run::Run run(config, output);
  Outcome outcome{run.run(), {}};
  outcome.weights = weight_bits(run.model());
  return outcome;
}

// A tiny Fashion-MNIST-shaped data set: 128 training and 64 test images.
RunConfig tiny_config(const ScratchDir& dir) {
  write_tiny_fashion_mnist(dir.path(), 128, 64, 28, 28);
  RunConfig config;
  config.model = "mlp";
  config.epochs = 2;
  config.batch_size = 16;
  config.threads = 1;
  config.verbosity = 0;
  config.data.images.fashion_mnist_dir = dir.path().string();
  return config;
}

// The bar for the library: real Fashion-MNIST, a tenth of it for one epoch, well past
// chance (10%) and the threshold a broken optimizer or data path would miss.
TEST(Run, TrainsRealDataToRealAccuracy) {
  if (!has_fashion_mnist()) {
    GTEST_SKIP() << "Fashion-MNIST is not in " << data::kFashionMnistDefaultDir
                 << " (make deps puts it there)";
  }
  RunConfig config;
  config.model = "mlp";
  config.epochs = 2;
  config.data.fraction = 0.1;
  config.data.validation_split = 0.1;
  QuietRun quiet;
  run::Run run(config, quiet.output());
  const Report report = run.run();
  ASSERT_TRUE(report.test_accuracy);
  EXPECT_GT(*report.test_accuracy, 0.75) << quiet.out.str();
  EXPECT_LT(*report.test_loss, 0.75) << quiet.out.str();
  // Two epochs of losses, the second lower; validation each epoch.
  ASSERT_EQ(report.history.at("loss").size(), 2u);
  EXPECT_LT(report.history.at("loss")[1], report.history.at("loss")[0]);
  ASSERT_EQ(report.history.at("val_accuracy").size(), 2u);
  EXPECT_GT(report.history.at("val_accuracy")[1], 0.75);
  EXPECT_EQ(report.device, "cpu");
  EXPECT_EQ(report.weights, run.model().count_params());
  EXPECT_GT(report.weights, 0);
  EXPECT_EQ(report.num_classes, 10);
  EXPECT_EQ(report.global_batch_size, 32);
  EXPECT_GT(report.samples_per_sec, 0.0);
  EXPECT_NE(quiet.out.str().find("test accuracy: "), std::string::npos) << quiet.out.str();
  // The progress went to the run's log, none of it to the results.
  EXPECT_NE(quiet.log.str().find("training mlp ("), std::string::npos) << quiet.log.str();
  EXPECT_EQ(quiet.out.str().find("training mlp ("), std::string::npos) << quiet.out.str();
}

// What a run sets for itself (threads, seed, deterministic mode, denormals, the dtype policy, a
// memory limit) is put back when it ends; so two different runs one after the other in a process
// each get the bits they get alone.
class TwoRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    plain_ = tiny_config(dir_);
    special_ = plain_;
    special_.deterministic = true;
    special_.threads = 2;
    special_.seed = 7;
    special_.precision.precision = "bf16";
    special_.precision.keep_denormals = true;
    special_.precision.memory_limit = std::size_t{4} << 30;
    special_.optimizer.schedule = "constant";
  }

  struct Settings {
    int threads;
    bool deterministic;
    bool flush_denormals;
    std::optional<std::string> policy;
    std::uint64_t seed;
    std::uint64_t offset;
    std::size_t memory_limit;
    bool operator==(const Settings&) const = default;
  };
  static Settings settings_now() {
    const std::optional<mixed_precision::Policy> policy = mixed_precision::global_policy();
    return {thread_setting(),
            deterministic(),
            flush_denormals(),
            policy ? std::optional(policy->name()) : std::nullopt,
            default_generator().seed(),
            default_generator().offset(),
            memory_info(Device::cpu()).limit};
  }

  ScratchDir dir_;
  RunConfig plain_;
  RunConfig special_;
};

TEST_F(TwoRuns, ThePlainRunIsTheSameAfterTheSpecialOne) {
  manual_seed(123);
  const Settings before = settings_now();
  const Outcome alone = run_to_end(plain_);
  EXPECT_EQ(settings_now(), before);
  const Outcome special = run_to_end(special_);
  EXPECT_EQ(settings_now(), before) << "the special run left its settings behind";
  const Outcome again = run_to_end(plain_);
  EXPECT_EQ(again.weights, alone.weights);
  EXPECT_EQ(again.report.history, alone.report.history);
  EXPECT_EQ(again.report.test_loss, alone.report.test_loss);
  // The two configurations train differently (else the test could not tell).
  EXPECT_NE(special.report.history, alone.report.history);
}

TEST_F(TwoRuns, TheSpecialRunIsTheSameAfterThePlainOne) {
  const Settings before = settings_now();
  const Outcome alone = run_to_end(special_);
  EXPECT_EQ(settings_now(), before);
  run_to_end(plain_);
  const Outcome again = run_to_end(special_);
  EXPECT_EQ(again.weights, alone.weights);
  EXPECT_EQ(again.report.history, alone.report.history);
  EXPECT_EQ(settings_now(), before);
}

// A run that fails puts the settings back too.
TEST_F(TwoRuns, AFailedRunPutsTheSettingsBack) {
  const Settings before = settings_now();
  // The data is opened after the run has set its settings.
  RunConfig broken = special_;
  broken.data.images.fashion_mnist_dir = data::kFashionMnistDefaultDir;
  broken.data.images.training = (dir_.path() / "empty").string();
  std::filesystem::create_directories(broken.data.images.training);
  EXPECT_THROW(run_to_end(broken), ConfigError);
  EXPECT_EQ(settings_now(), before);
}

// A caller's callback sees every step and stops the run.
class StopAfter : public train::Callback {
 public:
  explicit StopAfter(std::int64_t steps) : steps_(steps) {}
  void on_train_batch_end(std::int64_t, const train::Logs& logs) override {
    ++seen_;
    last_loss_ = logs.at("loss");
    if (seen_ == steps_) model()->set_stop_training(true);
  }
  std::int64_t seen() const { return seen_; }
  double last_loss() const { return last_loss_; }

 private:
  std::int64_t steps_;
  std::int64_t seen_ = 0;
  double last_loss_ = 0.0;
};

TEST(Run, ACallerWatchesAndStopsTheRun) {
  ScratchDir dir;
  RunConfig config = tiny_config(dir);
  const auto stop = std::make_shared<StopAfter>(3);
  RunOutput output{.log = nullptr, .out = nullptr, .callbacks = {stop}};
  run::Run run(config, output);
  const train::History& history = run.fit();
  EXPECT_EQ(stop->seen(), 3);
  EXPECT_GT(stop->last_loss(), 0.0);
  std::int64_t steps = 0;
  for (const auto& epoch : history.step_seconds())
    steps += static_cast<std::int64_t>(epoch.size());
  EXPECT_EQ(steps, 3);
  const Report report = run.finish();
  EXPECT_TRUE(report.test_accuracy);
}

// A run stopped by a crash (an exception from a step, here) resumes from its last checkpoint, by
// the configuration the checkpoint records, to the bits of the run that was never interrupted.
TEST(Run, AResumedRunEndsWithTheBitsOfAnUninterruptedOne) {
  ScratchDir dir;
  RunConfig config = tiny_config(dir);
  config.deterministic = true;
  config.epochs = 3;
  config.checkpoints.directory = dir.file("checkpoints");
  config.checkpoints.every_steps = 4;
  const Outcome whole = [&] {
    RunConfig uninterrupted = config;
    uninterrupted.checkpoints.directory = dir.file("whole");
    return run_to_end(uninterrupted);
  }();
  {
    run::Run crashing(
        config, {.log = nullptr, .out = nullptr, .callbacks = {std::make_shared<CrashAt>(19)}});
    EXPECT_THROW(crashing.run(), IoError);
  }
  // Resumed from what the checkpoint records: nothing else is given.
  const RunConfig resumed = resumed_config(config.checkpoints.directory);
  EXPECT_EQ(resumed.model, "mlp");
  EXPECT_EQ(resumed.epochs, 3);
  EXPECT_TRUE(resumed.deterministic);
  EXPECT_EQ(resumed.checkpoints.every_steps, 4);
  EXPECT_EQ(resumed.data.images.fashion_mnist_dir, dir.path().string());
  RunConfig continuing = resumed;
  continuing.threads = 1;  // the log (verbosity 1) says where it resumed
  QuietRun quiet;
  run::Run run(continuing, quiet.output());
  const Report report = run.run();
  EXPECT_EQ(weight_bits(run.model()), whole.weights);
  EXPECT_EQ(report.test_loss, whole.report.test_loss);
  EXPECT_EQ(report.history, whole.report.history);
  // 19 steps crashed after the checkpoint at step 16: epoch 3 (of 8 steps each), 0 of 8 done.
  EXPECT_NE(quiet.log.str().find("(step 16: epoch 3, 0 of 8 batches done)"), std::string::npos);

  // A setting that defines the run may not change on resume; the message names the field.
  RunConfig changed = resumed;
  changed.batch_size = 32;
  run::Run refused(changed, {.log = nullptr, .out = nullptr});
  try {
    refused.prepare();
    ADD_FAILURE() << "a changed batch size resumed";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("batch_size 32 differs from the run being resumed "
                        "(batch_size 16 in " +
                        config.checkpoints.directory),
              std::string::npos)
        << error.what();
  }
}

// A run whose loss becomes NaN (a learning rate of 1e30) stops with an error naming the step and
// what to try, instead of training on NaN to the end; the checkpoints it leaves are all of
// finite weights, the last good one the newest.
TEST(Run, ADivergedRunStopsWithAnErrorAndKeepsItsLastGoodCheckpoint) {
  ScratchDir dir;
  RunConfig config = tiny_config(dir);
  config.optimizer.learning_rate = 1e30;
  config.optimizer.schedule = "constant";
  config.checkpoints.directory = dir.file("checkpoints");
  config.checkpoints.every_steps = 1;
  config.checkpoints.keep = 0;  // every one, to look at them all
  config.checkpoints.save_model = dir.file("model");
  try {
    run_to_end(config);
    ADD_FAILURE() << "the diverged run ended normally";
  } catch (const train::NonFiniteLoss& error) {
    const std::string message = error.what();
    // Caught by the loss (nan or inf at a step) or, where an update made the weights infinite
    // first, by the checkpoint of that step.
    EXPECT_TRUE(message.starts_with("training diverged: the loss became ") ||
                message.starts_with("training diverged: the checkpoint at step "))
        << message;
    EXPECT_NE(message.find("try a lower learning rate"), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("model"))) << "the diverged model was saved";
  const std::vector<io::CheckpointInfo> kept = io::list_checkpoints(config.checkpoints.directory);
  EXPECT_FALSE(kept.empty()) << "the first step's checkpoint was good";
  for (const io::CheckpointInfo& checkpoint : kept) {
    EXPECT_TRUE(std::isfinite(checkpoint.logs.at("loss"))) << checkpoint.path;
    nn::clear_session();  // the layer names the run gave its model
    nn::Model model = nn::zoo::build("mlp", {28, 28, 1}, 10);
    model.compile({.optimizer = train::Adam(1e-3),
                   .loss = train::SparseCategoricalCrossentropy(true),
                   .metrics = {"accuracy"}});
    io::restore_checkpoint(checkpoint.path, model);
    for (const Tensor& weight : model.weights()) {
      for (const float value : weight.to_vector<float>())
        ASSERT_TRUE(std::isfinite(value))
            << checkpoint.path << " holds a weight that is not finite";
    }
  }
}

// The data a run names is opened and checked before the first step; a mistake names the field.
TEST(Run, DataMistakesNameTheFieldBeforeTraining) {
  ScratchDir dir;
  RunConfig config = tiny_config(dir);
  const auto message = [](RunConfig changed) {
    try {
      run::Run(changed, {.log = nullptr, .out = nullptr}).prepare();
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("(no error)");
  };
  RunConfig both = config;
  both.data.images.training = dir.path().string();
  EXPECT_NE(message(both).find("data.images.training and data.images.fashion_mnist_dir both "
                               "name the training data"),
            std::string::npos);
  RunConfig folder = config;
  folder.data.images.fashion_mnist_dir = data::kFashionMnistDefaultDir;
  folder.data.images.training = dir.file("empty");
  std::filesystem::create_directories(folder.data.images.training);
  EXPECT_NE(message(folder).find("data.images.training " + folder.data.images.training +
                                 ": a folder Tandem cannot read as data"),
            std::string::npos)
      << message(folder);
  RunConfig split = config;
  split.data.validation_split = 0.999;
  EXPECT_NE(message(split).find("data.validation_split 0.999 holds out all 128 training examples"),
            std::string::npos)
      << message(split);
  RunConfig best = config;
  best.checkpoints.directory = dir.file("ckpt");
  best.checkpoints.keep_best = "val_loss";
  EXPECT_NE(message(best).find("checkpoints.keep_best val_loss needs validation data"),
            std::string::npos)
      << message(best);
}

// A run trained on a data spec (not the default Fashion-MNIST folder) resumes, with the spec
// carried by the checkpoint or given again.
TEST(Run, ARunOnADataSpecResumes) {
  ScratchDir dir;
  RunConfig config = tiny_config(dir);
  config.data.images.training = dir.path().string();
  config.data.images.fashion_mnist_dir = data::kFashionMnistDefaultDir;
  config.checkpoints.directory = dir.file("checkpoints");
  {
    run::Run crashing(
        config, {.log = nullptr, .out = nullptr, .callbacks = {std::make_shared<CrashAt>(10)}});
    EXPECT_THROW(crashing.run(), IoError);
  }
  std::filesystem::copy(config.checkpoints.directory, dir.file("copy"),
                        std::filesystem::copy_options::recursive);
  const RunConfig carried = resumed_config(config.checkpoints.directory);
  EXPECT_EQ(carried.data.images.training, dir.path().string());
  EXPECT_EQ(carried.data.images.fashion_mnist_dir, data::kFashionMnistDefaultDir);
  RunConfig more = carried;
  more.threads = 1;
  more.verbosity = 0;
  EXPECT_NO_THROW(run_to_end(more));
  // Given again, as a caller would, under another name of the same folder.
  RunConfig given = resumed_config(dir.file("copy"), {"data"});
  EXPECT_EQ(given.data.images.training, "");
  given.data.images.training = dir.path().string() + "/";
  given.threads = 1;
  const Outcome resumed = run_to_end(given);
  EXPECT_EQ(resumed.report.history.at("loss").size(), 2u);
}

}  // namespace
}  // namespace tandem::run
