#pragma once
// A run's input pipelines from its data (the validation split and caching recipe).
#include <cstdint>
#include <optional>

#include "tandem/data_spec.h"
#include "tandem/run.h"

namespace tandem::run {

// Training: the examples shuffled every epoch through a buffer as large as the split (a full
// shuffle; decoded JPEG/PNG images kept in memory after the first epoch when they fit, else a
// bounded buffer), augmented, and batched ahead on a prefetch thread (depth autotuned) while the
// model trains; each batch is scaled to [0, 1] floats as the model takes it, so the buffers hold
// compact u8 pixels (a quarter of the memory; the scaling costs microseconds a batch).
// Validation (a data set of its own, or the last fraction of the training set as Keras'
// validation_split) and test: the same without shuffle or augmentation, in order.
struct TrainingInput {
  data::Pipeline training;
  std::optional<data::Pipeline> validation;
  std::optional<data::Pipeline> test;
  std::int64_t dropped = 0;  // training examples left out of each epoch (see training_input)
};

// The pipelines at `global_batch` examples a step. `equal_shares`: the replicas each global
// batch must split into equally (XLA's replicas run one program of one static shape); a last
// partial batch that does not is dropped.
TrainingInput training_input(const data::ImageData& data, const RunConfig& config,
                             std::int64_t global_batch, int equal_shares, const SettingName& name);

}  // namespace tandem::run
