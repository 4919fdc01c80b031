// Checkpoints in-process: resuming from any checkpoint (mid-epoch, at an epoch's end, in the
// middle of a gradient accumulation) ends with the weights and logs of the uninterrupted run;
// what a checkpoint restores; keeping the newest and the best; every flipped byte, truncation or
// missing file detected; incompatible models refused per tensor; a full disk keeping the
// previous checkpoint; leftovers of a killed write cleaned; a second writer refused.
#include <gtest/gtest.h>

#include <cerrno>

#include "core/files.h"
#include "io/file_io.h"
#include "io/io_support.h"
#include "support/errors.h"
#include "support/write_fault.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::expect_same_weights;
using testing::io_error_of;
using testing::same_bits;
using testing::ScratchDir;

constexpr int kEpochs = 3;

std::vector<fs::path> checkpoint_folders(const fs::path& directory) {
  std::vector<fs::path> folders;
  for (const io::CheckpointInfo& info : io::list_checkpoints(directory.string()))
    folders.emplace_back(info.path);
  return folders;
}

// Trains small_model for kEpochs, checkpointing every `every` steps into `directory`.
train::History checkpointed_run(nn::Model& model, const data::Dataset& dataset,
                                const std::string& directory, std::int64_t every) {
  auto checkpoints = std::make_shared<io::ModelCheckpoint>(
      directory, io::ModelCheckpointOptions{.every_steps = every, .checkpoint = {.keep_last = 0}});
  return model.fit(dataset, {.epochs = kEpochs, .callbacks = {checkpoints}});
}

TEST(Checkpoint, ResumingFromAnyCheckpointEndsWithTheUninterruptedWeights) {
  ScratchDir scratch;
  const auto dataset = testing::small_dataset();
  nn::Model uninterrupted = testing::small_model();
  const train::History full = checkpointed_run(uninterrupted, *dataset, scratch.path(), 5);
  const std::vector<fs::path> folders = checkpoint_folders(scratch.path());
  // Steps 5, 10, 12 (end of epoch 1), 15, 20, 24, 25, 30, 35 and 36 (the end).
  ASSERT_EQ(folders.size(), 10u);
  for (const fs::path& folder : folders) {
    SCOPED_TRACE(folder.filename().string());
    nn::Model resumed = testing::small_model();
    const io::CheckpointInfo info = io::restore_checkpoint(folder.string(), resumed);
    const train::History rest = resumed.fit(*dataset, {.epochs = kEpochs,
                                                       .initial_epoch = info.position.epoch,
                                                       .initial_step = info.position.batch});
    expect_same_weights(uninterrupted, resumed);
    EXPECT_EQ(resumed.optimizer().iterations(), uninterrupted.optimizer().iterations());
    if (!rest.epochs().empty()) {
      // The restored running loss and accuracy carry the epoch on exactly.
      EXPECT_EQ(rest.history().at("loss").back(), full.history().at("loss").back());
      EXPECT_EQ(rest.history().at("accuracy").back(), full.history().at("accuracy").back());
    }
    // The checkpoint holds the logs of the epochs completed before it: with the rest of the
    // run's, the uninterrupted run's history.
    ASSERT_EQ(info.history.empty() ? 0 : info.history.at("loss").size(),
              static_cast<std::size_t>(info.position.epoch));
    std::vector<double> losses =
        info.history.empty() ? std::vector<double>{} : info.history.at("loss");
    if (!rest.epochs().empty()) {
      losses.insert(losses.end(), rest.history().at("loss").begin(),
                    rest.history().at("loss").end());
    }
    EXPECT_EQ(losses, full.history().at("loss"));
  }
}

