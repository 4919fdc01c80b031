// train::next_batch: how fit (and custom loops) fetch a batch, timed and marked as input wait.
#include <chrono>

#include "tandem/data.h"
#include "tandem/spans.h"
#include "tandem/train.h"

namespace tandem::train {
namespace {
thread_local double last_wait_seconds = 0.0;
}  // namespace

std::optional<data::Batch> next_batch(data::BatchIterator& batches) {
  SpanScope wait(SpanKind::input_wait);
  const auto start = std::chrono::steady_clock::now();
  std::optional<data::Batch> batch = batches.next();
  last_wait_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return batch;
}

double last_input_wait_seconds() {
  return last_wait_seconds;
}

}  // namespace tandem::train
