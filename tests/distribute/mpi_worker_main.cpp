// The worker program the multi-worker tests start under mpirun (and once alone, as the
// single-process reference). It trains a zoo model with Model::fit under MultiWorker and writes,
// per rank, a digest of all weights after every step, the loss of every step and the final
// weights, BatchNormalization's moving statistics apart, and its communication statistics,
// so the test can check that the ranks stay bit-identical and match a single process.
// Fault options make one rank stall or die at a chosen point.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>

#include "distribute/replication.h"
#include "tandem/data.h"
#include "tandem/distribute.h"
#include "tandem/nn.h"
#include "tandem/ops.h"
#include "tandem/random.h"
#include "tandem/runtime.h"

namespace {

using namespace tandem;

struct Options {
  std::string out_dir;
  std::string data_dir;  // empty: synthetic images
  std::string model = "cnn";
  std::int64_t examples = 512;
  std::int64_t batch_size = 64;  // global
  int epochs = 1;
  bool single = false;  // no strategy: the single-process reference
  // With --single: replicas trained in this one process (Mirrored over logical CPU replicas), the
  // reference for models whose BatchNormalization normalises each replica's share on its own.
  int single_replicas = 1;
  std::string optimizer = "adam";  // or "sgd"
  double join_timeout = 60;
  double collective_timeout = 60;
  std::size_t bucket_bytes = std::size_t{1} << 20;
  int fault_rank = -1;
  std::string fault;  // "stall-before-fit", "stall-at-step", "die-at-step"
  std::int64_t fault_step = 0;
};

Options parse(int argc, char** argv) {
  std::map<std::string, std::string> values;
  for (int i = 1; i + 1 < argc; i += 2)
    values[argv[i]] = argv[i + 1];
  Options options;
  const auto text = [&](const char* name, std::string fallback) {
    return values.contains(name) ? values[name] : fallback;
  };
  options.out_dir = text("--out", ".");
  options.data_dir = text("--data-dir", "");
  options.model = text("--model", "cnn");
  options.examples = std::stoll(text("--examples", "512"));
  options.batch_size = std::stoll(text("--batch-size", "64"));
  options.epochs = std::stoi(text("--epochs", "1"));
  options.single = text("--single", "0") == "1";
  options.single_replicas = std::stoi(text("--single-replicas", "1"));
  options.optimizer = text("--optimizer", "adam");
  options.join_timeout = std::stod(text("--join-timeout", "60"));
  options.collective_timeout = std::stod(text("--collective-timeout", "60"));
  options.bucket_bytes = std::stoull(text("--bucket-bytes", "1048576"));
  options.fault = text("--fault", "");
  options.fault_rank = std::stoi(text("--fault-rank", "-1"));
  options.fault_step = std::stoll(text("--fault-step", "0"));
  return options;
}

// Fashion-MNIST's first examples, or synthetic images whose class is the brightest of ten
// horizontal bands (learnable, and the same on every rank: the generator is seeded).
std::pair<Tensor, Tensor> training_data(const Options& options) {
  if (!options.data_dir.empty()) {
    const data::ImageClassificationData fashion = data::load_fashion_mnist(options.data_dir);
    const auto subset =
        data::TensorDataset(fashion.train_images, fashion.train_labels).take(options.examples);
    return {subset->features(), subset->labels()};
  }
  manual_seed(7);
  Tensor images = random_uniform({options.examples, 28, 28, 1}, 0.0, 1.0);  // (N, 28, 28, 1)
  std::vector<std::int32_t> labels(static_cast<std::size_t>(options.examples));
  const float* pixels = images.data<float>();
  for (std::int64_t n = 0; n < options.examples; ++n) {
    float best = -1;
    for (int band = 0; band < 10; ++band) {
      float sum = 0;
      for (int row = band * 2; row < band * 2 + 2; ++row) {
        for (int col = 0; col < 28; ++col)
          sum += pixels[n * 784 + row * 28 + col];
      }
      if (sum > best) {
        best = sum;
        labels[static_cast<std::size_t>(n)] = band;
      }
    }
  }
  return {images, Tensor::from_vector(labels, {options.examples})};
}

std::string weights_digest(const nn::Model& model) {
  std::string all;
  for (const Tensor& weight : model.weights()) {
    const Tensor host = weight.to(Device::cpu());
    all.append(static_cast<const char*>(host.raw_data()), host.nbytes());
  }
  return distribute::detail::digest(all.data(), all.size());
}

int run(const Options& options) {
  set_num_threads(1);
  std::shared_ptr<distribute::Strategy> strategy;
  if (!options.single) {
    distribute::MultiWorkerOptions multi_worker;
    multi_worker.join_timeout_seconds = options.join_timeout;
    multi_worker.collective_timeout_seconds = options.collective_timeout;
    multi_worker.bucket_bytes = options.bucket_bytes;
    multi_worker.cpu_only = true;
    strategy = std::make_shared<distribute::MultiWorker>(multi_worker);
  } else if (options.single_replicas > 1) {
    strategy = std::make_shared<distribute::Mirrored>(
        std::vector<Device>(static_cast<std::size_t>(options.single_replicas), Device::cpu()),
        distribute::DeviceInventory{});
  }
  const int rank = options.single ? 0 : strategy->worker_index();
  const std::string name = options.single ? "single" : "rank" + std::to_string(rank);
  const bool faulty = rank == options.fault_rank;

  const auto [images, labels] = training_data(options);
  data::TensorDataset dataset(images, labels);
  dataset.shuffle(3).batch(options.batch_size);

  // Each rank draws other initial weights, so only the broadcast of rank 0's makes them agree
  // (and the single-process reference draws rank 0's).
  manual_seed(11 + static_cast<std::uint64_t>(rank));
  nn::Model model = [&] {
    std::optional<distribute::StrategyScope> scope;
    if (strategy) scope.emplace(strategy->scope());
    nn::Model built = nn::zoo::build(options.model, {28, 28, 1}, 10);
    std::shared_ptr<train::Optimizer> optimizer;
    if (options.optimizer == "sgd") {
      optimizer = std::make_shared<train::SGD>(0.05);
    } else {
      optimizer = std::make_shared<train::Adam>(1e-3);
    }
    built.compile({.optimizer = optimizer,
                   .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                   .metrics = {"accuracy"}});
    return built;
  }();

  if (faulty && options.fault == "stall-before-fit")
    std::this_thread::sleep_for(std::chrono::seconds(120));

  std::ofstream steps(options.out_dir + "/" + name + ".steps");
  std::int64_t step = 0;
  auto recorder = std::make_shared<train::LambdaCallback>(train::LambdaCallback::Functions{
      .on_train_batch_begin =
          [&](std::int64_t, const train::Logs&) {
            if (!faulty || step != options.fault_step) return;
            if (options.fault == "stall-at-step")
              std::this_thread::sleep_for(std::chrono::seconds(120));
            if (options.fault == "die-at-step") raise(SIGKILL);
          },
      .on_train_batch_end =
          [&](std::int64_t, const train::Logs& logs) {
            steps << step++ << " " << weights_digest(model) << " " << logs.at("loss") << "\n";
            steps.flush();
          },
  });
  model.fit(dataset, {.epochs = options.epochs, .verbose = 0, .callbacks = {recorder}});

  std::ofstream weights(options.out_dir + "/" + name + ".weights", std::ios::binary);
  for (const Tensor& weight : model.weights()) {
    const Tensor host = weight.to(Device::cpu());
    weights.write(static_cast<const char*>(host.raw_data()),
                  static_cast<std::streamsize>(host.nbytes()));
  }
  if (!weights) return 1;
  std::ofstream statistics(options.out_dir + "/" + name + ".statistics", std::ios::binary);
  for (const Tensor& statistic : model.non_trainable_weights()) {
    const Tensor host = statistic.to(Device::cpu());
    statistics.write(static_cast<const char*>(host.raw_data()),
                     static_cast<std::streamsize>(host.nbytes()));
  }
  if (!statistics) return 1;

  const distribute::CommunicationStats stats =
      strategy ? strategy->communication_stats() : distribute::CommunicationStats{};
  std::ofstream communication(options.out_dir + "/" + name + ".stats");
  communication << "steps " << stats.steps << "\ngradient_buckets " << stats.gradient_buckets
                << "\noverlapped_buckets " << stats.overlapped_buckets << "\n";
  return communication ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& error) {
    std::cerr << "tandem_mpi_worker: error: " << error.what() << "\n";
    return 1;
  }
}
