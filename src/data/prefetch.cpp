#include "data/prefetch.h"

#include <string>

namespace tandem::data {

int PrefetchIterator::checked_depth(int depth) {
  if (depth <= 0) {
    throw InvalidArgument("prefetch: depth must be positive, got " + std::to_string(depth) +
                          "; use 0 in TensorDataset::prefetch to assemble batches on demand");
  }
  return depth;
}

PrefetchIterator::PrefetchIterator(Producer produce, int depth)
    : queue_(std::move(produce),
             [capacity = static_cast<std::size_t>(checked_depth(depth))] { return capacity; }) {}

}  // namespace tandem::data
