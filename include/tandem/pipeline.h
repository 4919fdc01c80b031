#pragma once
// The input pipeline: Tandem's tf.data. A Pipeline is an immutable description of a chain of
// stages, from a source (tensors in memory, a generator, IDX, CIFAR-10, TFRecord files, a folder
// of images, synthetic data) through stages (map, filter, shuffle, batch, padded_batch,
// prefetch, cache, repeat, take, skip, shard, interleave). Every pass over it (an epoch) runs
// the stages, multi-threaded where asked, and counts what each does. Elements are named tensors
// ("image", "label", ...); byte strings (an encoded JPEG, a serialized record, a path) are rank-1
// u8 tensors.
//
//   auto training = data::Pipeline::tfrecord({"train-0.tfrecord", "train-1.tfrecord"})
//                       .map(data::parse_examples(spec), {.num_parallel_calls = data::kAutotune})
//                       .shuffle(10000, /*seed=*/42)
//                       .batch(32)
//                       .prefetch(data::kAutotune);
//   model.fit(training, {.epochs = 10});  // a batched Pipeline is a data::Dataset: "image" -> x,
//   "label" -> y
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tandem/data.h"
#include "tandem/tensor.h"

namespace tandem::data {

// For num_parallel_calls and prefetch buffer sizes: let the autotuner choose and adjust.
inline constexpr int kAutotune = -1;
// Cardinality of a pipeline that repeats forever, and of one whose length is not known without
// running it (after filter, from a generator, over TFRecord files).
inline constexpr std::int64_t kInfiniteCardinality = -1;
inline constexpr std::int64_t kUnknownCardinality = -2;

// What a stage does with an element it cannot read or transform (a truncated record, a CRC
// mismatch, a corrupt image, a label out of range, a file gone): raise an error naming the file
// and byte offset or record index, or skip the element, count it and report the count.
enum class OnError { raise, skip };

// Where an element came from, for error messages.
struct Origin {
  std::shared_ptr<const std::string> source;  // a file, or a description of the source
  std::int64_t index = -1;                    // element or record index within the source
  std::int64_t offset = -1;                   // byte offset in the file, when there is one
  // "train.tfrecord, record 17 at byte 4242"
  std::string str() const;
};

class Element {
 public:
  Element() = default;
  Element(std::initializer_list<std::pair<std::string, Tensor>> components);

  bool contains(std::string_view name) const;
  // Throws InvalidArgument naming the components the element has.
  const Tensor& at(std::string_view name) const;
  Tensor& at(std::string_view name);
  // Adds the component or replaces it.
  void set(std::string name, Tensor value);
  void erase(std::string_view name);
  std::vector<std::string> names() const;
  std::size_t size() const { return components_.size(); }
  auto begin() const { return components_.begin(); }
  auto end() const { return components_.end(); }
  // Bytes of all components.
  std::size_t nbytes() const;

  // A byte-string component (rank-1 u8) as text, and text as a byte-string tensor.
  std::string string(std::string_view name) const;
  static Tensor bytes(std::string_view text);

  const Origin& origin() const { return origin_; }
  void set_origin(Origin origin) { origin_ = std::move(origin); }
  // Different for every element of a pass and for every pass (epoch); random transforms draw
  // from it, so their results do not depend on thread timing.
  std::uint64_t random_key() const { return random_key_; }
  void set_random_key(std::uint64_t key) { random_key_ = key; }

  // "{image: u8 (28, 28, 1), label: i32 ()}"
  std::string signature() const;