TEST(Checkpoint, GradientAccumulationInProgressSurvivesACheckpoint) {
  ScratchDir scratch;
  const auto dataset = testing::small_dataset();
  const auto optimizer = [] {
    return train::Adam(0.01, 0.9, 0.999, 1e-7, {.gradient_accumulation_steps = 3});
  };
  nn::Model uninterrupted = testing::small_model(5, optimizer());
  checkpointed_run(uninterrupted, *dataset, scratch.path(), 4);
  // Step 4 is one call into an accumulation of three.
  const fs::path folder = scratch.path() / "ckpt-0000000004";
  nn::Model resumed = testing::small_model(5, optimizer());
  const io::CheckpointInfo info = io::restore_checkpoint(folder.string(), resumed);
  resumed.fit(*dataset, {.epochs = kEpochs,
                         .initial_epoch = info.position.epoch,
                         .initial_step = info.position.batch});
  expect_same_weights(uninterrupted, resumed);
}

TEST(Checkpoint, RestoresWeightsOptimizerRngAndMetrics) {
  ScratchDir scratch;
  const auto dataset = testing::small_dataset();
  nn::Model model = testing::small_model();
  checkpointed_run(model, *dataset, scratch.path(), 7);
  default_generator().set_state(99, 1234);
  const train::OptimizerState expected = model.optimizer().state(model.trainable_weights());
  const std::vector<double> accuracy = model.metrics().front()->variables();

  nn::Model fresh = testing::small_model(/*seed=*/6);
  const io::CheckpointInfo info = io::restore_checkpoint(scratch.path().string(), fresh);
  EXPECT_EQ(info.position, (io::TrainingPosition{kEpochs, 0, 36}));
  expect_same_weights(model, fresh);
  const train::OptimizerState restored = fresh.optimizer().state(fresh.trainable_weights());
  EXPECT_EQ(restored.iterations, 36);
  ASSERT_EQ(restored.slots.size(), expected.slots.size());
  for (std::size_t i = 0; i < expected.slots.size(); ++i) {
    ASSERT_EQ(restored.slots[i].size(), 2u);
    EXPECT_TRUE(same_bits(restored.slots[i][0], expected.slots[i][0]));
    EXPECT_TRUE(same_bits(restored.slots[i][1], expected.slots[i][1]));
  }
  // The default generator's seed, and where it stood when the model was built and trained.
  EXPECT_EQ(default_generator().seed(), 5u);
  EXPECT_NE(default_generator().offset(), 1234u);
  EXPECT_EQ(fresh.metrics().front()->variables(), accuracy);
  EXPECT_EQ(info.steps_per_epoch, 12);
  EXPECT_EQ(info.epochs, kEpochs);
  EXPECT_EQ(info.logs.count("loss"), 1u);
}

TEST(Checkpoint, ModelCheckpointWritesAtEpochEndsAndWhereTrainingStops) {
  ScratchDir scratch;
  const auto dataset = testing::small_dataset();
  nn::Model model = testing::small_model();
  auto checkpoints = std::make_shared<io::ModelCheckpoint>(scratch.path().string());
  auto stop = std::make_shared<train::LambdaCallback>(train::LambdaCallback::Functions{
      .on_train_batch_end = [&](std::int64_t batch, const train::Logs&) {
        if (batch == 6) model.set_stop_training(true);
      }});
  model.fit(*dataset, {.epochs = kEpochs, .callbacks = {checkpoints, stop}});
  // Stopped in the first epoch after 7 batches: no epoch ended, the stop point is saved.
  ASSERT_EQ(checkpoints->saved().size(), 1u);
  EXPECT_EQ(checkpoints->saved().front(), (io::TrainingPosition{0, 7, 7}));
  EXPECT_EQ(checkpoints->manager(), nullptr) << "the folder stays locked after fit";

  ScratchDir epochs;
  nn::Model other = testing::small_model();
  auto every_epoch = std::make_shared<io::ModelCheckpoint>(epochs.path().string());
  other.fit(*dataset, {.epochs = kEpochs, .callbacks = {every_epoch}});
  EXPECT_EQ(every_epoch->saved(),
            (std::vector<io::TrainingPosition>{{1, 0, 12}, {2, 0, 24}, {3, 0, 36}}));
  EXPECT_GE(every_epoch->seconds_writing(), 0.0);
}

