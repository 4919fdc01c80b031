#pragma once
// The CPU kernels' thread count set for one test and put back when it ends, failed or not: for
// tests that run kernels on more threads than the machine has, where oneDNN's faults on some
// CPUs only show (bench/RESULTS.md, 2026-12-04 evening).
#include "tandem/runtime.h"

namespace tandem::testing {

class ScopedThreadCount {
 public:
  explicit ScopedThreadCount(int threads) : saved_(thread_setting()) { set_num_threads(threads); }
  ~ScopedThreadCount() { set_num_threads(saved_); }
  ScopedThreadCount(const ScopedThreadCount&) = delete;
  ScopedThreadCount& operator=(const ScopedThreadCount&) = delete;

 private:
  int saved_;
};

}  // namespace tandem::testing
