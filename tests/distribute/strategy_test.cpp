// Strategies: the fallback chain TPU -> several GPUs -> one GPU -> CPU with devices faked absent
// or present, the errors for devices that do not exist, the global batch and learning-rate
// rules, and Mirrored over logical CPU replicas matching a single device.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "distribute/replication.h"
#include "support/training_fixtures.h"
#include "tandem/distribute.h"
#include "tandem/nn.h"
#include "tandem/ops.h"
#include "tandem/random.h"
#include "tandem/runtime.h"
#include "tandem/xla.h"

namespace tandem::testing {
namespace {

using distribute::DeviceInventory;
using distribute::StrategyChoice;

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines)
    text += line + "\n";
  return text;
}

// Nothing but the CPU: what this test machine has, whatever is installed on it.
DeviceInventory cpu_only() {
  DeviceInventory inventory;
  inventory.cuda.reason = "no NVIDIA driver: libcuda.so.1: cannot open shared object file";
  inventory.cuda.backend_reason = "this build of Tandem has no CUDA backend";
  inventory.nccl.reason = "no NCCL: libnccl.so.2: cannot open shared object file";
  inventory.tpu.reason = "this build of Tandem has no XLA backend to run on TPUs yet; no TPU";
  return inventory;
}

DeviceInventory with_gpus(int count, bool backend, bool nccl) {
  DeviceInventory inventory = cpu_only();
  inventory.cuda.reason.clear();
  for (int index = 0; index < count; ++index) {
    inventory.cuda.gpus.push_back({.index = index, .name = "NVIDIA H200"});
  }
  inventory.cuda.backend_built = backend;
  inventory.cuda.backend_available = backend;
  if (backend) inventory.cuda.backend_reason.clear();
  inventory.nccl.loaded = nccl;
  if (nccl) inventory.nccl.version = "2.28.9";
  return inventory;
}

TEST(StrategyChoice, FallsBackFromTpuToSeveralGpus) {
  DeviceInventory inventory = with_gpus(4, true, true);
  inventory.tpu.chips = {{"0000:00:04.0", "0x0063"}};
  inventory.tpu.plugin.loaded = true;
  inventory.tpu.reason = "this build of Tandem has no XLA backend to run on TPUs yet; 1 TPU chip";
  const StrategyChoice choice = distribute::choose_strategy(inventory, 1);
  EXPECT_EQ(choice.kind, "mirrored");
  EXPECT_EQ(choice.devices, (std::vector<Device>{Device::cuda(0), Device::cuda(1), Device::cuda(2),
                                                 Device::cuda(3)}));
  ASSERT_EQ(choice.log.size(), 2u);
  expect_contains(choice.log[0], "TPU: not available: this build of Tandem has no XLA backend");
  expect_contains(choice.log[1], "chose Mirrored over 4 GPUs (cuda:0, cuda:1, cuda:2, cuda:3)");
  expect_contains(choice.log[1], "NCCL 2.28.9");
}

TEST(StrategyChoice, SeveralGpusWithoutNcclFallBackToOneGpu) {
  const StrategyChoice choice = distribute::choose_strategy(with_gpus(4, true, false), 1);
  EXPECT_EQ(choice.kind, "one_device");
  EXPECT_EQ(choice.devices, std::vector<Device>{Device::cuda(0)});
  const std::string log = joined(choice.log);
  expect_contains(log, "several GPUs: 4 found, but NCCL cannot be loaded");
  expect_contains(log, "libnccl.so.2");
  expect_contains(log, "chose OneDevice(cuda:0)");
}

TEST(StrategyChoice, OneGpuIsOneDevice) {
  const StrategyChoice choice = distribute::choose_strategy(with_gpus(1, true, true), 1);
  EXPECT_EQ(choice.kind, "one_device");
  EXPECT_EQ(choice.devices, std::vector<Device>{Device::cuda(0)});
  expect_contains(joined(choice.log), "several GPUs: not available: this machine has one GPU");
}

