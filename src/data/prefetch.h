#pragma once
// Producing ahead of a consumer on a background thread: BackgroundQueue (any item type, with a
// capacity that may change while it runs) and PrefetchIterator, the BatchIterator built on it
// that TensorDataset uses.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "tandem/data.h"

namespace tandem::data {

// Calls `produce` on its own thread until it returns nothing, keeping at most capacity() items
// waiting (capacity() is read each time an item is ready: call wake() after changing what it
// returns). An exception from `produce` reaches the consumer from pop(), after the items made
// before it. `on_ready` (optional) runs after every item and at the end, for a consumer that
// waits on several queues at once. Destroying the queue early stops and joins the thread.
template <typename T>
class BackgroundQueue {
 public:
  using Producer = std::function<std::optional<T>()>;

  BackgroundQueue(Producer produce, std::function<std::size_t()> capacity,
                  std::function<void()> on_ready = nullptr)
      : produce_(std::move(produce)),
        capacity_(std::move(capacity)),
        on_ready_(std::move(on_ready)),
        thread_([this] { run(); }) {}

  ~BackgroundQueue() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    space_free_.notify_all();
    thread_.join();
  }
  BackgroundQueue(const BackgroundQueue&) = delete;
  BackgroundQueue& operator=(const BackgroundQueue&) = delete;

  // The next item, waiting for it; nothing once the producer is done.
  std::optional<T> pop() {
    std::unique_lock lock(mutex_);
    item_ready_.wait(lock, [this] { return !queue_.empty() || producer_done_; });
    return take(lock);
  }

  // Whether pop() would return at once.
  bool ready() const {
    std::lock_guard lock(mutex_);
    return !queue_.empty() || producer_done_;
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
  }

  // Call after what capacity() returns has changed. Taking the lock orders the change before
  // a producer's next look at the capacity, so the wake-up cannot be lost.
  void wake() {
    { std::lock_guard lock(mutex_); }
    space_free_.notify_all();
  }

 private:
  std::optional<T> take(std::unique_lock<std::mutex>& lock) {
    if (!queue_.empty()) {
      T item = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      space_free_.notify_one();
      return item;
    }
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return std::nullopt;
  }

  void run() {
    try {
      while (true) {
        std::optional<T> item = produce_();
        std::unique_lock lock(mutex_);
        if (!item) break;
        space_free_.wait(lock, [this] { return stopping_ || queue_.size() < capacity_(); });
        if (stopping_) return;
        queue_.push_back(std::move(*item));
        lock.unlock();
        item_ready_.notify_one();
        if (on_ready_) on_ready_();
        lock.lock();
        if (stopping_) return;
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      producer_done_ = true;
    }
    item_ready_.notify_one();
    if (on_ready_) on_ready_();
  }

  Producer produce_;
  std::function<std::size_t()> capacity_;
  std::function<void()> on_ready_;
  mutable std::mutex mutex_;
  std::condition_variable item_ready_;
  std::condition_variable space_free_;
  std::deque<T> queue_;
  bool producer_done_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // declared last: it starts once everything it touches exists
};

// Assembles batches ahead of the consumer: at most `depth` wait.
class PrefetchIterator final : public BatchIterator {
 public:
  using Producer = std::function<std::optional<Batch>()>;

  PrefetchIterator(Producer produce, int depth);
  std::optional<Batch> next() override { return queue_.pop(); }

 private:
  static int checked_depth(int depth);
  BackgroundQueue<Batch> queue_;
};

}  // namespace tandem::data
