#include "train/distribution.h"

namespace tandem::train::detail {
namespace {

std::shared_ptr<Distribution>& thread_distribution() {
  thread_local std::shared_ptr<Distribution> current;
  return current;
}

}  // namespace

std::shared_ptr<Distribution> current_distribution() {
  return thread_distribution();
}

DistributionScope::DistributionScope(std::shared_ptr<Distribution> distribution)
    : previous_(std::exchange(thread_distribution(), std::move(distribution))) {}

DistributionScope::~DistributionScope() {
  thread_distribution() = std::move(previous_);
}

}  // namespace tandem::train::detail
