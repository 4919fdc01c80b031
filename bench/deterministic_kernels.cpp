// What deterministic mode costs per op: the ops whose oneDNN primitives sum across threads
// (convolution backward-filter, matmul, batch-norm training) timed on the shapes of the
// tutorial CNN's and the MLP's training step, in the normal mode (oneDNN) and in deterministic
// mode (Tandem's fixed-order loops), with the median and spread of repeated timings.
//
//   build/bench/deterministic_kernels [--threads N] [--repeats R]
#include <tandem/tandem.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

namespace {

using namespace tandem;

struct Timing {
  double median_ms;
  double min_ms;
  double max_ms;
};

// Milliseconds per call: `repeats` windows of 10 calls after two warm-up calls.
Timing time_op(const std::function<void()>& op, int repeats) {
  op();
  op();
  std::vector<double> windows;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i)
      op();
    windows.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count() /
        10.0);
  }
  std::sort(windows.begin(), windows.end());
  return {windows[windows.size() / 2], windows.front(), windows.back()};
}

void report(const std::string& name, const std::function<void()>& op, int repeats) {
  set_deterministic(false);
  const Timing fast = time_op(op, repeats);
  set_deterministic(true);
  const Timing fixed_order = time_op(op, repeats);
  set_deterministic(false);
  std::printf("%-44s %8.3f ms (%.3f-%.3f)  %8.3f ms (%.3f-%.3f)  %6.1fx\n", name.c_str(),
              fast.median_ms, fast.min_ms, fast.max_ms, fixed_order.median_ms, fixed_order.min_ms,
              fixed_order.max_ms, fixed_order.median_ms / fast.median_ms);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  int repeats = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    if (option == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else if (option == "--repeats") {
      repeats = std::atoi(argv[i + 1]);
    } else {
      std::cerr << "usage: deterministic_kernels [--threads N] [--repeats R]\n";
      return 2;
    }
  }
  set_num_threads(threads);
  std::printf("threads %d, %d repeats of 10 calls; median (min-max) per call\n", num_threads(),
              repeats);
  std::printf("%-44s %27s  %27s  %7s\n", "op (shape)", "oneDNN", "deterministic", "ratio");
  Generator generator(1);
  auto normal = [&](const Shape& shape) {
    return random_normal(shape, 0.0, 1.0, DType::f32, generator);
  };
  struct Conv {
    const char* name;
    Shape x;
    Shape filter;
  };
  for (const Conv& conv :
       {Conv{"cnn conv1 backward-filter (32,28,28,1)->32", {32, 28, 28, 1}, {3, 3, 1, 32}},
        Conv{"cnn conv2 backward-filter (32,13,13,32)->64", {32, 13, 13, 32}, {3, 3, 32, 64}}}) {
    const Tensor x = normal(conv.x);
    const Tensor dy = normal(conv2d(x, normal(conv.filter)).shape());
    report(
        conv.name, [&] { conv2d_backward_filter(x, dy, conv.filter, true); }, repeats);
  }
  struct Product {
    const char* name;
    Shape a;
    Shape b;
    bool transpose_a;
    bool transpose_b;
  };
  for (const Product& product :
       {Product{"cnn dense forward (32,1600)x(1600,64)", {32, 1600}, {1600, 64}, false, false},
        Product{"cnn dense input grad (32,64)x(1600,64)^T", {32, 64}, {1600, 64}, false, true},
        Product{"cnn dense kernel grad (32,1600)^T x(32,64)", {32, 1600}, {32, 64}, true, false},
        Product{"mlp dense forward (32,784)x(784,128)", {32, 784}, {784, 128}, false, false}}) {
    const Tensor a = normal(product.a);
    const Tensor b = normal(product.b);
    report(
        product.name, [&] { matmul(a, b, product.transpose_a, product.transpose_b); }, repeats);
  }
  const Tensor x = normal({32, 28, 28, 16});  // resnet_small's first block
  const Tensor gamma = Tensor::ones({16});
  const Tensor beta = Tensor::zeros({16});
  const BatchNormTrainingResult stats = batch_norm_training(x, gamma, beta, 1e-3);
  report(
      "batch norm training (32,28,28,16)", [&] { batch_norm_training(x, gamma, beta, 1e-3); },
      repeats);
  report(
      "batch norm backward (32,28,28,16)",
      [&] { batch_norm_backward(x, x, gamma, stats.mean, stats.variance, 1e-3, true); }, repeats);
  return 0;
}
