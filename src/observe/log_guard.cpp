// LogGuard: the one place that decides what a failed log write does to a run (nothing but a
// warning, once).
#include <iostream>

#include "tandem/observe.h"

namespace tandem::observe {

LogGuard::LogGuard(std::string what) : what_(std::move(what)) {}

void LogGuard::run(const std::function<void()>& write) {
  if (stopped()) return;
  try {
    write();
  } catch (const IoError& error) {
    std::lock_guard lock(mutex_);
    // Two threads may fail at once (the monitor's and the training loop's): one report.
    if (!failure_.empty()) return;
    failure_ = error.what();
    stopped_.store(true, std::memory_order_release);
    std::cerr << "tandem: warning: " << failure_ << "\n"
              << "tandem: warning: logging stopped for " << what_
              << "; training goes on, and its results and saved model are not affected\n";
  }
}

bool LogGuard::stopped() const {
  return stopped_.load(std::memory_order_acquire);
}

std::string LogGuard::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

}  // namespace tandem::observe
