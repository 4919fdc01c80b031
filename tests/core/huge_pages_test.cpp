// Tensors on huge pages (core/huge_pages.h): 2 MiB-aligned, counted in the CPU's ledger while they
// live, their whole huge pages advised for transparent huge pages where the kernel has THP.
#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "tandem/runtime.h"

namespace tandem {
namespace {

constexpr std::uintptr_t kHugePage = 2 * 1024 * 1024;

// The VmFlags of the mapping holding `address`, from /proc/self/smaps ("" where unreadable).
std::string mapping_flags(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
    } else if (inside && line.starts_with("VmFlags:")) {
      return line;
    }
  }
  return "";
}

TEST(HugePages, TensorsStartOnAHugePageAndAreCountedWhileTheyLive) {
  const std::size_t before = memory_info(Device::cpu()).held;
  {
    const Tensor filter = empty_on_huge_pages({3, 1024, 1024}, DType::f32);  // 12 MiB
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(filter.raw_data()) % kHugePage, 0u);
    EXPECT_EQ(memory_info(Device::cpu()).held, before + filter.nbytes());
    float* values = static_cast<float*>(filter.raw_data());
    values[0] = 1.0f;
    values[filter.numel() - 1] = 2.0f;
    EXPECT_EQ(filter.to_vector<float>().back(), 2.0f);
    // The advice is only taken where the kernel has transparent huge pages.
    if (std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
      const std::string flags = mapping_flags(filter.raw_data());
      if (!flags.empty()) EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
    }
  }
  EXPECT_EQ(memory_info(Device::cpu()).held, before);
}

TEST(HugePages, EmptyAndSmallTensorsWork) {
  EXPECT_EQ(empty_on_huge_pages({0}, DType::f32).numel(), 0);
  const Tensor small = empty_on_huge_pages({5}, DType::u8);
  EXPECT_EQ(small.nbytes(), 5u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.raw_data()) % kHugePage, 0u);
}

}  // namespace
}  // namespace tandem