TEST(Checkpoint, KeepsTheNewestAndTheBestByTheMonitoredLog) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  const std::vector<double> losses{5, 1, 4, 3, 2, 6};
  {
    io::CheckpointManager manager(scratch.path().string(),
                                  {.keep_last = 2, .monitor = "val_loss", .async = false});
    for (std::size_t i = 0; i < losses.size(); ++i) {
      const auto step = static_cast<std::int64_t>(i + 1);
      manager.save(model, {0, step, step}, {{"val_loss", losses[i]}}, 12, 1);
    }
    ASSERT_TRUE(manager.best().has_value());
    EXPECT_EQ(manager.best()->position.step, 2);
    EXPECT_EQ(manager.latest()->position.step, 6);
  }
  std::vector<std::int64_t> kept;
  for (const io::CheckpointInfo& info : io::list_checkpoints(scratch.path().string()))
    kept.push_back(info.position.step);
  EXPECT_EQ(kept, (std::vector<std::int64_t>{2, 5, 6}));

  ScratchDir accuracy;
  io::CheckpointManager by_accuracy(accuracy.path().string(),
                                    {.keep_last = 1, .monitor = "accuracy", .async = false});
  for (std::int64_t step = 1; step <= 4; ++step) {
    by_accuracy.save(model, {0, step, step}, {{"accuracy", step == 2 ? 0.9 : 0.5}}, 12, 1);
  }
  EXPECT_EQ(by_accuracy.best()->position.step, 2) << "auto mode maximises accuracies";
  EXPECT_EQ(by_accuracy.checkpoints().size(), 2u);
}

TEST(Checkpoint, AsynchronousAndSynchronousWritesGiveTheSameFiles) {
  ScratchDir async_dir;
  ScratchDir sync_dir;
  const auto dataset = testing::small_dataset();
  nn::Model model = testing::small_model();
  model.fit(*dataset, {.epochs = 1});
  {
    io::CheckpointManager async(async_dir.path().string(), {.async = true});
    io::CheckpointManager sync(sync_dir.path().string(), {.async = false});
    async.save(model, {1, 0, 12}, {}, 12, 1);
    sync.save(model, {1, 0, 12}, {}, 12, 1);
    async.wait();
    EXPECT_GT(async.seconds_writing(), 0.0);
  }
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    EXPECT_EQ(testing::read_file((async_dir.path() / "ckpt-0000000012" / file).string()),
              testing::read_file((sync_dir.path() / "ckpt-0000000012" / file).string()))
        << file;
  }
}

TEST(Checkpoint, FlippedBytesInAnyFileAreDetected) {
  // Every byte of the state and of the safetensors headers, and every 7th byte of the tensor
  // data (each data byte is covered alike by the file's CRC-32C; the sampling keeps it fast).
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  model.fit(*testing::small_dataset(), {.epochs = 1});
  {
    io::CheckpointManager manager(scratch.path().string(), {.async = false});
    manager.save(model, {1, 0, 12}, {{"loss", 0.5}}, 12, 1);
  }
  const fs::path folder = scratch.path() / "ckpt-0000000012";
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    const std::string path = (folder / file).string();
    const testing::Bytes good = testing::read_file(path);
    const bool is_state = std::string(file) == "state.json";
    std::size_t header_end = good.size();
    if (!is_state) {
      header_end = 8;
      for (int i = 7; i >= 0; --i)
        header_end += static_cast<std::size_t>(good[static_cast<std::size_t>(i)]) << (8 * i);
    }
    std::size_t flips = 0;
    for (std::size_t offset = 0; offset < good.size(); offset += offset < header_end ? 1 : 7) {
      testing::flip_byte(path, offset, 0x04);
      ++flips;
      const std::string message = io_error_of([&] { io::verify_checkpoint(folder.string()); });
      testing::flip_byte(path, offset, 0x04);
      ASSERT_NE(message.find(file), std::string::npos)
          << file << " byte " << offset << ": " << message;
    }
    ASSERT_EQ(testing::read_file(path), good);
    EXPECT_GT(flips, 100u) << file;
  }
  EXPECT_NO_THROW(io::verify_checkpoint(folder.string()));
}

