// What Tandem's allocators hold, the memory limit and out-of-memory errors, on the CPU (the
// same ledger serves every device).
#include <gtest/gtest.h>

#include <string>

#include "tandem/tandem.h"

namespace tandem {
namespace {

// Lifts the CPU memory limit when a test ends, whatever happened.
struct LimitGuard {
  ~LimitGuard() { set_memory_limit(Device::cpu(), 0); }
};

TEST(Memory, CountsWhatTensorsHold) {
  const std::size_t before = memory_info(Device::cpu()).held;
  {
    const Tensor big = Tensor::empty({1 << 20}, DType::f32);  // 4 MiB
    EXPECT_GE(memory_info(Device::cpu()).held, before + (4u << 20));
    EXPECT_GE(memory_info(Device::cpu()).peak, before + (4u << 20));
  }
  EXPECT_LT(memory_info(Device::cpu()).held, before + (4u << 20));
  EXPECT_GT(memory_info(Device::cpu()).capacity, 0u);  // the machine's RAM
}

TEST(Memory, TheLimitMakesAllocationsFailWithTheFigures) {
  LimitGuard guard;
  const std::size_t held = memory_info(Device::cpu()).held;
  set_memory_limit(Device::cpu(), held + (8u << 20));
  EXPECT_EQ(memory_info(Device::cpu()).limit, held + (8u << 20));
  const Tensor fits = Tensor::empty({1 << 20}, DType::f32);  // 4 MiB of the 8
  try {
    Tensor::empty({1 << 21}, DType::f32);  // 8 MiB more
    FAIL() << "an allocation past the limit succeeded";
  } catch (const OutOfMemory& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("out of memory on cpu"), std::string::npos) << message;
    EXPECT_NE(message.find("asked for 8.00 MiB"), std::string::npos) << message;
    EXPECT_EQ(error.requested_bytes(), 8u << 20);
    EXPECT_GE(error.held_bytes(), held + (4u << 20));
    EXPECT_EQ(error.available_bytes(), held + (8u << 20));
    EXPECT_EQ(error.device(), "cpu");
  }
  set_memory_limit(Device::cpu(), 0);
  EXPECT_NO_THROW(Tensor::empty({1 << 21}, DType::f32));
}

// More than the machine has is refused before the system is asked, with the figures: a model file
// of 10^12 units must not depend on how the system (or AddressSanitizer) treats such a request.
TEST(Memory, MoreThanTheMachineHasIsRefusedUpFront) {
  const std::size_t capacity = memory_info(Device::cpu()).capacity;
  ASSERT_GT(capacity, 0u);
  const std::size_t held = memory_info(Device::cpu()).held;
  const auto elements = static_cast<std::int64_t>(capacity / 4 * 2);  // f32: twice the memory
  try {
    Tensor::empty({elements}, DType::f32);
    ADD_FAILURE() << "twice the machine's memory was allocated";
  } catch (const OutOfMemory& error) {
    EXPECT_NE(std::string(error.what())
                  .find("more than the machine's " + format_memory_size(capacity) + " of memory"),
              std::string::npos)
        << error.what();
    EXPECT_EQ(error.available_bytes(), capacity);
  }
  EXPECT_EQ(memory_info(Device::cpu()).held, held) << "the refused bytes stayed counted";
}

TEST(Memory, PeakResets) {
  { const Tensor spike = Tensor::empty({1 << 20}, DType::f64); }
  reset_peak_memory(Device::cpu());
  EXPECT_EQ(memory_info(Device::cpu()).peak, memory_info(Device::cpu()).held);
}

TEST(Memory, SizesReadAsPeopleWriteThem) {
  EXPECT_EQ(format_memory_size(12), "12 bytes");
  EXPECT_EQ(format_memory_size(1536), "1.50 KiB");
  EXPECT_EQ(format_memory_size(3ull << 30), "3.00 GiB");
}

}  // namespace
}  // namespace tandem
