// Training throughput of a zoo model on synthetic data, the accelerator benchmark of
// scripts/gpu-check.sh (ResNet-50 at 224x224, batch 256, fp32 and bf16) and its CPU smoke test.
// Prints one summary line and one JSON line.
//
//   zoo_throughput [--model resnet50|bert_base|cnn|...] [--device cpu|cuda|cuda:N]
//                  [--precision fp32|bf16|fp16] [--batch-size N] [--image-size N]
//                  [--sequence-length N] [--classes N] [--warmup N] [--steps N] [--windows N]
//
// The model trains as a custom training loop (tape, loss, optimizer) on one batch of random
// data kept on the device, as GPU benchmarks do, so the figure is the model's step time, not the
// input pipeline's. The weights get to the device through one fit() step under the OneDevice
// strategy (which places them). Then `warmup` untimed steps (cuDNN's algorithm search, cuBLASLt's
// plans, the memory pool filling), then `windows` timed windows of `steps` steps, each ended by
// reading the loss back (which waits for the GPU); the rate is the median window's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "tandem/cuda.h"
#include "tandem/distribute.h"
#include "tandem/tandem.h"

namespace {

using namespace tandem;

struct Options {
  std::string model = "resnet50";
  std::string device = "cpu";
  std::string precision = "fp32";
  std::int64_t batch_size = 256;
  std::int64_t image_size = 224;
  std::int64_t sequence_length = 128;
  std::int64_t classes = 1000;
  int warmup = 10;
  int steps = 20;
  int windows = 3;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "zoo_throughput: " << problem
            << "\nusage: zoo_throughput [--model NAME] [--device cpu|cuda|cuda:N] [--precision "
               "fp32|bf16|fp16] [--batch-size N] [--image-size N] [--sequence-length N] "
               "[--classes N] [--warmup N] [--steps N] [--windows N]\n";
  std::exit(2);
}

std::int64_t positive(const std::string& option, const std::string& text) {
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size() && value > 0) return value;
  } catch (const std::exception&) {
  }
  usage(option + " needs a positive integer, got '" + text + "'");
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--model")
      options.model = value;
    else if (flag == "--device")
      options.device = value;
    else if (flag == "--precision")
      options.precision = value;
    else if (flag == "--batch-size")
      options.batch_size = positive(flag, value);
    else if (flag == "--image-size")
      options.image_size = positive(flag, value);
    else if (flag == "--sequence-length")
      options.sequence_length = positive(flag, value);
    else if (flag == "--classes")
      options.classes = positive(flag, value);
    else if (flag == "--warmup")
      options.warmup = static_cast<int>(positive(flag, value));
    else if (flag == "--steps")
      options.steps = static_cast<int>(positive(flag, value));
    else if (flag == "--windows")
      options.windows = static_cast<int>(positive(flag, value));
    else
      usage("unknown option " + flag);
  }
  const std::map<std::string, std::string> policies{
      {"fp32", "float32"}, {"bf16", "mixed_bfloat16"}, {"fp16", "mixed_float16"}};
  if (!policies.contains(options.precision)) usage("--precision must be fp32, bf16 or fp16");
  mixed_precision::set_global_policy(policies.at(options.precision));
  return options;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Random inputs of the model's input shape and random labels, `batch` examples.
std::pair<Tensor, Tensor> synthetic_batch(const Options& options, const Shape& example,
                                          bool token_ids, Device device) {
  Generator generator(7);
  Shape shape = example;
  shape.insert(shape.begin(), options.batch_size);
  Tensor features = token_ids
                        ? cast(random_uniform(shape, 0, 30000, DType::f32, generator), DType::i32)
                        : random_uniform(shape, 0, 1, DType::f32, generator);
  const Tensor labels =
      cast(random_uniform({options.batch_size}, 0, static_cast<double>(options.classes) - 0.5,
                          DType::f32, generator),
           DType::i32);
  return {features.to(device), labels.to(device)};
}

std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text)
    quoted += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    const Device device = Device::parse(options.device);
    const bool token_ids = options.model == "bert_base";
    const Shape example = token_ids ? Shape{options.sequence_length}
                                    : (options.model == "resnet50"
                                           ? Shape{options.image_size, options.image_size, 3}
                                           : Shape{options.image_size, options.image_size, 1});
    distribute::OneDevice strategy(device);
    const distribute::StrategyScope scope = strategy.scope();
    manual_seed(1);
    nn::Model model = nn::zoo::build(options.model, example, options.classes);
    model.compile({.optimizer = train::SGD(0.01, 0.9),
                   .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});

    // One fit() step places the weights on the device and makes the optimizer's slots there.
    const auto [host_x, host_y] = synthetic_batch(options, example, token_ids, Device::cpu());
    data::TensorDataset placement(host_x, host_y);
    placement.batch(options.batch_size);
    train::FitOptions quiet;
    quiet.verbose = 0;
    model.fit(placement, 1, quiet);

    const auto [x, y] = synthetic_batch(options, example, token_ids, device);
    train::Optimizer& optimizer = model.optimizer();
    const train::Loss& loss_fn = model.loss();
    const std::vector<Tensor> variables = model.trainable_weights();
    auto step = [&] {
      std::vector<Tensor> gradients;
      Tensor loss;
      {
        GradientTape tape;
        loss = loss_fn(y, model(x, /*training=*/true));
        gradients = tape.gradient(optimizer.scale_loss(loss), variables);
      }
      optimizer.apply_gradients(gradients, variables);
      return loss;
    };
    Tensor loss;
    for (int i = 0; i < options.warmup; ++i)
      loss = step();
    loss.item();  // waits for the warm-up to finish
    std::vector<double> rates;
    for (int window = 0; window < options.windows; ++window) {
      const double start = now_seconds();
      for (int i = 0; i < options.steps; ++i)
        loss = step();
      const double final_loss = loss.item();
      const double seconds = now_seconds() - start;
      if (!std::isfinite(final_loss))
        throw Error("the loss diverged to " + std::to_string(final_loss));
      rates.push_back(static_cast<double>(options.steps * options.batch_size) / seconds);
    }
    std::vector<double> sorted = rates;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    const MemoryInfo memory = memory_info(device);
    std::string device_name = device.str();
    if (device.type == DeviceType::cuda) {
      for (const cuda::DeviceProperties& gpu : cuda::status().devices) {
        if (gpu.index == device.index) device_name += " (" + gpu.name + ")";
      }
    }
    std::printf(
        "zoo_throughput: %s %s on %s, batch %lld: %.1f samples/s (median of %d windows "
        "of %d steps, %.1f to %.1f), peak memory %s\n",
        options.model.c_str(), options.precision.c_str(), device_name.c_str(),
        static_cast<long long>(options.batch_size), median, options.windows, options.steps,
        sorted.front(), sorted.back(), format_memory_size(memory.peak).c_str());
    std::printf(
        "{\"framework\": \"tandem\", \"model\": %s, \"precision\": %s, \"device\": %s, "
        "\"batch_size\": %lld, \"samples_per_sec\": %.2f, \"min_samples_per_sec\": %.2f, "
        "\"max_samples_per_sec\": %.2f, \"peak_memory_bytes\": %zu, \"tf32\": %s}\n",
        json_string(options.model).c_str(), json_string(options.precision).c_str(),
        json_string(device_name).c_str(), static_cast<long long>(options.batch_size), median,
        sorted.front(), sorted.back(), memory.peak,
        device.type == DeviceType::cuda && cuda::tf32_enabled() ? "true" : "false");
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "zoo_throughput: error: " << error.what() << "\n";
    return 1;
  }
}
