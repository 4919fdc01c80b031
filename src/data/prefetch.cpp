#include "data/prefetch.h"

#include <utility>

namespace tandem::data {

PrefetchIterator::PrefetchIterator(Producer produce, int depth)
    : produce_(std::move(produce)), depth_(static_cast<std::size_t>(depth)) {
  if (depth <= 0) {
    throw InvalidArgument("prefetch: depth must be positive, got " + std::to_string(depth) +
                          "; use 0 in TensorDataset::prefetch to assemble batches on demand");
  }
  thread_ = std::thread([this] { run(); });
}

PrefetchIterator::~PrefetchIterator() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  space_free_.notify_all();
  thread_.join();
}

void PrefetchIterator::run() {
  try {
    while (true) {
      std::optional<Batch> batch = produce_();
      std::unique_lock lock(mutex_);
      if (!batch) break;
      space_free_.wait(lock, [this] { return stopping_ || queue_.size() < depth_; });
      if (stopping_) return;
      queue_.push_back(std::move(*batch));
      lock.unlock();
      batch_ready_.notify_one();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard lock(mutex_);
    producer_done_ = true;
  }
  batch_ready_.notify_one();
}

std::optional<Batch> PrefetchIterator::next() {
  std::unique_lock lock(mutex_);
  batch_ready_.wait(lock, [this] { return !queue_.empty() || producer_done_; });
  if (!queue_.empty()) {
    Batch batch = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    space_free_.notify_one();
    return batch;
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return std::nullopt;
}

}  // namespace tandem::data
