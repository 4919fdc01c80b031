// The compiled training step against the eager one, side by side in one process on the same
// threads, batches and data: samples/s (median and spread of R interleaved runs) and the peak
// memory a step needs beyond the weights and optimizer slots, for the main job's CNN and for
// ResNet-50 at a CPU-sized input. The peers (TensorFlow with tf.function and jit_compile, PyTorch
// eager and torch.compile) run in bench/cnn_vs_peers.sh and `tandem bench --peers`.
//
//   build/bench/compiled_step [--repeats R] [--steps N] [--threads T] [--model cnn|resnet50]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tandem/data.h"
#include "tandem/tandem.h"

using namespace tandem;

namespace {

struct Workload {
  std::string model;
  Shape example;  // (H, W, C)
  std::int64_t batch;
};

struct Measurement {
  double samples_per_sec = 0;
  // The most held at once while training, less the weights and Adam's two slots per weight:
  // what the step itself needs (its activations, gradients and, compiled, its planned block).
  double step_peak_mib = 0;
};

Measurement train_once(const Workload& w, bool jit, std::int64_t steps) {
  manual_seed(1);
  reset_peak_memory(Device::cpu());
  const double held_before = static_cast<double>(memory_info(Device::cpu()).held);
  nn::Model model = nn::zoo::build(w.model, w.example, 10);
  double weight_bytes = 0;
  for (const Tensor& weight : model.trainable_weights())
    weight_bytes += static_cast<double>(weight.nbytes());
  model.compile({.optimizer = train::Adam(1e-3),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"},
                 .jit_compile = jit});
  Generator generator(2);
  Shape shape{w.batch * steps};
  shape.insert(shape.end(), w.example.begin(), w.example.end());
  const Tensor x = random_uniform(shape, 0.0, 1.0, DType::f32, generator);
  const Tensor y = Tensor::zeros({w.batch * steps}, DType::i32);
  Shape first_shape = shape;
  first_shape[0] = w.batch;
  model.train_on_batch(random_uniform(first_shape, 0.0, 1.0, DType::f32, generator),
                       Tensor::zeros({w.batch}, DType::i32));
  const train::History history = model.fit(x, y,
                                           {.batch_size = w.batch,
                                            .verbose = 0,
                                            .shuffle = false,
                                            .warmup_steps = std::min<std::int64_t>(3, steps / 4)});
  Measurement m;
  m.samples_per_sec = history.samples_per_sec();
  m.step_peak_mib =
      (static_cast<double>(memory_info(Device::cpu()).peak) - held_before - 3 * weight_bytes) /
      (1024.0 * 1024.0);
  return m;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 3;
  std::int64_t steps = 40;
  std::string only;  // one model's workloads
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    if (option == "--repeats") {
      repeats = std::stoi(argv[i + 1]);
    } else if (option == "--steps") {
      steps = std::stoll(argv[i + 1]);
    } else if (option == "--model") {
      only = argv[i + 1];
    } else if (option == "--threads") {
      set_num_threads(std::stoi(argv[i + 1]));
    } else {
      std::fprintf(stderr,
                   "usage: compiled_step [--repeats R] [--steps N] [--threads T] [--model M]\n");
      return 2;
    }
  }
  const std::vector<Workload> workloads{
      {"cnn", {28, 28, 1}, 32}, {"cnn", {28, 28, 1}, 64}, {"resnet50", {64, 64, 3}, 8}};
  std::printf("%d threads, %lld steps per run, %d runs each interleaved\n", num_threads(),
              static_cast<long long>(steps), repeats);
  std::printf("%-9s %6s  %-8s %12s %17s %14s\n", "model", "batch", "step", "samples/s", "min..max",
              "step peak MiB");
  for (const Workload& w : workloads) {
    if (!only.empty() && w.model != only) continue;
    std::vector<double> rates[2], peaks[2];
    for (int r = 0; r < repeats; ++r) {
      for (int jit : {r % 2, 1 - r % 2}) {
        const Measurement m = train_once(w, jit == 1, steps);
        rates[jit].push_back(m.samples_per_sec);
        peaks[jit].push_back(m.step_peak_mib);
      }
    }
    for (int jit : {0, 1}) {
      const auto [low, high] = std::minmax_element(rates[jit].begin(), rates[jit].end());
      std::printf("%-9s %6lld  %-8s %12.0f %8.0f..%-8.0f %14.1f\n", w.model.c_str(),
                  static_cast<long long>(w.batch), jit ? "compiled" : "eager", median(rates[jit]),
                  *low, *high, median(peaks[jit]));
    }
    std::printf("%-9s %6lld  compiled / eager: %.2fx samples/s, %.2fx step peak memory\n",
                w.model.c_str(), static_cast<long long>(w.batch),
                median(rates[1]) / median(rates[0]), median(peaks[1]) / median(peaks[0]));
  }
  return 0;
}
