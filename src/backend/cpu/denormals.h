#pragma once
// The floating-point mode CPU kernels run in: denormals flushed to zero or not, as
// tandem::flush_denormals() says (tandem/runtime.h).
#include <cstdint>

namespace tandem::cpu {

// For its lifetime, the calling thread reads and writes denormals as flush_denormals() says;
// the thread's own mode comes back at the end. The OpenMP threads the calling thread runs
// kernels on are set once, and again when the setting or their number changes: they keep it.
class DenormalModeScope {
 public:
  DenormalModeScope();
  ~DenormalModeScope();
  DenormalModeScope(const DenormalModeScope&) = delete;
  DenormalModeScope& operator=(const DenormalModeScope&) = delete;

 private:
  std::uint32_t saved_;  // the thread's control and status word before the scope
};

}  // namespace tandem::cpu
