#pragma once
// A BatchIterator that assembles batches ahead of the consumer on a background thread.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "tandem/data.h"

namespace tandem::data {

// Calls `produce` on its own thread until it returns nothing, keeping at most `depth` batches
// waiting. An exception from `produce` reaches the consumer from next(), after the batches made
// before it. Destroying the iterator early stops and joins the thread.
class PrefetchIterator final : public BatchIterator {
 public:
  using Producer = std::function<std::optional<Batch>()>;

  PrefetchIterator(Producer produce, int depth);
  ~PrefetchIterator() override;
  PrefetchIterator(const PrefetchIterator&) = delete;
  PrefetchIterator& operator=(const PrefetchIterator&) = delete;

  std::optional<Batch> next() override;

 private:
  void run();

  Producer produce_;
  std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable batch_ready_;
  std::condition_variable space_free_;
  std::deque<Batch> queue_;
  bool producer_done_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // declared last: it starts once everything it touches exists
};

}  // namespace tandem::data
