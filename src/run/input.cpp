#include "run/input.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"

namespace tandem::run {
namespace {

// Evaluation only runs forward passes; larger batches are faster and change no result.
constexpr std::int64_t kEvaluationBatchSize = 256;
// Decoded training images up to this size stay in memory after the first epoch (JPEG and PNG
// decoding would otherwise be paid every epoch); larger sets are decoded again each epoch and
// shuffled through a buffer of kShuffleBufferBytes.
constexpr std::int64_t kCacheBytes = std::int64_t{2} << 30;
constexpr std::int64_t kShuffleBufferBytes = std::int64_t{256} << 20;

data::Pipeline scaled_batches(const data::Pipeline& examples, std::int64_t batch_size,
                              bool drop_remainder = false) {
  return examples.batch(batch_size, drop_remainder)
      .prefetch(data::kAutotune)
      .map(data::cast(DType::f32, 1.0 / 255.0), {.name = "scale"});
}

}  // namespace

TrainingInput training_input(const data::ImageData& data, const RunConfig& config,
                             std::int64_t global_batch, int equal_shares, const SettingName& name) {
  const double split = config.data.validation_split;
  const std::int64_t total = data.training.cardinality();
  const auto kept =
      static_cast<std::int64_t>(std::floor(static_cast<double>(total) * (1.0 - split)));
  if (split > 0.0 && kept == total) {
    throw ConfigError(name("validation-split") + " " + shortest(split) +
                      " holds out no example of " + std::to_string(total) +
                      "; pass a larger fraction or 0");
  }
  if (kept == 0) {
    throw ConfigError(name("validation-split") + " " + shortest(split) + " holds out all " +
                      std::to_string(total) +
                      " training examples and leaves none to train on; pass a smaller fraction, "
                      "e.g. 0.1");
  }
  // Examples in class order (an image folder) are split at random, with the run's seed.
  const std::int64_t trained = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::floor(static_cast<double>(kept) * config.data.fraction)));
  const data::Pipeline all =
      data.ordered_by_class && trained < total
          ? data.training.shuffle(total, config.seed, /*reshuffle_each_iteration=*/false)
          : data.training;
  data::Pipeline examples = all.take(trained);
  const std::int64_t image_bytes = shape_numel(data.image_shape);
  std::int64_t shuffle_buffer = trained;
  if (data.decodes) {
    if (trained * image_bytes <= kCacheBytes) {
      examples = examples.cache();
    } else {
      shuffle_buffer =
          std::min(trained, std::max<std::int64_t>(1024, kShuffleBufferBytes / image_bytes));
    }
  }
  examples = data::augmented(examples.shuffle(shuffle_buffer, config.seed), config.data.augment,
                             data.image_shape, config.seed);
  const std::int64_t remainder = trained % global_batch;
  const bool drop_remainder = remainder % equal_shares != 0;
  TrainingInput input{scaled_batches(examples, global_batch, drop_remainder), std::nullopt,
                      std::nullopt, drop_remainder ? remainder : 0};
  if (data.validation) {
    input.validation = scaled_batches(*data.validation, kEvaluationBatchSize);
  } else if (kept < total) {
    input.validation = scaled_batches(all.skip(kept), kEvaluationBatchSize);
  }
  if (data.test) input.test = scaled_batches(*data.test, kEvaluationBatchSize);
  return input;
}

}  // namespace tandem::run