TEST(Checkpoint, TruncatedAndMissingFilesAreDetected) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  {
    io::CheckpointManager manager(scratch.path().string(), {.async = false});
    manager.save(model, {0, 0, 0}, {}, 12, 1);
  }
  const fs::path folder = scratch.path() / "ckpt-0000000000";
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    const std::string path = (folder / file).string();
    const testing::Bytes good = testing::read_file(path);
    for (const std::size_t size : {std::size_t{0}, good.size() / 2, good.size() - 1}) {
      testing::write_file(path,
                          testing::Bytes(good.begin(), good.begin() + static_cast<long>(size)));
      const std::string message = io_error_of([&] { io::verify_checkpoint(folder.string()); });
      EXPECT_NE(message.find(file), std::string::npos) << size << ": " << message;
    }
    fs::remove(path);
    EXPECT_NE(io_error_of([&] { io::verify_checkpoint(folder.string()); }).find(file),
              std::string::npos);
    testing::write_file(path, good);
  }
  EXPECT_NO_THROW(io::verify_checkpoint(folder.string()));
}

TEST(Checkpoint, ADamagedNewestCheckpointPointsToTheIntactOlderOne) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  {
    io::CheckpointManager manager(scratch.path().string(), {.async = false});
    manager.save(model, {0, 3, 3}, {}, 12, 1);
    manager.save(model, {0, 6, 6}, {}, 12, 1);
  }
  testing::flip_byte((scratch.path() / "ckpt-0000000006" / "model.safetensors").string(), 100);
  nn::Model target = testing::small_model();
  const std::string message =
      io_error_of([&] { io::restore_checkpoint(scratch.path().string(), target); });
  EXPECT_NE(message.find("ckpt-0000000006/model.safetensors"), std::string::npos) << message;
  EXPECT_NE(message.find("ckpt-0000000003 is intact"), std::string::npos) << message;
  EXPECT_EQ(
      io::restore_checkpoint((scratch.path() / "ckpt-0000000003").string(), target).position.step,
      3);
}

TEST(Checkpoint, AModelOfAnotherArchitectureIsRefusedPerTensorAndLeftAlone) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  {
    io::CheckpointManager manager(scratch.path().string(), {.async = false});
    manager.save(model, {0, 0, 0}, {}, 12, 1);
  }
  nn::clear_session();
  manual_seed(1);
  nn::Sequential wider({nn::Conv2D(4, 3, nn::Conv2DConfig{.padding = "same", .use_bias = false}),
                        nn::BatchNormalization(), nn::Activation("relu"), nn::MaxPool2D(),
                        nn::Flatten(), nn::Dense(16, "relu"), nn::Dense(3)});
  wider.build({6, 6, 1});
  wider.compile(
      {.optimizer = train::Adam(0.01), .loss = train::SparseCategoricalCrossentropy(true)});
  nn::Model other(std::move(wider));
  const Tensor before = other.weights().back().clone();
  const std::string message =
      error_of([&] { io::restore_checkpoint(scratch.path().string(), other); });
  EXPECT_NE(message.find("'dense/kernel' is f32 (36, 16) in the model but f32 (36, 8) in "
                         "model.safetensors"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("'dense_1/kernel' is f32 (16, 3) in the model but f32 (8, 3)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("(3 problems)"), std::string::npos) << message;
  EXPECT_TRUE(same_bits(before, other.weights().back())) << "a refused restore changed weights";
}

TEST(Checkpoint, AnotherOptimizerOrAnUncompiledModelIsRefused) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  model.fit(*testing::small_dataset(), {.epochs = 1});
  {
    io::CheckpointManager manager(scratch.path().string(), {.async = false});
    manager.save(model, {1, 0, 12}, {}, 12, 1);
  }
  nn::Model sgd = testing::small_model(5, train::SGD(0.1, 0.9));
  EXPECT_NE(error_of([&] {
              io::restore_checkpoint(scratch.path().string(), sgd);
            }).find("the checkpoint's optimizer is Adam but the model is compiled with SGD"),
            std::string::npos);
  nn::Sequential bare({nn::Dense(3)});
  bare.build({4});
  nn::Model uncompiled(std::move(bare));
  EXPECT_NE(error_of([&] {
              io::restore_checkpoint(scratch.path().string(), uncompiled);
            }).find("compile the model"),
            std::string::npos);
}

TEST(Checkpoint, AFullDiskKeepsThePreviousCheckpointIntact) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  for (const bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    const fs::path directory = scratch.path() / (async ? "async" : "sync");
    io::CheckpointManager manager(directory.string(), {.async = async});
    manager.save(model, {0, 1, 1}, {}, 12, 1);
    manager.wait();
    std::string message;
    {
      testing::ScopedWriteFault full({.after_bytes = 2000, .error = ENOSPC});
      message = io_error_of([&] {
        manager.save(model, {0, 2, 2}, {}, 12, 1);
        manager.wait();
      });
    }
    EXPECT_NE(message.find("checkpoint at step 2 not written"), std::string::npos) << message;
    EXPECT_NE(message.find("are intact"), std::string::npos) << message;
    EXPECT_NE(message.find("ENOSPC"), std::string::npos) << message;
    EXPECT_NE(message.find(".safetensors"), std::string::npos) << message;
    const std::vector<io::CheckpointInfo> left = io::list_checkpoints(directory.string());
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(left.front().position.step, 1);
    EXPECT_NO_THROW(io::verify_checkpoint(left.front().path));
    EXPECT_TRUE(testing::hidden_entries(directory).empty());
    // Space again: the next checkpoint is written.
    manager.save(model, {0, 3, 3}, {}, 12, 1);
    manager.wait();
    EXPECT_EQ(io::latest_checkpoint(directory.string())->position.step, 3);
  }
}

