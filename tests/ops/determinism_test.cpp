// Deterministic mode on devices that cannot honour it: the CUDA kernels whose results vary from
// run to run (atomics, cuDNN algorithms chosen by speed) are refused with an error naming the op
// and the fix, before they run; deterministic CUDA kernels and every CPU kernel are allowed. The
// check reads the facts each backend's kernel table states, so it needs no GPU, only a build
// with the CUDA backend.
#include <gtest/gtest.h>

#include "ops/backend.h"
#include "tandem/cuda.h"
#include "tandem/ops.h"
#include "tandem/runtime.h"

namespace tandem {
namespace {

// The message of the Error the check throws for this op on this device.
std::string refusal_of(OpKind kind, Device device) {
  try {
    require_deterministic_kernel(kind, device);
  } catch (const Error& error) {
    return error.what();
  }
  return "(not refused)";
}

// Turns deterministic mode on for one test and restores what was set before.
class DeterministicScope {
 public:
  explicit DeterministicScope(bool on) : previous_(deterministic()) { set_deterministic(on); }
  ~DeterministicScope() { set_deterministic(previous_); }
  DeterministicScope(const DeterministicScope&) = delete;
  DeterministicScope& operator=(const DeterministicScope&) = delete;

 private:
  bool previous_;
};

#define TANDEM_REQUIRE_CUDA_BUILD()                                          \
  do {                                                                       \
    if (!cuda::status().built)                                               \
      GTEST_SKIP() << "no CUDA kernels to check: " << cuda::status().reason; \
  } while (0)

TEST(Determinism, NondeterministicCudaKernelsAreRefusedNamingTheOpAndTheFix) {
  TANDEM_REQUIRE_CUDA_BUILD();
  const DeterministicScope on(true);
  for (const OpKind kind : {OpKind::max_pool2d_backward, OpKind::avg_pool2d_backward,
                            OpKind::scatter_add, OpKind::layer_norm_backward,
                            OpKind::conv2d_backward_input, OpKind::conv2d_backward_filter}) {
    SCOPED_TRACE(op_name(kind));
    const std::string message = refusal_of(kind, Device::cuda(1));
    EXPECT_EQ(message.rfind(std::string(op_name(kind)) + " on cuda:1: deterministic mode", 0), 0u)
        << message;
    EXPECT_NE(message.find("train on the CPU (--strategy cpu)"), std::string::npos) << message;
    EXPECT_NE(message.find("cuda:1 without --deterministic"), std::string::npos) << message;
  }
  EXPECT_NE(refusal_of(OpKind::scatter_add, Device::cuda(0)).find("atomics"), std::string::npos);
}

// Every refusal comes from a fact the backend's kernel table states, and names it.
TEST(Determinism, EveryRefusalSaysWhyTheKernelVaries) {
  const DeterministicScope on(true);
  for (int type = 0; type < kNumDeviceTypes; ++type) {
    const Device device{static_cast<DeviceType>(type), 0};
    for (int kind = 0; kind < kNumOps; ++kind) {
      const KernelFacts* facts = registered_kernel_facts(device.type, static_cast<OpKind>(kind));
      const std::string message = refusal_of(static_cast<OpKind>(kind), device);
      if (facts == nullptr || facts->nondeterministic == nullptr) {
        EXPECT_EQ(message, "(not refused)") << op_name(static_cast<OpKind>(kind));
      } else {
        EXPECT_NE(message.find(facts->nondeterministic), std::string::npos) << message;
      }
    }
  }
}

TEST(Determinism, DeterministicKernelsAndTheCpuAreAllowed) {
  const DeterministicScope on(true);
  for (const OpKind kind :
       {OpKind::matmul, OpKind::conv2d, OpKind::sum, OpKind::batch_norm_backward,
        OpKind::softmax_backward, OpKind::dropout, OpKind::adam_update}) {
    EXPECT_NO_THROW(require_deterministic_kernel(kind, Device::cuda(0))) << op_name(kind);
  }
  for (int kind = 0; kind < kNumOps; ++kind) {
    EXPECT_NO_THROW(require_deterministic_kernel(static_cast<OpKind>(kind), Device::cpu()));
  }
  // The CPU runs every op in deterministic mode, the refused ones included.
  const Tensor x = Tensor::from_vector<float>({1, 5, 2, 4, 3, 0, 7, 6, 9}, {1, 3, 3, 1});
  const Tensor pooled = max_pool2d(x, {{2, 2}, {1, 1}, Padding::valid});  // (1, 2, 2, 1)
  EXPECT_EQ(pooled.to_vector<float>(), (std::vector<float>{5, 5, 7, 9}));
}

TEST(Determinism, OutsideDeterministicModeNothingIsRefused) {
  const DeterministicScope off(false);
  for (int kind = 0; kind < kNumOps; ++kind) {
    EXPECT_NO_THROW(require_deterministic_kernel(static_cast<OpKind>(kind), Device::cuda(0)));
  }
}

}  // namespace
}  // namespace tandem
