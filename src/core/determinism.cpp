// The process-wide deterministic-mode switch (tandem/runtime.h); kernels read it per call.
#include <atomic>

#include "tandem/runtime.h"

namespace tandem {
namespace {

std::atomic<bool> deterministic_mode{false};

}  // namespace

void set_deterministic(bool deterministic) {
  deterministic_mode.store(deterministic, std::memory_order_relaxed);
}

bool deterministic() {
  return deterministic_mode.load(std::memory_order_relaxed);
}

}  // namespace tandem
