#include "backend/cpu/denormals.h"

#include <omp.h>

#include "tandem/runtime.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace tandem::cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// MXCSR's flush-to-zero (results) and denormals-are-zero (operands) bits.
constexpr std::uint32_t kFlushBits = 0x8040;

std::uint32_t control_word() {
  return _mm_getcsr();
}

void set_control_word(std::uint32_t word) {
  _mm_setcsr(word);
}
#else
constexpr std::uint32_t kFlushBits = 0;

std::uint32_t control_word() {
  return 0;
}

void set_control_word(std::uint32_t) {}
#endif

std::uint32_t with_mode(std::uint32_t word, bool flush) {
  return flush ? (word | kFlushBits) : (word & ~kFlushBits);
}

// Sets the mode on the OpenMP threads this thread's parallel regions use, unless they have it.
// A thread that starts later copies its creator's control word, which a kernel has set.
void set_worker_mode(bool flush) {
  struct Applied {
    int flush = -1;
    int threads = 0;
  };
  thread_local Applied applied;
  const int threads = omp_get_max_threads();
  if (applied.flush == static_cast<int>(flush) && applied.threads == threads) return;
  // Inside a parallel region (a kernel called from the caller's own OpenMP code) this thread's
  // pool cannot be reached: the next kernel outside one sets it.
  if (omp_in_parallel()) return;
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      if (omp_get_thread_num() != 0) set_control_word(with_mode(control_word(), flush));
    }
  }
  applied = {static_cast<int>(flush), threads};
}

}  // namespace

DenormalModeScope::DenormalModeScope() : saved_(control_word()) {
  if constexpr (kFlushBits == 0) return;
  const bool flush = flush_denormals();
  const std::uint32_t wanted = with_mode(saved_, flush);
  if (wanted != saved_) set_control_word(wanted);
  set_worker_mode(flush);
}

DenormalModeScope::~DenormalModeScope() {
  // Only the two mode bits: the exception flags the kernel raised stay raised.
  const std::uint32_t word = control_word();
  const std::uint32_t restored = (word & ~kFlushBits) | (saved_ & kFlushBits);
  if (restored != word) set_control_word(restored);
}

}  // namespace tandem::cpu
