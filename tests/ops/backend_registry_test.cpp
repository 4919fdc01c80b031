// The backend registry: backends register themselves (the ops layer names none), come up on
// first use or say why not, and state facts about their kernels that hold without a device.
#include <gtest/gtest.h>

#include <string>

#include "ops/backend.h"
#include "tandem/cuda.h"
#include "tandem/tensor.h"

namespace tandem {
namespace {

TEST(BackendRegistry, TheCpuComesFirstAndEveryListedBackendIsUp) {
  const std::vector<Backend*> backends = available_backends();
  ASSERT_FALSE(backends.empty());
  EXPECT_EQ(backends.front()->device_type(), DeviceType::cpu);
  EXPECT_STREQ(backends.front()->name(), "cpu");
  for (Backend* backend : backends) {
    EXPECT_EQ(&backend_for(Device{backend->device_type(), 0}), backend) << backend->name();
  }
  const bool cuda_listed =
      std::any_of(backends.begin(), backends.end(),
                  [](const Backend* backend) { return backend->device_type() == DeviceType::cuda; });
  EXPECT_EQ(cuda_listed, cuda::is_available());
}

TEST(BackendRegistry, ADeviceWithoutABackendSaysWhy) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is usable here";
  try {
    backend_for(Device::cuda());
    FAIL() << "a cuda backend came up without a usable GPU";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("no backend for device cuda:0"), std::string::npos) << message;
    EXPECT_NE(message.find(cuda::status().reason), std::string::npos) << message;
  }
}

TEST(BackendRegistry, KernelFactsComeFromTheBackendsOwnTable) {
  const KernelFacts* matmul = registered_kernel_facts(DeviceType::cpu, OpKind::matmul);
  ASSERT_NE(matmul, nullptr);
  EXPECT_TRUE(matmul->dtypes & dtype_mask({DType::f32}));
  EXPECT_EQ(matmul->nondeterministic, nullptr);
  EXPECT_EQ(matmul, backend_for(Device::cpu()).kernel_facts(OpKind::matmul));
  // The CPU's select kernel takes a bool condition and nothing else.
  EXPECT_TRUE(backend_for(Device::cpu()).supports(OpKind::select, DType::boolean));
  EXPECT_FALSE(backend_for(Device::cpu()).supports(OpKind::select, DType::f32));
  if (cuda::status().built) {
    const KernelFacts* scatter = registered_kernel_facts(DeviceType::cuda, OpKind::scatter_add);
    ASSERT_NE(scatter, nullptr);
    EXPECT_NE(scatter->nondeterministic, nullptr);
  }
}

TEST(BackendRegistry, TwoBackendsForOneDeviceTypeAreRefused) {
  EXPECT_THROW(BackendRegistration(
                   DeviceType::cpu, [](std::string&) -> Backend* { return nullptr; },
                   [](OpKind) -> const KernelFacts* { return nullptr; }),
               Error);
}

}  // namespace
}  // namespace tandem