 private:
  std::vector<std::pair<std::string, Tensor>> components_;
  Origin origin_;
  std::uint64_t random_key_ = 0;
};

using MapFn = std::function<Element(Element)>;
using Predicate = std::function<bool(const Element&)>;

struct MapOptions {
  // Elements transformed at once on a pool of threads; 1 runs the function on the consumer's
  // thread; kAutotune lets the autotuner choose within the pipeline's CPU budget.
  int num_parallel_calls = 1;
  // Hand out results in input order. false hands each out as soon as it is ready, so one slow
  // element does not hold up the others.
  bool deterministic = true;
  // skip: an element whose function throws is dropped and counted (see OnError).
  OnError on_error = OnError::raise;
  // In statistics and error messages: "map(decode)".
  std::string name;
};

struct InterleaveOptions {
  // Inputs (e.g. files) open at once; their elements are taken in turn.
  int cycle_length = 2;
  // Consecutive elements taken from one input before moving to the next.
  int block_length = 1;
  // 1 reads the inputs on the consumer's thread; more (or kAutotune) reads every input of the
  // cycle on a thread of its own, ahead of the consumer, so that files are read in parallel.
  int num_parallel_calls = 1;
  bool deterministic = true;
};

struct PaddedBatchOptions {
  bool drop_remainder = false;
  // Per component, the padded shape (without the batch axis); -1 extents pad to the longest in
  // the batch. Components not listed pad every axis to the longest in the batch.
  std::map<std::string, Shape> padded_shapes;
  // Per component, the padding value (default 0).
  std::map<std::string, double> padding_values;
};

// A component of synthetic data: random values of `dtype` in [low, high).
struct SyntheticComponent {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  double low = 0.0;
  double high = 1.0;
};

struct IdxOptions {
  // Fashion-MNIST's (N, 28, 28) images become (28, 28, 1) elements, ready for Conv2D.
  bool add_channel_axis = true;
  // > 0: labels must lie in [0, num_classes).
  std::int64_t num_classes = 0;
  OnError on_error = OnError::raise;
};

struct ReaderOptions {
  OnError on_error = OnError::raise;
};

struct ImageFolderOptions {
  // File name extensions taken (case-insensitive); other files are ignored.
  std::vector<std::string> extensions{".jpg", ".jpeg", ".png"};
  OnError on_error = OnError::raise;
};

struct PipelineOptions {
  // Threads the autotuner may give the pipeline's parallel stages together (0: the usable cores,
  // usable_cpu_cores()).
  int cpu_budget = 0;
  // Bytes the autotuner may let prefetch buffers hold together.
  std::int64_t ram_budget = std::int64_t{1} << 30;
};

// One stage's counters over a pass.
struct StageStats {
  std::string name;           // "map(decode)", "tfrecord", "batch(32)", ...
  std::int64_t elements = 0;  // produced
  std::int64_t bytes = 0;     // in the elements produced
  std::int64_t skipped = 0;   // bad elements dropped under OnError::skip
  double busy_seconds = 0.0;  // thread-seconds of the stage's own work (not its input's)
  double wait_seconds = 0.0;  // seconds its consumer spent waiting for its elements
  int parallelism = 1;        // threads working in the stage now
  int buffer = 0;             // elements it may hold ready ahead of its consumer
  bool autotuned = false;
  std::vector<std::string> skip_reasons;  // the first few errors skipped, for the report
};

struct PipelineStats {
  std::vector<StageStats> stages;  // sources first, the stage the consumer reads last
  double seconds = 0.0;            // since the pass began
  int cpu_budget = 1;

  std::int64_t skipped() const;
  // One line per stage: elements, elements/s, MB, busy and wait seconds, threads, buffer.
  std::string table() const;
  // "3 elements skipped: tfrecord: train.tfrecord, record 7 at byte 912: CRC mismatch ..."
  std::string skipped_summary() const;
  // The most likely fix when the consumer waits for this pipeline, as a performance guide
  // would put it: the stage that limits throughput and what to change there.
  std::string advice() const;
};

// One pass over a pipeline. Destroying it early stops and joins every thread of the pass.
class ElementIterator {
 public:
  ElementIterator(ElementIterator&&) noexcept;
  ElementIterator& operator=(ElementIterator&&) noexcept;
  ~ElementIterator();

  std::optional<Element> next();
  PipelineStats stats() const;

 private:
  friend class Pipeline;
  struct Pass;
  explicit ElementIterator(std::unique_ptr<Pass> pass);
  std::unique_ptr<Pass> pass_;
};

class Node;

class Pipeline final : public Dataset {
 public:
  // ---- Sources ----
  // Row i of every tensor (all share dimension 0), as tf.data.Dataset.from_tensor_slices.
  static Pipeline from_tensor_slices(const Element& columns);
  // {"value": i64 scalar} for 0 .. count-1.
  static Pipeline range(std::int64_t count);
  // `start` is called at the beginning of every pass and returns the function that yields its
  // elements (nothing at the end). `count` is the cardinality, if known.
  using Generator = std::function<std::optional<Element>()>;
  static Pipeline from_generator(std::function<Generator()> start,
                                 std::int64_t count = kUnknownCardinality);
  // An IDX image file and its IDX label file (gzip or plain): {"image": (H, W, 1) as stored,
  // "label": i32 ()}.
  static Pipeline idx(const std::string& images_path, const std::string& labels_path,
                      IdxOptions options = {});
  // CIFAR-10 binary batches (data_batch_1.bin, ...): {"image": u8 (32, 32, 3), "label": i32 ()}.
  static Pipeline cifar10(std::vector<std::string> files, ReaderOptions options = {});
  // TFRecord files, gzip-compressed or plain, CRC-32C checked: {"record": u8 (n,)}, the
  // serialized record (parse it with parse_examples).
  static Pipeline tfrecord(std::vector<std::string> files, ReaderOptions options = {});
  // root/<class>/<file>: {"image": u8 (n,) the encoded file, "label": i32 ()} with classes
  // numbered in sorted order of their folder names (class_names() lists them). Decode with
  // decode_image().
  static Pipeline image_folder(const std::string& root, ImageFolderOptions options = {});
  // `count` elements of random values (a few distinct ones, reused), for benchmarks.
  static Pipeline synthetic(std::vector<SyntheticComponent> components, std::int64_t count,
                            std::uint64_t seed = 0);
  // Files matching glob patterns, sorted: {"path": u8 bytes}. Feed them to interleave.
  static Pipeline list_files(std::vector<std::string> patterns);

