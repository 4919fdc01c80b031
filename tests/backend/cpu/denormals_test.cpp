// CPU kernels flush denormals to zero unless told not to, on every thread they run on, and leave
// the calling thread's own floating-point mode as it was.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <limits>

#include "support/thread_count.h"
#include "tandem/ops.h"
#include "tandem/runtime.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>

namespace tandem {
namespace {

// Sets the switch for a test and puts the default back after it.
class ScopedFlushDenormals {
 public:
  explicit ScopedFlushDenormals(bool flush) : saved_(flush_denormals()) {
    set_flush_denormals(flush);
  }
  ~ScopedFlushDenormals() { set_flush_denormals(saved_); }
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  bool saved_;
};

// Enough elements that both threads take a share of an element-wise kernel.
constexpr std::int64_t kElements = 1 << 18;
const float kDenormal = std::numeric_limits<float>::denorm_min() * 1000;  // ~1.4e-42

std::vector<float> denormals_times_one() {
  const Tensor denormals = Tensor::full({kElements}, kDenormal);
  return mul(denormals, Tensor::ones({kElements})).to_vector<float>();
}

TEST(DenormalMode, KernelsFlushDenormalsByDefaultOnEveryThread) {
  const testing::ScopedThreadCount threads(2);
  EXPECT_TRUE(flush_denormals());
  const std::vector<float> flushed = denormals_times_one();
  EXPECT_TRUE(std::all_of(flushed.begin(), flushed.end(), [](float value) { return value == 0; }));
}

TEST(DenormalMode, TurnedOffKernelsKeepThemOnEveryThread) {
  const testing::ScopedThreadCount threads(2);
  std::vector<float> kept;
  {
    const ScopedFlushDenormals keep(false);
    kept = denormals_times_one();
  }
  EXPECT_TRUE(
      std::all_of(kept.begin(), kept.end(), [](float value) { return value == kDenormal; }));
  // And back on, the threads that kept them flush again.
  const std::vector<float> flushed = denormals_times_one();
  EXPECT_TRUE(std::all_of(flushed.begin(), flushed.end(), [](float value) { return value == 0; }));
}

// A kernel run inside the caller's own parallel region cannot set the kernel threads; the next
// one outside does.
TEST(DenormalMode, AKernelInsideTheCallersParallelRegionLeavesTheThreadsToTheNext) {
  const testing::ScopedThreadCount threads(2);
  {
    const ScopedFlushDenormals keep(false);
    denormals_times_one();  // both threads keep denormals now
  }
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0) denormals_times_one();
  }
  const std::vector<float> flushed = denormals_times_one();
  EXPECT_TRUE(std::all_of(flushed.begin(), flushed.end(), [](float value) { return value == 0; }));
}

// MXCSR without its exception flags (bits 0-5), which any arithmetic may raise.
unsigned control_bits() {
  return _mm_getcsr() & ~0x3Fu;
}

TEST(DenormalMode, TheCallersOwnModeIsRestoredAfterEachKernel) {
  constexpr unsigned kFlushBits = 0x8040;  // flush-to-zero and denormals-are-zero
  const unsigned before = control_bits();
  ASSERT_EQ(before & kFlushBits, 0u) << "the test thread starts in IEEE mode";
  denormals_times_one();
  EXPECT_EQ(control_bits(), before);
  // A caller that flushes on its own keeps flushing, whatever the kernels were told.
  _mm_setcsr(_mm_getcsr() | kFlushBits);
  {
    const ScopedFlushDenormals keep(false);
    denormals_times_one();
  }
  EXPECT_EQ(control_bits(), before | kFlushBits);
  _mm_setcsr(_mm_getcsr() & ~kFlushBits);
}

}  // namespace
}  // namespace tandem
#endif
