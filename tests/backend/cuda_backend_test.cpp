// The CUDA backend beyond op parity (which the op harness's backends mode checks,
// tests/backend/op_harness_backends_test.cpp): errors on bad labels and ids, out-of-memory
// errors naming the device, compiled steps replayed as CUDA graphs, and the reason given where no
// GPU is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tandem/cuda.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

// Skips the calling test, with the backend's reason, where no GPU is usable.
#define TANDEM_REQUIRE_GPU()                                                               \
  do {                                                                                     \
    if (!cuda::is_available()) GTEST_SKIP() << "no usable GPU: " << cuda::status().reason; \
  } while (0)

TEST(CudaBackend, BadLabelsAndIdsAreReportedAsOnTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor logits = Tensor::zeros({2, 3}, DType::f32, Device::cuda());
  const Tensor labels = Tensor::from_vector<std::int32_t>({1, 5}, {2}, Device::cuda());
  try {
    sparse_softmax_cross_entropy_with_logits(logits, labels);
    FAIL() << "label 5 of 3 classes was accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("label 5 of example 1"), std::string::npos)
        << error.what();
  }
  const Tensor table = Tensor::zeros({4, 2}, DType::f32, Device::cuda());
  EXPECT_THROW(gather(table, Tensor::from_vector<std::int64_t>({0, 4}, {2}, Device::cuda())),
               InvalidArgument);
}

TEST(CudaBackend, OutOfMemoryNamesTheDevice) {
  TANDEM_REQUIRE_GPU();
  const std::size_t held = memory_info(Device::cuda()).held;
  set_memory_limit(Device::cuda(), held + (1u << 20));
  try {
    Tensor::empty({1 << 20}, DType::f32, Device::cuda());
    set_memory_limit(Device::cuda(), 0);
    FAIL() << "4 MiB fitted under a 1 MiB limit";
  } catch (const OutOfMemory& error) {
    set_memory_limit(Device::cuda(), 0);
    EXPECT_EQ(error.device(), "cuda:0");
  }
  // The device itself refusing: more than it has.
  const std::size_t capacity = memory_info(Device::cuda()).capacity;
  EXPECT_THROW(Tensor::empty({static_cast<std::int64_t>(capacity / 2)}, DType::f32, Device::cuda()),
               OutOfMemory);
}

// With step graphs on, a compiled step's second run records its kernels as one CUDA graph and
// later runs replay it: the results of op-by-op runs bit for bit on new batches each run, and a
// label out of range inside a replay is reported, naming the example, at the next
// synchronisation (here the read of the loss).
TEST(CudaBackend, ACompiledStepReplaysAsOneGraph) {
  TANDEM_REQUIRE_GPU();
  const bool graphs_before = cuda::step_graphs_enabled();
  std::vector<std::string> log;
  set_compile_log([&](const std::string& line) { log.push_back(line); });
  const auto body = [](const std::vector<Tensor>& in) {
    const CrossEntropyResult result =
        sparse_softmax_cross_entropy_with_logits(relu(matmul(in[0], in[1])), in[2]);
    return std::vector<Tensor>{result.loss, result.backprop};
  };
  // The tape's op observer, installed by the first tape for good, watches nothing while no tape
  // records: it must not keep the step from replaying (as it did in training, where the traced
  // step's tape installs it).
  { const GradientTape installs_the_recorder; }
  // A step decides at its first run whether it replays.
  Function op_by_op = function("op_by_op", body);
  Function replayed = function("replayed", body);
  Generator generator(5);
  const Tensor weights =
      random_uniform({16, 3}, -1.0, 1.0, DType::f32, generator).to(Device::cuda());
  for (int run = 0; run < 5; ++run) {
    const Tensor x = random_uniform({8, 16}, -1.0, 1.0, DType::f32, generator).to(Device::cuda());
    const Tensor labels =
        Tensor::from_vector<std::int32_t>({0, 1, 2, 0, 1, 2, run % 3, 1}, {8}, Device::cuda());
    cuda::set_step_graphs_enabled(false);
    const std::vector<Tensor> expected = op_by_op({x, weights, labels});
    cuda::set_step_graphs_enabled(true);
    const std::vector<Tensor> got = replayed({x, weights, labels});
    for (std::size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].to(Device::cpu()).to_vector<float>(),
                expected[k].to(Device::cpu()).to_vector<float>())
          << "run " << run << ", result " << k;
    }
  }
  // Recorded once (nothing ran op by op) and never again: each batch went into the step's own
  // input buffers.
  EXPECT_EQ(std::ranges::count_if(log,
                                  [](const std::string& line) {
                                    return line.find("'replayed' recorded as one unit") !=
                                           std::string::npos;
                                  }),
            1);
  for (const std::string& line : log) {
    EXPECT_EQ(line.find("runs op by op"), std::string::npos) << line;
    EXPECT_EQ(line.find("again"), std::string::npos) << line;
  }
  const Tensor x = random_uniform({8, 16}, -1.0, 1.0, DType::f32, generator).to(Device::cuda());
  const Tensor bad =
      Tensor::from_vector<std::int32_t>({0, 1, 2, 0, 7, 2, 0, 1}, {8}, Device::cuda());
  try {
    replayed({x, weights, bad})[0].to(Device::cpu());
    FAIL() << "label 7 of 3 classes went unreported";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("the label of example 4 is outside [0, 3)"),
              std::string::npos)
        << error.what();
  }
  set_compile_log(nullptr);
  cuda::set_step_graphs_enabled(graphs_before);
}

// Without a usable GPU the backend says why, and a cuda tensor is a clean error, not a crash.
TEST(CudaBackend, WithoutAGpuSaysWhy) {
  const cuda::Status& status = cuda::status();
  if (status.available) GTEST_SKIP() << "a GPU is usable here: " << status.devices.front().name;
  EXPECT_FALSE(status.reason.empty());
  try {
    Tensor::zeros({2}, DType::f32, Device::cuda());
    FAIL() << "a cuda tensor was made without a usable GPU";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(status.reason), std::string::npos) << error.what();
  }
  EXPECT_FALSE(cuda::is_available());
}

}  // namespace
}  // namespace tandem
