#pragma once
// Data for training: the Dataset interface that model.fit consumes, IDX files (MNIST and
// Fashion-MNIST, gzip or plain) and an in-memory dataset with seeded shuffling, batching and a
// background prefetch thread. The tf.data-style input pipeline (tandem/pipeline.h) is a Dataset
// too once batched.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "tandem/tensor.h"

namespace tandem::data {

struct Batch {
  Tensor features;  // (B, ...) e.g. images (B, 28, 28, 1) f32
  Tensor labels;    // (B,) i32 class ids, or (B, ...) targets
};

// What one pass over a dataset measured about itself, for the trainer's report. A Pipeline
// fills it (see tandem/pipeline.h); other datasets leave it empty.
struct PassReport {
  std::int64_t skipped = 0;     // bad elements skipped under OnError::skip
  std::string skipped_summary;  // which stages skipped them, with an example of why
  std::string advice;           // the most likely fix, should the trainer wait for input
  std::string stats_table;      // per-stage elements, bytes, busy and wait time
};

// One pass over a dataset; next() returns nothing at the end of the epoch.
class BatchIterator {
 public:
  virtual ~BatchIterator() = default;
  virtual std::optional<Batch> next() = 0;
  virtual PassReport report() const { return {}; }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // A fresh pass; `epoch` selects the shuffle order so every epoch differs but runs reproduce.
  virtual std::unique_ptr<BatchIterator> iterate(std::int64_t epoch) const = 0;
  virtual std::int64_t num_examples() const = 0;
  // Batches per epoch.
  virtual std::int64_t num_batches() const = 0;
  virtual std::int64_t batch_size() const = 0;
};

// features (N, ...) and labels (N, ...) held in host memory.
class TensorDataset final : public Dataset {
 public:
  TensorDataset(Tensor features, Tensor labels);

  // Shuffles examples every epoch with a seed derived from (seed, epoch).
  TensorDataset& shuffle(std::uint64_t seed);
  // batch_size must be positive; the last short batch is dropped when drop_remainder.
  TensorDataset& batch(std::int64_t batch_size, bool drop_remainder = false);
  // Assembles up to `depth` batches ahead on a background thread (0: assemble on demand).
  TensorDataset& prefetch(int depth);

  // Splits off the last `fraction` of the examples (as Keras' validation_split does).
  std::pair<std::shared_ptr<TensorDataset>, std::shared_ptr<TensorDataset>> split(
      double fraction) const;
  // The first `count` examples.
  std::shared_ptr<TensorDataset> take(std::int64_t count) const;

  const Tensor& features() const { return features_; }
  const Tensor& labels() const { return labels_; }

  std::unique_ptr<BatchIterator> iterate(std::int64_t epoch) const override;
  std::int64_t num_examples() const override;
  std::int64_t num_batches() const override;
  std::int64_t batch_size() const override { return batch_size_; }

 private:
  Tensor features_;
  Tensor labels_;
  std::optional<std::uint64_t> shuffle_seed_;
  std::int64_t batch_size_ = 32;
  bool drop_remainder_ = false;
  int prefetch_depth_ = 2;
};

// Reads an IDX file, gzip-compressed (e.g. *.gz) or plain: zlib tells them apart by content.
// Element types u8, i32, f32 and f64 keep their type; i8 and i16 widen to i32 (Tandem has no
// narrower signed dtype). Throws IoError naming the file, the problem (missing, truncated,
// trailing data, bad magic number, impossible shape) and what to do.
Tensor read_idx(const std::string& path);

struct ImageClassificationData {
  Tensor train_images;  // (N, H, W, C) f32 in [0, 1]
  Tensor train_labels;  // (N,) i32
  Tensor test_images;
  Tensor test_labels;
  std::int64_t num_classes = 10;
};

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";
// Loads the four Fashion-MNIST (or MNIST) IDX files from `directory`.
ImageClassificationData load_fashion_mnist(const std::string& directory = kFashionMnistDefaultDir);

// The image and label files of one Fashion-MNIST (or MNIST) split, "train" or "t10k", in
// `directory`: each "<split>-images-idx3-ubyte" with ".gz" when that exists, else plain. Throws
// IoError saying what is missing and where to get it. (Pipeline::idx reads them.)
struct IdxFiles {
  std::string images;
  std::string labels;
};
IdxFiles fashion_mnist_files(const std::string& directory, const std::string& split);
// Whether `directory` has anything by the name of one of the split's files (gzipped or not,
// whatever it is): a folder to read as Fashion-MNIST, with fashion_mnist_files' errors.
bool has_fashion_mnist_split(const std::string& directory, const std::string& split);

}  // namespace tandem::data
