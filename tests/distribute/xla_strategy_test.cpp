// The Xla strategy on XLA:CPU (the plugin scripts/fetch-pjrt.sh fetches): fit's whole training
// step lowered to one StableHLO module, against the same model trained eagerly on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "support/address_space_cap.h"
#include "support/training_fixtures.h"
#include "support/xla_cpu.h"
#include "tandem/data.h"
#include "tandem/distribute.h"
#include "tandem/mixed_precision.h"
#include "tandem/nn.h"
#include "tandem/ops.h"
#include "tandem/runtime.h"
#include "tandem/train.h"
#include "tandem/xla.h"

namespace tandem::testing {
namespace {

// A CNN with dropout and batch normalisation, so that Philox masks, moving statistics and Adam's
// slots all go through the lowered step.
nn::Model compiled_model(const distribute::Strategy* strategy) {
  manual_seed(5);
  std::optional<distribute::StrategyScope> scope;
  if (strategy != nullptr) scope.emplace(strategy->scope());
  nn::Model model(
      nn::Sequential({nn::Conv2D(8, 3, "relu"), nn::BatchNormalization(), nn::MaxPool2D(),
                      nn::Flatten(), nn::Dropout(0.25), nn::Dense(16, "relu"), nn::Dense(4)}));
  model.compile({.optimizer = train::Adam(1e-2),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  return model;
}

// Each step's loss, as fit logs it.
std::vector<double> step_losses(nn::Model& model, const data::Dataset& dataset, int epochs) {
  std::vector<double> losses;
  auto record = std::make_shared<train::LambdaCallback>(train::LambdaCallback::Functions{
      .on_train_batch_end = [&](std::int64_t, const train::Logs& logs) {
        losses.push_back(logs.at("loss"));
      }});
  model.fit(dataset, {.epochs = epochs, .verbose = 0, .callbacks = {record}});
  return losses;
}

TEST(XlaStrategy, TrainsLikeTheEagerCpuStepForStep) {
  SKIP_WITHOUT_XLA_CPU();
  set_num_threads(1);
  // 5 batches of 16 and a last one of 4 (a second program), over 4 epochs: 24 steps.
  const data::TensorDataset dataset = make_dataset(84, 16, 12);
  nn::Model eager = compiled_model(nullptr);
  const std::vector<double> expected = step_losses(eager, dataset, 4);

  const distribute::Xla strategy;
  nn::Model lowered = compiled_model(&strategy);
  const std::vector<double> losses = step_losses(lowered, dataset, 4);

  ASSERT_EQ(losses.size(), expected.size());
  ASSERT_EQ(losses.size(), 24u);
  for (std::size_t step = 0; step < losses.size(); ++step) {
    // XLA's exp, log and sums round differently from the CPU kernels; the dropout masks are
    // the same (else a loss would differ by far more).
    EXPECT_NEAR(losses[step], expected[step], 1e-5 * std::max(1.0, std::abs(expected[step])))
        << "step " << step;
  }
  // The model's host weights (and moving statistics) are the device's after the last step.
  EXPECT_LT(max_difference(eager, lowered), 1e-3);
  EXPECT_NEAR(lowered.evaluate(dataset).at("loss"), eager.evaluate(dataset).at("loss"), 1e-4);
}

// Mixed precision lowers as the dtype policy says: layers made under mixed_bfloat16 compute in
// bf16 with f32 variables, through XLA as through the CPU kernels (bf16's rounding apart).
TEST(XlaStrategy, MixedBfloat16TrainsLikeTheEagerCpu) {
  SKIP_WITHOUT_XLA_CPU();
  set_num_threads(1);
  const data::TensorDataset dataset = make_dataset(64, 16, 12);
  const auto train_under = [&](const distribute::Strategy* strategy) {
    mixed_precision::set_global_policy("mixed_bfloat16");
    nn::Model model = compiled_model(strategy);
    mixed_precision::clear_global_policy();
    return std::pair{step_losses(model, dataset, 2), std::move(model)};
  };
  auto [expected, eager] = train_under(nullptr);
  const distribute::Xla strategy;
  auto [losses, lowered] = train_under(&strategy);
  ASSERT_EQ(losses.size(), 8u);
  ASSERT_EQ(losses.size(), expected.size());
  for (std::size_t step = 0; step < losses.size(); ++step)
    // Seen: within 6e-4 relative (the first steps to 6 digits).
    EXPECT_NEAR(losses[step], expected[step], 2e-3 * std::max(1.0, expected[step])) << step;
  EXPECT_EQ(lowered.trainable_weights().front().dtype(), DType::f32);
  EXPECT_LT(max_difference(eager, lowered), 2e-2);  // seen: 5.2e-3
}

// Op by op on XLA:CPU's device (tandem train --strategy xla-cpu --jit off): fit's eager step with
// every op compiled alone, once, and then taken from the cache.
TEST(XlaOpByOp, TrainsLikeTheEagerCpuStepForStep) {
  SKIP_WITHOUT_XLA_CPU();
  set_num_threads(1);
  const data::TensorDataset dataset = make_dataset(84, 16, 12);
  nn::Model eager = compiled_model(nullptr);
  std::vector<double> expected = step_losses(eager, dataset, 1);
  const std::vector<double> expected_second = step_losses(eager, dataset, 1);
  expected.insert(expected.end(), expected_second.begin(), expected_second.end());

  const std::shared_ptr<distribute::Strategy> strategy = distribute::xla_op_by_op({});
  ASSERT_EQ(strategy->devices().size(), 1u);
  EXPECT_EQ(strategy->devices().front(), Device::xla(0));
  nn::Model on_xla = compiled_model(strategy.get());
  const xla::EagerStats before = xla::eager_stats();
  std::vector<double> losses = step_losses(on_xla, dataset, 1);
  const xla::EagerStats first_epoch = xla::eager_stats();
  EXPECT_EQ(on_xla.trainable_weights().front().device(), Device::xla(0));
  const std::vector<double> second = step_losses(on_xla, dataset, 1);
  losses.insert(losses.end(), second.begin(), second.end());
  const xla::EagerStats second_epoch = xla::eager_stats();
  // The second epoch's ops (forward, backward, Adam, metrics) all came from the cache.
  EXPECT_GT(first_epoch.ops_run - before.ops_run, 6u * 30u);  // 6 steps of ~37 ops
  EXPECT_EQ(second_epoch.compiled, first_epoch.compiled);

  ASSERT_EQ(losses.size(), expected.size());
  ASSERT_EQ(losses.size(), 12u);
  for (std::size_t step = 0; step < losses.size(); ++step) {
    EXPECT_NEAR(losses[step], expected[step], 1e-5 * std::max(1.0, std::abs(expected[step])))
        << "step " << step;
  }
  EXPECT_LT(max_difference(eager, on_xla), 1e-3);
}

TEST(XlaOpByOp, RunsOnOneDevice) {
  SKIP_WITHOUT_XLA_CPU();
  EXPECT_THROW(distribute::xla_op_by_op({.platform = "cpu", .replicas = 2}), InvalidArgument);
}

// TPUStrategy's path on XLA:CPU's devices: one program for 2 replicas, gradients summed by
// all_reduce. Without batch normalisation (whose batch statistics are each replica's own) two
// replicas of half the batch train like one of the whole batch, dropout masks included.
TEST(XlaStrategy, TwoReplicasOfHalfTheBatchTrainLikeOneOfTheWholeBatch) {
  SKIP_WITHOUT_XLA_CPU();
  set_num_threads(1);
  const data::TensorDataset dataset = make_dataset(96, 32, 12);
  const auto model_under = [](const distribute::Strategy& strategy) {
    manual_seed(5);
    const distribute::StrategyScope scope = strategy.scope();
    nn::Model model(nn::Sequential({nn::Conv2D(8, 3, "relu"), nn::MaxPool2D(), nn::Flatten(),
                                    nn::Dropout(0.25), nn::Dense(16, "relu"), nn::Dense(4)}));
    model.compile({.optimizer = train::Adam(1e-2),
                   .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
    return model;
  };
  const distribute::Xla one;
  nn::Model whole = model_under(one);
  const std::vector<double> expected = step_losses(whole, dataset, 3);
  const distribute::Xla two({.platform = "cpu", .replicas = 2});
  EXPECT_EQ(two.num_replicas_in_sync(), 2);
  nn::Model halves = model_under(two);
  const std::vector<double> losses = step_losses(halves, dataset, 3);
  ASSERT_EQ(losses.size(), 9u);
  for (std::size_t step = 0; step < losses.size(); ++step)
    EXPECT_NEAR(losses[step], expected[step], 1e-5 * std::max(1.0, expected[step])) << step;
  EXPECT_LT(max_difference(whole, halves), 1e-4);
}

// With batch normalisation each replica normalises with its own batch statistics and the moving
// statistics become the replicas' mean: as Mirrored trains two CPU replicas.
TEST(XlaStrategy, ReplicasAverageTheirMovingStatisticsAsMirroredDoes) {
  SKIP_WITHOUT_XLA_CPU();
  set_num_threads(1);
  const data::TensorDataset dataset = make_dataset(64, 16, 12);
  const distribute::Mirrored mirrored({Device::cpu(), Device::cpu()},
                                      distribute::DeviceInventory{});
  const distribute::Xla xla_replicas({.platform = "cpu", .replicas = 2});
  const auto train_under = [&](const distribute::Strategy& strategy) {
    manual_seed(5);
    const distribute::StrategyScope scope = strategy.scope();
    nn::Model model(nn::Sequential({nn::Conv2D(8, 3), nn::BatchNormalization(/*momentum=*/0.5),
                                    nn::Activation("relu"), nn::Flatten(), nn::Dense(4)}));
    model.compile({.optimizer = train::SGD(0.05),
                   .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
    model.fit(dataset, {.epochs = 2, .verbose = 0});
    return model;
  };
  const nn::Model reference = train_under(mirrored);
  const nn::Model lowered = train_under(xla_replicas);
  EXPECT_LT(max_difference(reference, lowered), 1e-4);
  const std::vector<float> mean = lowered.non_trainable_weights()[0].to_vector<float>();
  EXPECT_GT(std::abs(mean[0]), 1e-3);  // the statistics moved
}

// A step whose program needs more than the device has (logits of 4096 x 1,000,000: 16 GB, under
// an address-space cap of a few GiB) is OutOfMemory naming XLA:CPU, with fit's batch size and
// fixes, not a crash.
TEST(XlaStrategy, AStepThatRunsTheDeviceOutOfMemoryIsOutOfMemory) {
  SKIP_WITHOUT_XLA_CPU();
  SKIP_WITHOUT_ADDRESS_SPACE_CAP();
  const distribute::Xla strategy;
  nn::Model model = [&] {
    const distribute::StrategyScope scope = strategy.scope();
    nn::Model built(nn::Sequential({nn::Dense(1'000'000)}));
    built.compile({.optimizer = train::SGD(0.1),
                   .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
    return built;
  }();
  data::TensorDataset dataset(Tensor::ones({4096, 1}), Tensor::zeros({4096}, DType::i32));
  dataset.batch(4096);
  try {
    const AddressSpaceCap cap;
    model.fit(dataset, {.epochs = 1, .verbose = 0});
    FAIL() << "the step ran";
  } catch (const OutOfMemory& error) {
    const std::string message = error.what();
    EXPECT_NE(
        message.find("out of memory on XLA:cpu: the training step's program asked for 15.26 GiB"),
        std::string::npos)
        << message;
    EXPECT_NE(message.find("RESOURCE_EXHAUSTED"), std::string::npos) << message;
    EXPECT_NE(message.find("training a batch of 4096 examples. Try a smaller batch size"),
              std::string::npos)
        << message;
    EXPECT_EQ(error.device(), "XLA:cpu") << message;
  }
}

TEST(XlaStrategy, ABatchThatDoesNotSplitOverTheReplicasIsAnError) {
  SKIP_WITHOUT_XLA_CPU();
  const distribute::Xla strategy({.platform = "cpu", .replicas = 2});
  const data::TensorDataset dataset = make_dataset(10, 5, 12);
  nn::Model model = [&] {
    const distribute::StrategyScope scope = strategy.scope();
    nn::Model built(nn::Sequential({nn::Flatten(), nn::Dense(4)}));
    built.compile({.optimizer = train::SGD(0.1),
                   .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
    return built;
  }();
  try {
    model.fit(dataset, {.epochs = 1, .verbose = 0});
    FAIL() << "trained batches of 5 on 2 replicas";
  } catch (const InvalidArgument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("a global batch of 5 examples does not split over 2 XLA replicas"),
              std::string::npos)
        << message;
  }
}

// Records the model's first weight at each batch end.
class FirstWeightWatcher final : public train::Callback {
 public:
  explicit FirstWeightWatcher(bool reads_weights) : reads_weights_(reads_weights) {}
  bool reads_weights_at_batch_end() const override { return reads_weights_; }
  void on_train_batch_end(std::int64_t, const train::Logs&) override {
    seen.push_back(model()->weights().front().to_vector<float>().front());
  }
  std::vector<float> seen;

 private:
  bool reads_weights_;
};

// The weights stay on the device between steps: the model's host tensors are brought up to date
// at each epoch's end, and at each batch end only when a callback reads them there.
TEST(XlaStrategy, WeightsComeBackWhenSomethingReadsThem) {
  SKIP_WITHOUT_XLA_CPU();
  const data::TensorDataset dataset = make_dataset(48, 16, 12);  // 3 steps an epoch
  for (const bool reads : {false, true}) {
    const distribute::Xla strategy;
    nn::Model model = compiled_model(&strategy);
    auto watcher = std::make_shared<FirstWeightWatcher>(reads);
    model.fit(dataset, {.epochs = 2, .verbose = 0, .callbacks = {watcher}});
    ASSERT_EQ(watcher->seen.size(), 6u);
    if (reads) {
      EXPECT_NE(watcher->seen[0], watcher->seen[1]);
      EXPECT_NE(watcher->seen[1], watcher->seen[2]);
    } else {
      // Stale within an epoch, current from its end on.
      EXPECT_EQ(watcher->seen[0], watcher->seen[2]);
      EXPECT_NE(watcher->seen[2], watcher->seen[3]);
      EXPECT_EQ(watcher->seen[3], watcher->seen[5]);
    }
    // After fit the model holds the last step's weights either way.
    const float last = model.weights().front().to_vector<float>().front();
    if (reads) EXPECT_EQ(last, watcher->seen[5]);
    if (!reads) EXPECT_NE(last, watcher->seen[5]);
  }
}

TEST(XlaStrategy, DescribesItsPlatformAndPlugin) {
  SKIP_WITHOUT_XLA_CPU();
  const distribute::Xla strategy;
  EXPECT_EQ(strategy.num_replicas_in_sync(), 1);
  const std::string description = strategy.description();
  EXPECT_NE(description.find("Xla(cpu"), std::string::npos) << description;
  EXPECT_NE(description.find(xla::fetched_cpu_plugin()), std::string::npos) << description;
}

TEST(XlaStrategy, AMissingPluginIsUnavailableWithItsPath) {
  if (!xla::build_info().built) GTEST_SKIP() << xla::build_info().reason;
  try {
    distribute::Xla strategy({.platform = "cpu", .plugin = "/nonexistent/libpjrt.so"});
    FAIL() << "made an Xla strategy over a missing plugin";
  } catch (const distribute::DeviceUnavailable& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent/libpjrt.so"), std::string::npos)
        << error.what();
  }
}

// A plugin older than the PJRT C API Tandem was built with (the fake one says 0.54 and has a
// table of three fields) is refused before any of its functions is called.
TEST(XlaStrategy, APluginWithAnOlderApiIsRefusedWithItsVersion) {
  if (!xla::build_info().built) GTEST_SKIP() << xla::build_info().reason;
  try {
    distribute::Xla strategy({.platform = "cpu", .plugin = TANDEM_FAKE_PJRT_PLUGIN});
    FAIL() << "used a PJRT C API 0.54 plugin";
  } catch (const distribute::DeviceUnavailable& error) {
    const std::string message = error.what();
    EXPECT_NE(
        message.find(std::string(TANDEM_FAKE_PJRT_PLUGIN) + " has PJRT C API 0.54, older than"),
        std::string::npos)
        << message;
    EXPECT_NE(message.find("use a newer plugin"), std::string::npos) << message;
  }
}

TEST(XlaStrategy, AnUntraceableOptimizerIsRefusedAtCompile) {
  SKIP_WITHOUT_XLA_CPU();
  const distribute::Xla strategy;
  const distribute::StrategyScope scope = strategy.scope();
  nn::Model model(nn::Sequential({nn::Dense(2)}));
  // Accumulating gradients decides on the host at which step to apply them.
  try {
    model.compile(
        {.optimizer = train::Adam(1e-3, 0.9, 0.999, 1e-7, {.gradient_accumulation_steps = 2}),
         .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
    FAIL() << "compiled an untraceable step for XLA";
  } catch (const InvalidArgument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("accumulates gradients"), std::string::npos) << message;
    EXPECT_NE(message.find("--strategy cpu"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace tandem::testing