TEST(StrategyChoice, GpusWithoutABackendFallBackToTheCpu) {
  const StrategyChoice choice = distribute::choose_strategy(with_gpus(2, false, true), 1);
  EXPECT_EQ(choice.kind, "one_device");
  EXPECT_EQ(choice.devices, std::vector<Device>{Device::cpu()});
  const std::string log = joined(choice.log);
  expect_contains(log,
                  "several GPUs: not available: 2 GPUs found (NVIDIA H200), but this build "
                  "of Tandem has no CUDA backend");
  expect_contains(log, "one GPU: not available: 2 GPUs found");
  expect_contains(log, "chose OneDevice(cpu)");
}

TEST(StrategyChoice, NothingButTheCpuLogsEveryFallback) {
  const StrategyChoice choice = distribute::choose_strategy(cpu_only(), 1);
  EXPECT_EQ(choice.kind, "one_device");
  EXPECT_EQ(choice.devices, std::vector<Device>{Device::cpu()});
  ASSERT_EQ(choice.log.size(), 4u);
  expect_contains(choice.log[0], "TPU: not available");
  expect_contains(choice.log[1], "several GPUs: not available: no NVIDIA driver");
  expect_contains(choice.log[2], "one GPU: not available: no NVIDIA driver");
  EXPECT_EQ(choice.log[3], "chose OneDevice(cpu)");
}

TEST(StrategyChoice, LaunchedProcessesMakeMultiWorker) {
  const StrategyChoice on_cpus = distribute::choose_strategy(cpu_only(), 2);
  EXPECT_EQ(on_cpus.kind, "multi_worker");
  EXPECT_EQ(on_cpus.devices, std::vector<Device>{Device::cpu()});
  expect_contains(joined(on_cpus.log),
                  "chose MultiWorker: 2 processes were launched together; "
                  "each trains on its CPU, all-reduced with MPI");
  const StrategyChoice on_gpus = distribute::choose_strategy(with_gpus(8, true, true), 8);
  EXPECT_EQ(on_gpus.kind, "multi_worker");
  expect_contains(joined(on_gpus.log), "all-reduced with NCCL");
}

