#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <numeric>
#include <thread>

#include "data/prefetch.h"
#include "tandem/data.h"

namespace tandem::data {
namespace {

// Example n: features (2, 3) filled with 100 * n + position, label n.
TensorDataset numbered_dataset(std::int64_t count) {
  std::vector<float> features;
  std::vector<std::int32_t> labels;
  for (std::int64_t n = 0; n < count; ++n) {
    for (int p = 0; p < 6; ++p)
      features.push_back(static_cast<float>(100 * n + p));
    labels.push_back(static_cast<std::int32_t>(n));
  }
  return TensorDataset(Tensor::from_vector(features, {count, 2, 3}),
                       Tensor::from_vector(labels, {count}));
}

// The labels of every batch of one epoch, checking that each feature row belongs to its label.
std::vector<std::vector<std::int32_t>> epoch_batches(const Dataset& dataset, std::int64_t epoch) {
  std::vector<std::vector<std::int32_t>> batches;
  auto iterator = dataset.iterate(epoch);
  while (std::optional<Batch> batch = iterator->next()) {
    const std::vector<std::int32_t> labels = batch->labels.to_vector<std::int32_t>();
    const std::vector<float> features = batch->features.to_vector<float>();
    EXPECT_EQ(batch->features.shape(), (Shape{static_cast<std::int64_t>(labels.size()), 2, 3}));
    for (std::size_t i = 0; i < labels.size(); ++i) {
      for (std::size_t p = 0; p < 6; ++p) {
        EXPECT_EQ(features[i * 6 + p], static_cast<float>(100 * labels[i] + static_cast<int>(p)));
      }
    }
    batches.push_back(labels);
  }
  return batches;
}

std::vector<std::int32_t> flatten(const std::vector<std::vector<std::int32_t>>& batches) {
  std::vector<std::int32_t> all;
  for (const auto& batch : batches)
    all.insert(all.end(), batch.begin(), batch.end());
  return all;
}

std::vector<std::int32_t> iota_labels(std::int32_t count) {
  std::vector<std::int32_t> values(static_cast<std::size_t>(count));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

TEST(TensorDataset, BatchesInOrderWithoutShuffle) {
  for (int depth : {0, 2}) {
    TensorDataset dataset = numbered_dataset(10);
    dataset.batch(3).prefetch(depth);
    EXPECT_EQ(dataset.num_examples(), 10);
    EXPECT_EQ(dataset.num_batches(), 4);
    EXPECT_EQ(dataset.batch_size(), 3);
    const auto batches = epoch_batches(dataset, 0);
    ASSERT_EQ(batches.size(), 4u);
    EXPECT_EQ(batches[0], (std::vector<std::int32_t>{0, 1, 2}));
    EXPECT_EQ(batches[3], (std::vector<std::int32_t>{9}));
    EXPECT_EQ(flatten(batches), iota_labels(10));
  }
}

TEST(TensorDataset, DropRemainderDropsTheShortBatch) {
  TensorDataset dataset = numbered_dataset(10);
  dataset.batch(3, /*drop_remainder=*/true).shuffle(5);
  EXPECT_EQ(dataset.num_batches(), 3);
  const auto batches = epoch_batches(dataset, 1);
  ASSERT_EQ(batches.size(), 3u);
  for (const auto& batch : batches)
    EXPECT_EQ(batch.size(), 3u);
}

TEST(TensorDataset, ShuffleVisitsEveryExampleOncePerEpoch) {
  TensorDataset dataset = numbered_dataset(103);
  dataset.batch(8).shuffle(42);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<std::int32_t> seen = flatten(epoch_batches(dataset, epoch));
    EXPECT_NE(seen, iota_labels(103)) << "epoch " << epoch << " was not shuffled";
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, iota_labels(103)) << "epoch " << epoch;
  }
}

TEST(TensorDataset, ShuffleReproducesPerSeedAndEpochAndDiffersAcrossEpochs) {
  TensorDataset first = numbered_dataset(50);
  first.batch(7).shuffle(1234);
  TensorDataset second = numbered_dataset(50);
  second.batch(7).shuffle(1234).prefetch(0);
  TensorDataset other_seed = numbered_dataset(50);
  other_seed.batch(7).shuffle(1235);

  const auto epoch0 = flatten(epoch_batches(first, 0));
  EXPECT_EQ(epoch0, flatten(epoch_batches(second, 0)));
  EXPECT_EQ(epoch0, flatten(epoch_batches(first, 0)));
  EXPECT_EQ(flatten(epoch_batches(first, 3)), flatten(epoch_batches(second, 3)));
  EXPECT_NE(epoch0, flatten(epoch_batches(first, 1)));
  EXPECT_NE(epoch0, flatten(epoch_batches(other_seed, 0)));
}

TEST(TensorDataset, RejectsBadArguments) {
  TensorDataset dataset = numbered_dataset(4);
  EXPECT_THROW(dataset.batch(0), InvalidArgument);
  EXPECT_THROW(dataset.batch(-3), InvalidArgument);
  EXPECT_THROW(dataset.prefetch(-1), InvalidArgument);
  EXPECT_THROW(dataset.split(1.0), InvalidArgument);
  EXPECT_THROW(dataset.split(-0.1), InvalidArgument);
  EXPECT_THROW(dataset.take(-1), InvalidArgument);
  EXPECT_THROW(TensorDataset(Tensor::zeros({4, 2}), Tensor::zeros({3}, DType::i32)),
               InvalidArgument);
  EXPECT_THROW(TensorDataset(Tensor::zeros({4, 2}), Tensor()), InvalidArgument);
  try {
    dataset.batch(0);
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("batch size must be positive, got 0"),
              std::string::npos)
        << error.what();
  }
}