  // ---- Stages ----
  Pipeline map(MapFn fn, MapOptions options = {}) const;
  Pipeline filter(Predicate keep, std::string name = "") const;
  // Fills a buffer of `buffer_size` elements and hands out a random one, refilling its place,
  // as tf.data does; a buffer at least as large as the data is a full uniform shuffle. The
  // order depends only on (seed, pass) with reshuffle_each_iteration, on seed alone without.
  Pipeline shuffle(std::int64_t buffer_size, std::uint64_t seed,
                   bool reshuffle_each_iteration = true) const;
  // Stacks `size` consecutive elements into one whose components have a leading batch axis.
  Pipeline batch(std::int64_t size, bool drop_remainder = false) const;
  Pipeline padded_batch(std::int64_t size, PaddedBatchOptions options = {}) const;
  // Makes up to `buffer_size` elements ahead on a background thread (kAutotune: grows the
  // buffer while the consumer waits, within the RAM budget).
  Pipeline prefetch(int buffer_size = kAutotune) const;
  // The first complete pass is kept, in memory (path empty) or in a file that later passes
  // and later runs read instead of recomputing; a file written by a different pipeline is
  // refused.
  Pipeline cache(std::string path = "") const;
  // `count` passes over the input, or forever (-1).
  Pipeline repeat(std::int64_t count = -1) const;
  Pipeline take(std::int64_t count) const;
  // Declares that a pass yields `count` elements (a count taken once, by a pass over a source of
  // unknown cardinality), so later stages and model.fit need not count; a pass that yields
  // another number throws.
  Pipeline assert_cardinality(std::int64_t count) const;
  Pipeline skip(std::int64_t count) const;
  // Every num_shards-th element starting at `index`: worker `index` of `num_shards`.
  Pipeline shard(std::int64_t num_shards, std::int64_t index) const;
  // Maps every element to a pipeline (e.g. a file to its records) and interleaves them.
  Pipeline interleave(std::function<Pipeline(const Element&)> open,
                      InterleaveOptions options = {}) const;

  // Settings for every pass (autotuner budgets).
  Pipeline with_options(PipelineOptions options) const;
  // Which components model.fit takes as features and labels (default "image" and "label").
  Pipeline with_keys(std::string features, std::string labels) const;

  // ---- Running ----
  // A pass; `pass` (the epoch) seeds reshuffles and random transforms.
  ElementIterator start(std::int64_t pass = 0) const;
  // Every element of one pass.
  std::vector<Element> collect(std::int64_t pass = 0) const;
  // Elements per pass, kInfiniteCardinality or kUnknownCardinality.
  std::int64_t cardinality() const;
  // "tfrecord(2 files) -> map(parse) -> shuffle(10000) -> batch(32) -> prefetch(autotune)"
  std::string describe() const;
  // The class names of the image_folder source this pipeline reads, in label order.
  std::vector<std::string> class_names() const;
  const PipelineOptions& options() const { return options_; }

  // ---- data::Dataset, for model.fit and model.evaluate ----
  // Batches of the features and labels components. A pipeline whose cardinality is unknown is
  // counted once, by running a pass, the first time the count is needed.
  std::unique_ptr<BatchIterator> iterate(std::int64_t epoch) const override;
  std::int64_t num_examples() const override;
  std::int64_t num_batches() const override;
  std::int64_t batch_size() const override;

  // For stage implementations.
  explicit Pipeline(std::shared_ptr<const Node> node, PipelineOptions options = {});
  const std::shared_ptr<const Node>& node() const { return node_; }

 private:
  Pipeline then(std::shared_ptr<const Node> node) const;
  std::int64_t counted_batches() const;

  std::shared_ptr<const Node> node_;
  PipelineOptions options_;
  std::string features_key_ = "image";
  std::string labels_key_ = "label";
  // Counted once when the cardinality is unknown.
  std::shared_ptr<std::atomic<std::int64_t>> counted_;
};

// ---- Map functions for common transformations (each acts on one component) ----
// Raises (or, under OnError::skip in map, skips) an element whose label lies outside
// [0, num_classes), naming where it came from.
MapFn check_label(std::int64_t num_classes, std::string key = "label");
// u8 -> f32 and the like: out = value * scale.
MapFn cast(DType dtype, double scale = 1.0, std::string key = "image");

}  // namespace tandem::data