TEST(Checkpoint, LeftoversOfAKilledWriteAreRemovedWhenTheFolderOpens) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  {
    io::CheckpointManager manager(scratch.path().string(), {.async = false});
    manager.save(model, {0, 1, 1}, {}, 12, 1);
  }
  fs::create_directory(scratch.path() / ".tmp-ckpt-0000000002-123-0");
  testing::write_file(
      (scratch.path() / ".tmp-ckpt-0000000002-123-0" / "model.safetensors").string(),
      testing::Bytes(10, 1));
  fs::create_directory(scratch.path() / ".trash-ckpt-0000000000-123-1");
  EXPECT_EQ(io::list_checkpoints(scratch.path().string()).size(), 1u);
  io::CheckpointManager reopened(scratch.path().string());
  EXPECT_TRUE(testing::hidden_entries(scratch.path()).empty());
  EXPECT_EQ(reopened.checkpoints().size(), 1u);
}

TEST(Checkpoint, ASecondWriterToOneFolderIsRefused) {
  ScratchDir scratch;
  io::CheckpointManager first(scratch.path().string());
  EXPECT_NE(io_error_of([&] {
              io::CheckpointManager second(scratch.path().string());
            }).find("in use by another Tandem process"),
            std::string::npos);
}

TEST(Checkpoint, AFolderWithoutCheckpointsSaysSo) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  EXPECT_NE(io_error_of([&] {
              io::restore_checkpoint(scratch.path().string(), model);
            }).find("no checkpoint in"),
            std::string::npos);
  EXPECT_NE(
      io_error_of([&] { io::read_checkpoint_info(scratch.file("absent")); }).find("does not exist"),
      std::string::npos);
  EXPECT_FALSE(io::latest_checkpoint(scratch.path().string()).has_value());
}

TEST(Fit, RejectsAResumePositionOutsideTheRun) {
  nn::Model model = testing::small_model();
  const auto dataset = testing::small_dataset();
  EXPECT_NE(error_of([&] {
              model.fit(*dataset, {.epochs = 2, .initial_epoch = 3});
            }).find("initial_epoch"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              model.fit(*dataset, {.epochs = 2, .initial_step = 13});
            }).find("initial_step"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              model.fit(*dataset, {.epochs = 2, .initial_epoch = 2, .initial_step = 1});
            }).find("initial_step"),
            std::string::npos);
  // initial_epoch == epochs: nothing left to train, and no error.
  EXPECT_NO_THROW(model.fit(*dataset, {.epochs = 2, .initial_epoch = 2}));
}

}  // namespace
}  // namespace tandem
