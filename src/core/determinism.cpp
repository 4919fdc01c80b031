// The process-wide switches kernels read per call (tandem/runtime.h): deterministic mode and
// flushing denormals.
#include <atomic>

#include "tandem/runtime.h"

namespace tandem {
namespace {

std::atomic<bool> deterministic_mode{false};
std::atomic<bool> flush_denormals_mode{true};

}  // namespace

void set_deterministic(bool deterministic) {
  deterministic_mode.store(deterministic, std::memory_order_relaxed);
}

bool deterministic() {
  return deterministic_mode.load(std::memory_order_relaxed);
}

void set_flush_denormals(bool flush) {
  flush_denormals_mode.store(flush, std::memory_order_relaxed);
}

bool flush_denormals() {
  return flush_denormals_mode.load(std::memory_order_relaxed);
}

}  // namespace tandem
