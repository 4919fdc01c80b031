// The CUDA backend beyond op parity (which the op harness's backends mode checks,
// tests/backend/op_harness_backends_test.cpp): errors on bad labels and ids, out-of-memory
// errors naming the device, and the reason given where no GPU is usable.
#include <gtest/gtest.h>

#include <string>

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
