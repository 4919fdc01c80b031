#pragma once
// Data as a user names it: a spec ("photos/", "tfrecord:train-*.tfrecord", "images.idx,labels.idx",
// "cifar10:data_batch_1.bin") opened into the labelled image splits a run trains, validates and
// tests on. Any reader the pipeline has: a Fashion-MNIST (or MNIST) folder of IDX files, a pair of
// IDX files, CIFAR-10 binary batches, a folder of <class>/<image> files (with train/ val/ test/
// splits or without), or TFRecord files of tf.train.Example records whose image and label
// features are named or found. The format is told from the files' first bytes. Every split comes
// out as {"image": u8 (H, W, C), "label": i32 ()}, decoded and of one size.
//
//   const data::ImageData photos = data::open_image_data({.training = "photos/"});
//   // photos.training, photos.validation (photos/val/, if there), photos.image_shape, ...
//
// Mistakes in what was named are ConfigError (tandem/error.h), each naming the setting as the
// caller spells it (SettingName: "--data" for the CLI, "data" by default) and the fix.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tandem/data.h"
#include "tandem/error.h"
#include "tandem/pipeline.h"

namespace tandem::data {

// Where a run's examples come from. Each SPEC is [READER:]PATH: PATH a folder, a file, a glob or
// a comma-separated list; READER (fashion-mnist, idx, cifar10, images, tfrecord) forces the
// reader. Settings named in messages by key: data-dir, data, validation-data, test-data,
// image-feature, label-feature, image-size, channels, num-classes.
struct ImageDataOptions {
  // Fashion-MNIST's IDX files, read when `training` is empty.
  std::string fashion_mnist_dir = kFashionMnistDefaultDir;
  std::string training;       // SPEC; empty: Fashion-MNIST from fashion_mnist_dir
  std::string validation;     // SPEC; empty: the data's val/ split, if any
  std::string test;           // SPEC; empty: the data's test split, if any
  std::string image_feature;  // TFRecord features; empty: found by name and content
  std::string label_feature;
  std::int64_t image_height = 0;  // every image resized to this; 0: the first training image's
  std::int64_t image_width = 0;
  int channels = 0;              // 1 (grey) or 3 (RGB); 0: the first training image's
  std::int64_t num_classes = 0;  // 0: from the data (class folders, names, or largest label + 1)
};

struct ImageData {
  std::string description;  // "image folder photos (3 classes)"
  Pipeline training;        // examples in a fixed order, not shuffled
  std::optional<Pipeline> validation;
  std::optional<Pipeline> test;
  Shape image_shape;  // (H, W, C)
  std::int64_t num_classes = 0;
  std::vector<std::string> class_names;  // one per class; numbers where the data has no names
  // A source in class order (an image folder): a validation split is drawn at random (seeded),
  // not as the last fraction.
  bool ordered_by_class = false;
  // Decoding is the costly part (JPEG, PNG): worth keeping the decoded images in memory after the
  // first epoch when they fit.
  bool decodes = false;
};

// Opens the splits. Checks what can be checked before training: every file exists and is of a
// format Tandem reads, the features are there, the splits agree in classes and image channels.
ImageData open_image_data(const ImageDataOptions& options,
                          const SettingName& name = setting_identifier);

// Whether a SPEC names data that is there (a folder, or files that exist), without reading it:
// checked as a setting is set, so that a run file names the line of a path that is not there.
void check_data_spec(const std::string& name, const std::string& text);

// What a data file holds, from its first bytes: JPEG/PNG by signature, IDX by its magic, TFRecord
// by the CRC of its first record's length, CIFAR-10 by a size that is a whole number of 3073-byte
// records (gzip-compressed files are looked at decompressed).
enum class DataKind { idx, tfrecord, cifar10, image, unknown };
DataKind kind_of_file(const std::string& path);

// Training-time augmentations by name, applied in the order given to decoded u8 images of
// `image_shape` (H, W, C): flip (mirror half the images), translate (shift by up to 1/8 of the
// size, zero-filled), resized-crop (a random crop of 8-100% of the area resized back).
const std::vector<std::string>& augmentation_names();
Pipeline augmented(const Pipeline& examples, const std::vector<std::string>& augment,
                   const Shape& image_shape, std::uint64_t seed);

}  // namespace tandem::data
