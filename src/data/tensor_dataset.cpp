// TensorDataset: examples are rows of two host tensors; an epoch visits them in order or in a
// permutation drawn from (seed, epoch), and batches are gathered row by row (gather_rows).
#include <cmath>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "data/prefetch.h"
#include "data/rows.h"
#include "tandem/data.h"
#include "tandem/random.h"

namespace tandem::data {
namespace {

// Fisher-Yates driven by Philox keyed with the seed, the epoch in the counter's high word: the
// order depends only on (seed, epoch, count), on every platform and standard library.
std::vector<std::int64_t> epoch_order(std::int64_t count, std::optional<std::uint64_t> seed,
                                      std::int64_t epoch) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(count));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (!seed) return order;
  for (std::int64_t i = count - 1; i > 0; --i) {
    const auto words =
        philox4x32(static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(epoch), *seed);
    const std::uint64_t draw = (std::uint64_t{words[0]} << 32) | words[1];
    // The modulo bias is below count / 2^64: negligible.
    const auto j = static_cast<std::int64_t>(draw % static_cast<std::uint64_t>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

// One epoch's batches, in order. Holds its own references to the tensors, so it outlives the
// dataset object if need be.
class EpochBatches {
 public:
  EpochBatches(Tensor features, Tensor labels, std::vector<std::int64_t> order,
               std::int64_t batch_size, std::int64_t num_batches)
      : features_(std::move(features)),
        labels_(std::move(labels)),
        order_(std::move(order)),
        batch_size_(batch_size),
        num_batches_(num_batches) {}

  std::optional<Batch> next() {
    if (next_batch_ >= num_batches_) return std::nullopt;
    const std::int64_t start = next_batch_++ * batch_size_;
    const std::int64_t count =
        std::min(batch_size_, static_cast<std::int64_t>(order_.size()) - start);
    const std::span<const std::int64_t> rows(order_.data() + start,
                                             static_cast<std::size_t>(count));
    return Batch{gather_rows(features_, rows), gather_rows(labels_, rows)};
  }

 private:
  Tensor features_;
  Tensor labels_;
  std::vector<std::int64_t> order_;
  std::int64_t batch_size_;
  std::int64_t num_batches_;
  std::int64_t next_batch_ = 0;
};

class OnDemandIterator final : public BatchIterator {
 public:
  explicit OnDemandIterator(EpochBatches batches) : batches_(std::move(batches)) {}
  std::optional<Batch> next() override { return batches_.next(); }

 private:
  EpochBatches batches_;
};

}  // namespace

TensorDataset::TensorDataset(Tensor features, Tensor labels)
    : features_(std::move(features)), labels_(std::move(labels)) {
  if (!features_.defined() || !labels_.defined()) {
    throw InvalidArgument("TensorDataset: features and labels must both be defined tensors");
  }
  if (features_.rank() == 0 || labels_.rank() == 0) {
    throw InvalidArgument("TensorDataset: features " + shape_str(features_.shape()) +
                          " and labels " + shape_str(labels_.shape()) +
                          " need a leading example dimension; reshape scalars to (1,)");
  }
  if (features_.dim(0) != labels_.dim(0)) {
    throw InvalidArgument("TensorDataset: features " + shape_str(features_.shape()) +
                          " and labels " + shape_str(labels_.shape()) +
                          " hold different numbers of examples (dimension 0); pass matching "
                          "tensors");
  }
  if (features_.device().type != DeviceType::cpu || labels_.device().type != DeviceType::cpu) {
    throw InvalidArgument("TensorDataset: features on " + features_.device().str() +
                          " and labels on " + labels_.device().str() +
                          " must be in host memory; copy them with .to(Device::cpu())");
  }
}

TensorDataset& TensorDataset::shuffle(std::uint64_t seed) {
  shuffle_seed_ = seed;
  return *this;
}

TensorDataset& TensorDataset::batch(std::int64_t batch_size, bool drop_remainder) {
  if (batch_size <= 0) {
    throw InvalidArgument("TensorDataset::batch: batch size must be positive, got " +
                          std::to_string(batch_size));
  }
  batch_size_ = batch_size;
  drop_remainder_ = drop_remainder;
  return *this;
}

TensorDataset& TensorDataset::prefetch(int depth) {
  if (depth < 0) {
    throw InvalidArgument(
        "TensorDataset::prefetch: depth must be 0 (no background thread) or "
        "positive, got " +
        std::to_string(depth));
  }
  prefetch_depth_ = depth;
  return *this;
}

std::pair<std::shared_ptr<TensorDataset>, std::shared_ptr<TensorDataset>> TensorDataset::split(
    double fraction) const {
  if (!(fraction >= 0.0 && fraction < 1.0)) {
    throw InvalidArgument("TensorDataset::split: fraction must be in [0, 1), got " +
                          std::to_string(fraction));
  }
  const std::int64_t total = num_examples();
  // As Keras computes validation_split's cut.
  const auto first_count =
      static_cast<std::int64_t>(std::floor(static_cast<double>(total) * (1.0 - fraction)));
  auto part = [this](std::int64_t start, std::int64_t count) {
    auto piece = std::make_shared<TensorDataset>(*this);
    piece->features_ = row_view(features_, start, count);
    piece->labels_ = row_view(labels_, start, count);
    return piece;
  };
  return {part(0, first_count), part(first_count, total - first_count)};
}

std::shared_ptr<TensorDataset> TensorDataset::take(std::int64_t count) const {
  if (count < 0) {
    throw InvalidArgument("TensorDataset::take: count must be non-negative, got " +
                          std::to_string(count));
  }
  auto piece = std::make_shared<TensorDataset>(*this);
  const std::int64_t kept = std::min(count, num_examples());
  piece->features_ = row_view(features_, 0, kept);
  piece->labels_ = row_view(labels_, 0, kept);
  return piece;
}

std::int64_t TensorDataset::num_examples() const {
  return features_.dim(0);
}

std::int64_t TensorDataset::num_batches() const {
  const std::int64_t total = num_examples();
  return drop_remainder_ ? total / batch_size_ : (total + batch_size_ - 1) / batch_size_;
}

std::unique_ptr<BatchIterator> TensorDataset::iterate(std::int64_t epoch) const {
  EpochBatches batches(features_, labels_, epoch_order(num_examples(), shuffle_seed_, epoch),
                       batch_size_, num_batches());
  if (prefetch_depth_ == 0) return std::make_unique<OnDemandIterator>(std::move(batches));
  return std::make_unique<PrefetchIterator>(
      [batches = std::move(batches)]() mutable { return batches.next(); }, prefetch_depth_);
}

}  // namespace tandem::data