TEST(TensorDataset, SplitTakesTheLastFractionLikeKeras) {
  TensorDataset dataset = numbered_dataset(10);
  dataset.batch(4).shuffle(9);
  auto [train, validation] = dataset.split(0.25);  // Keras: floor(10 * 0.75) = 7 stay
  EXPECT_EQ(train->num_examples(), 7);
  EXPECT_EQ(validation->num_examples(), 3);
  EXPECT_EQ(train->batch_size(), 4);
  std::vector<std::int32_t> held_out = flatten(epoch_batches(*validation, 0));
  std::sort(held_out.begin(), held_out.end());
  EXPECT_EQ(held_out, (std::vector<std::int32_t>{7, 8, 9}));
  std::vector<std::int32_t> kept = flatten(epoch_batches(*train, 0));
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, iota_labels(7));

  auto [everything, nothing] = dataset.split(0.0);
  EXPECT_EQ(everything->num_examples(), 10);
  EXPECT_EQ(nothing->num_examples(), 0);
  EXPECT_EQ(nothing->num_batches(), 0);
  EXPECT_FALSE(nothing->iterate(0)->next().has_value());
}

TEST(TensorDataset, TakeKeepsTheFirstExamples) {
  TensorDataset dataset = numbered_dataset(10);
  dataset.batch(3);
  EXPECT_EQ(flatten(epoch_batches(*dataset.take(4), 0)), iota_labels(4));
  EXPECT_EQ(dataset.take(100)->num_examples(), 10);
  EXPECT_EQ(dataset.take(4)->num_batches(), 2);
}

TEST(TensorDataset, IteratorOutlivesTheDataset) {
  std::unique_ptr<BatchIterator> iterator;
  {
    TensorDataset dataset = numbered_dataset(5);
    dataset.batch(2).shuffle(3);
    iterator = dataset.iterate(0);
  }
  std::int64_t seen = 0;
  while (auto batch = iterator->next())
    seen += batch->labels.numel();
  EXPECT_EQ(seen, 5);
}

TEST(TensorDataset, DestroyingAPrefetchingIteratorEarlyDoesNotHang) {
  TensorDataset dataset = numbered_dataset(1000);
  dataset.batch(1).shuffle(1).prefetch(2);
  std::promise<void> finished;
  std::future<void> done = finished.get_future();
  std::thread([dataset, finished = std::move(finished)]() mutable {
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto iterator = dataset.iterate(attempt);
      if (attempt % 2 == 0) iterator->next();  // leave with the queue full or still filling
    }
    finished.set_value();
  }).detach();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "destroying a prefetching iterator hung";
}

TEST(PrefetchIterator, KeepsAtMostDepthBatchesAhead) {
  std::atomic<int> produced{0};
  PrefetchIterator iterator(
      [&]() -> std::optional<Batch> {
        ++produced;
        return Batch{Tensor::zeros({1}), Tensor::zeros({1}, DType::i32)};
      },
      3);
  // Waits (on a busy machine, a while) until the producer has filled the queue.
  auto wait_for_count = [&](int count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (produced.load() < count && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  wait_for_count(3);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Three queued, and at most one more made that waits for room.
  EXPECT_GE(produced.load(), 3);
  EXPECT_LE(produced.load(), 4);
  iterator.next();
  wait_for_count(4);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LE(produced.load(), 5);
}

TEST(PrefetchIterator, RethrowsTheProducersExceptionAfterEarlierBatches) {
  int calls = 0;
  PrefetchIterator iterator(
      [&]() -> std::optional<Batch> {
        if (++calls == 3) throw IoError("disk on fire");
        return Batch{Tensor::full({1}, calls), Tensor::zeros({1}, DType::i32)};
      },
      2);
  EXPECT_EQ(iterator.next()->features.item(), 1.0);
  EXPECT_EQ(iterator.next()->features.item(), 2.0);
  EXPECT_THROW(
      {
        try {
          iterator.next();
        } catch (const IoError& error) {
          EXPECT_STREQ(error.what(), "disk on fire");
          throw;
        }
      },
      IoError);
  EXPECT_FALSE(iterator.next().has_value());
}

}  // namespace
}  // namespace tandem::data