TEST(Strategy, AutoSelectOnThisMachineFallsBackToTheCpuAndSaysWhy) {
  ::setenv("TANDEM_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  ::setenv("TANDEM_PJRT_PLUGIN", "/nonexistent/libtpu.so", 1);
  std::ostringstream log;
  const auto strategy = distribute::Strategy::auto_select(&log);
  ::unsetenv("TANDEM_CUDA_DRIVER");
  ::unsetenv("TANDEM_PJRT_PLUGIN");
  EXPECT_EQ(strategy->description(), "OneDevice(cpu)");
  EXPECT_EQ(strategy->num_replicas_in_sync(), 1);
  EXPECT_TRUE(strategy->is_chief());
  expect_contains(log.str(), "strategy: TPU: not available");
  expect_contains(log.str(), "/nonexistent/libtpu.so");
  expect_contains(log.str(),
                  "strategy: one GPU: not available: no NVIDIA driver: "
                  "/nonexistent/libcuda.so.1");
  expect_contains(log.str(), "strategy: chose OneDevice(cpu)");
  ASSERT_EQ(strategy->selection_log().size(), 4u);
  for (const std::string& line : strategy->selection_log()) {
    expect_contains(log.str(), "strategy: " + line + "\n");
  }
}

// A TPU that discovery reported but that cannot start (here: none is on this machine's PCI bus,
// so libtpu is never initialised) is logged, and auto goes on down the chain.
TEST(Strategy, AutoFallsBackWhenTheTpuFailsToStart) {
  if (!xla::build_info().built) GTEST_SKIP() << xla::build_info().reason;
  DeviceInventory inventory = cpu_only();
  inventory.tpu.chips = {{"0000:00:04.0", "0x0063"}};
  inventory.tpu.plugin = {.loaded = true, .path = TANDEM_FAKE_PJRT_PLUGIN, .version = "0.54"};
  inventory.tpu.backend_built = true;
  inventory.tpu.reason.clear();
  ASSERT_TRUE(inventory.tpu.usable());
  std::ostringstream log;
  const auto strategy = distribute::Strategy::auto_select(inventory, &log);
  EXPECT_EQ(strategy->description(), "OneDevice(cpu)");
  const std::string text = log.str();
  expect_contains(text, "strategy: chose TPU: 1 chips");
  expect_contains(text, "strategy: tpu failed to start: ");
  expect_contains(text, "strategy: several GPUs: not available");
  expect_contains(text, "strategy: chose OneDevice(cpu)");
  EXPECT_EQ(text.find("TPU: not available: failed to start"), std::string::npos) << text;
}

TEST(Strategy, ADeviceThatDoesNotExistIsRefused) {
  const auto message = [](auto make) {
    try {
      make();
    } catch (const distribute::DeviceUnavailable& error) {
      return std::string(error.what());
    }
    return std::string("(no DeviceUnavailable thrown)");
  };
  expect_contains(message([] { distribute::OneDevice(Device::cuda(3), with_gpus(1, true, true)); }),
                  "cuda:3 does not exist: this machine has 1 GPU, cuda:0");
  expect_contains(message([] { distribute::OneDevice(Device::cuda(0), cpu_only()); }),
                  "cuda:0 does not exist: no NVIDIA driver");
  expect_contains(
      message([] { distribute::OneDevice(Device::cuda(1), with_gpus(2, false, true)); }),
      "cuda:1 (NVIDIA H200) cannot be used: this build of Tandem has no CUDA backend");
  expect_contains(message([] {
                    distribute::OneDevice(Device{DeviceType::cpu, 1});
                  }),
                  "cpu:1 does not exist");
  expect_contains(message([] {
                    distribute::Mirrored({Device::cuda(0), Device::cuda(1)}, cpu_only());
                  }),
                  "cuda:0 does not exist");
  expect_contains(message([] { distribute::TPU tpu(cpu_only()); }),
                  "the TPU strategy is not available: this build of Tandem has no XLA backend");
}

TEST(Strategy, GlobalBatchAndLearningRateRules) {
  const distribute::Mirrored strategy({Device::cpu(), Device::cpu(), Device::cpu()}, cpu_only());
  EXPECT_EQ(strategy.num_replicas_in_sync(), 3);
  EXPECT_EQ(strategy.global_batch_size(32), 96);
  EXPECT_DOUBLE_EQ(strategy.scaled_learning_rate(1e-3, distribute::LearningRateScaling::none),
                   1e-3);
  EXPECT_DOUBLE_EQ(strategy.scaled_learning_rate(1e-3, distribute::LearningRateScaling::linear),
                   3e-3);
  EXPECT_THROW(strategy.global_batch_size(0), InvalidArgument);
  EXPECT_EQ(strategy.description(), "Mirrored(cpu, cpu, cpu)");
}

TEST(Strategy, MirroredDegeneratesToTheCpuWithoutGpus) {
  const distribute::Mirrored strategy({}, cpu_only());
  EXPECT_EQ(strategy.devices(), std::vector<Device>{Device::cpu()});
  EXPECT_EQ(strategy.num_replicas_in_sync(), 1);
  EXPECT_EQ(strategy.description(), "Mirrored(cpu)");
}

// ---- Training under a strategy ----

nn::Model compiled_model(const std::string& zoo_name, const distribute::Strategy* strategy) {
  manual_seed(5);
  std::optional<distribute::StrategyScope> scope;
  if (strategy != nullptr) scope.emplace(strategy->scope());
  nn::Model model = nn::zoo::build(zoo_name, {16, 16, 1}, 4);
  model.compile({.optimizer = train::Adam(1e-2),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  return model;
}

TEST(Mirrored, LogicalCpuReplicasTrainLikeOneDeviceOnTheGlobalBatch) {
  set_num_threads(1);
  // 3 replicas over batches of 10 (4 + 3 + 3 examples), and a last batch of 6 (2 + 2 + 2).
  const data::TensorDataset dataset = make_dataset(46, 10);
  nn::Model single = compiled_model("cnn", nullptr);
  const train::History reference = single.fit(dataset, {.epochs = 2, .verbose = 0});

  const distribute::Mirrored strategy({Device::cpu(), Device::cpu(), Device::cpu()},
                                      DeviceInventory{});
  nn::Model mirrored = compiled_model("cnn", &strategy);
  const train::History history = mirrored.fit(dataset, {.epochs = 2, .verbose = 0});

  EXPECT_LT(max_difference(single, mirrored), 1e-5);
  // The logs cover the whole global batch, so they match too.
  for (const char* key : {"loss", "accuracy"}) {
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
      EXPECT_NEAR(reference.history().at(key)[epoch], history.history().at(key)[epoch], 1e-5)
          << key;
    }
  }
  EXPECT_EQ(reference.step_examples(), history.step_examples());
}

TEST(Mirrored, BatchNormStatisticsAreTheReplicasWeightedMean) {
  set_num_threads(1);
  const distribute::Mirrored strategy({Device::cpu(), Device::cpu()}, DeviceInventory{});
  nn::Model model = [&] {
    const distribute::StrategyScope scope = strategy.scope();
    nn::Model built =
        nn::Sequential({nn::Flatten(), nn::BatchNormalization(/*momentum=*/0.5), nn::Dense(2)});
    built.compile({.optimizer = train::SGD(0.1),
                   .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
    return built;
  }();
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 10, 20, 30, -1, 0, 4, 5, 5, 5}, {4, 3, 1});
  const Tensor y = Tensor::from_vector<std::int32_t>({0, 1, 0, 1}, {4});
  data::TensorDataset dataset(x, y);
  dataset.batch(4);
  model.fit(dataset, {.epochs = 1, .verbose = 0});

  // Replica 0 normalised rows 0-1, replica 1 rows 2-3, each with its own batch statistics; the
  // moving statistics are 0.5 * initial + 0.5 * the mean of the replicas' batch statistics.
  const std::vector<float> rows = x.to_vector<float>();
  std::vector<double> expected_mean(3), expected_variance(3);
  for (int c = 0; c < 3; ++c) {
    double mean_sum = 0, variance_sum = 0;
    for (int replica = 0; replica < 2; ++replica) {
      const double a = rows[(2 * replica) * 3 + c];
      const double b = rows[(2 * replica + 1) * 3 + c];
      const double mean = (a + b) / 2;
      mean_sum += mean;
      variance_sum += ((a - mean) * (a - mean) + (b - mean) * (b - mean)) / 2;
    }
    expected_mean[c] = 0.5 * 0.0 + 0.5 * mean_sum / 2;
    expected_variance[c] = 0.5 * 1.0 + 0.5 * variance_sum / 2;
  }
  const std::vector<Tensor> statistics = model.non_trainable_weights();
  ASSERT_EQ(statistics.size(), 2u);
  const std::vector<float> moving_mean = statistics[0].to_vector<float>();
  const std::vector<float> moving_variance = statistics[1].to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(moving_mean[c], expected_mean[c], 1e-5) << c;
    EXPECT_NEAR(moving_variance[c], expected_variance[c], 1e-4) << c;
  }
}

TEST(OneDevice, TrainsLikePlainFit) {
  set_num_threads(1);
  const data::TensorDataset dataset = make_dataset(24, 8);
  nn::Model plain = compiled_model("mlp", nullptr);
  plain.fit(dataset, {.epochs = 1, .verbose = 0});
  const distribute::OneDevice strategy(Device::cpu());
  nn::Model placed = compiled_model("mlp", &strategy);
  placed.fit(dataset, {.epochs = 1, .verbose = 0});
  EXPECT_EQ(max_difference(plain, placed), 0.0);
  EXPECT_EQ(placed.evaluate(dataset).at("loss"), plain.evaluate(dataset).at("loss"));
}

}  // namespace
}  // namespace tandem::testing
