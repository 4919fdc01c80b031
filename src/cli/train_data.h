#pragma once
// `tandem train --data SPEC`: the data sets a run trains, validates and tests on, from any reader
// the pipeline has: a Fashion-MNIST (or MNIST) folder of IDX files, a pair of IDX files, CIFAR-10
// binary batches, a folder of <class>/<image> files (with train/val/test splits or without), or
// TFRecord files of tf.train.Example records whose image and label features are named or found.
// Every split comes out as {"image": u8 (H, W, C), "label": i32 ()}, decoded and of one size,
// ready for the zoo's image models.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "tandem/pipeline.h"

namespace tandem::cli {

struct TrainDataOptions {
  std::string data;  // --data SPEC; empty: Fashion-MNIST from --data-dir
  std::string validation_data;
  std::string test_data;
  std::string image_feature;  // TFRecord features; empty: found by name and content
  std::string label_feature;
  std::int64_t image_height = 0;  // 0: the first training image's
  std::int64_t image_width = 0;
  int channels = 0;                  // 0: the first training image's
  std::vector<std::string> augment;  // flip, translate, resized-crop, in the order given
  std::int64_t num_classes = 0;      // 0: from the data
};

const OptionTable<TrainDataOptions>& train_data_options();

struct TrainingData {
  std::string description;  // "image folder photos (3 classes)"
  data::Pipeline training;  // examples in a fixed order, not shuffled
  std::optional<data::Pipeline> validation;
  std::optional<data::Pipeline> test;
  Shape image_shape;  // (H, W, C)
  std::int64_t num_classes = 0;
  std::vector<std::string> class_names;  // one per class; numbers where the data has no names
  // A source in class order (an image folder): a validation split is drawn at random (seeded),
  // not as the last fraction.
  bool ordered_by_class = false;
  // Decoding is the costly part (JPEG, PNG): the decoded training images are kept in memory
  // after the first epoch when they fit.
  bool decodes = false;
};

// Opens the data sets: `data_dir` (Fashion-MNIST) when options.data is empty. Checks what can
// be checked before training: every file exists and is of a format Tandem reads, the features
// are there, the splits agree in classes and image channels.
TrainingData open_training_data(const TrainDataOptions& options, const std::string& data_dir);

// The training-only augmentations of options.augment, applied to decoded u8 images of
// `image_shape` (H, W, C).
data::Pipeline augmented(const data::Pipeline& examples, const TrainDataOptions& options,
                         const Shape& image_shape, std::uint64_t seed);

}  // namespace tandem::cli
