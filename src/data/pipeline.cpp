// Pipeline: the public handle over a node graph; elements; passes and their statistics; the
// data::Dataset face that model.fit consumes.
#include <algorithm>
#include <cstring>
#include <utility>

#include "data/nodes.h"
#include "data/pipeline_node.h"
#include "tandem/pipeline.h"

namespace tandem::data {

// ---- Origin and Element ----

std::string Origin::str() const {
  std::string text = source ? *source : std::string("an element");
  if (index >= 0)
    text += std::string(offset >= 0 ? ", record " : ", element ") + std::to_string(index);
  if (offset >= 0) text += " at byte " + std::to_string(offset);
  return text;
}

Element::Element(std::initializer_list<std::pair<std::string, Tensor>> components) {
  for (const auto& [name, value] : components)
    set(name, value);
}

bool Element::contains(std::string_view name) const {
  return std::any_of(components_.begin(), components_.end(),
                     [&](const auto& component) { return component.first == name; });
}

const Tensor& Element::at(std::string_view name) const {
  for (const auto& [component, value] : components_) {
    if (component == name) return value;
  }
  std::string names;
  for (const auto& [component, value] : components_)
    names += (names.empty() ? "" : ", ") + component;
  throw InvalidArgument("the element has no component '" + std::string(name) + "'; it has " +
                        (names.empty() ? std::string("none") : names) +
                        (origin_.source ? " (from " + origin_.str() + ")" : std::string()));
}

Tensor& Element::at(std::string_view name) {
  return const_cast<Tensor&>(std::as_const(*this).at(name));
}

void Element::set(std::string name, Tensor value) {
  for (auto& [component, existing] : components_) {
    if (component == name) {
      existing = std::move(value);
      return;
    }
  }
  components_.emplace_back(std::move(name), std::move(value));
}

void Element::erase(std::string_view name) {
  std::erase_if(components_, [&](const auto& component) { return component.first == name; });
}

std::vector<std::string> Element::names() const {
  std::vector<std::string> names;
  for (const auto& [component, value] : components_)
    names.push_back(component);
  return names;
}

std::size_t Element::nbytes() const {
  std::size_t total = 0;
  for (const auto& [component, value] : components_)
    total += value.nbytes();
  return total;
}

std::string Element::string(std::string_view name) const {
  const Tensor& value = at(name);
  if (value.dtype() != DType::u8 || value.rank() != 1) {
    throw InvalidArgument("component '" + std::string(name) + "' is " + dtype_name(value.dtype()) +
                          " " + shape_str(value.shape()) + ", not a byte string (u8 of rank 1)");
  }
  return std::string(static_cast<const char*>(value.raw_data()),
                     static_cast<std::size_t>(value.numel()));
}

Tensor Element::bytes(std::string_view text) {
  Tensor value = Tensor::empty({static_cast<std::int64_t>(text.size())}, DType::u8);  // (n,)
  if (!text.empty()) std::memcpy(value.raw_data(), text.data(), text.size());
  return value;
}

std::string Element::signature() const {
  std::string text = "{";
  for (const auto& [component, value] : components_) {
    if (text.size() > 1) text += ", ";
    text += component + ": " + dtype_name(value.dtype()) + " " + shape_str(value.shape());
  }
  return text + "}";
}

// ---- Nodes and streams ----

std::string Node::describe() const {
  std::string text;
  for (const auto& input : inputs_) {
    text += input->describe() + " -> ";
  }
  if (inputs_.size() > 1) text = "[" + text.substr(0, text.size() - 4) + "] -> ";
  return text + name();
}

Element Stream::element_at(std::int64_t) {
  throw Error("internal error: element_at() on a stream that does not read by position");
}

Element Stream::gather(std::span<const std::int64_t>) {
  throw Error("internal error: gather() on a stream that does not read by position");
}

namespace {

// Times the consumer's waits on a stage and counts what it hands out, read in order or by
// position.
class CountedStream final : public Stream {
 public:
  CountedStream(std::unique_ptr<Stream> inner, StageCounters& counters)
      : inner_(std::move(inner)), counters_(counters) {}

  std::optional<Element> next() override {
    const WaitClock clock{counters_, now_ns()};
    std::optional<Element> element = inner_->next();
    if (element) counters_.count_element(static_cast<std::int64_t>(element->nbytes()));
    return element;
  }

  std::optional<std::int64_t> positions() override { return inner_->positions(); }

  Element element_at(std::int64_t position) override {
    const WaitClock clock{counters_, now_ns()};
    Element element = inner_->element_at(position);
    counters_.count_element(static_cast<std::int64_t>(element.nbytes()));
    return element;
  }

  Element gather(std::span<const std::int64_t> positions) override {
    const WaitClock clock{counters_, now_ns()};
    Element stacked = inner_->gather(positions);
    counters_.count_elements(static_cast<std::int64_t>(positions.size()),
                             static_cast<std::int64_t>(stacked.nbytes()));
    return stacked;
  }

 private:
  struct WaitClock {
    StageCounters& counters;
    std::int64_t start;
    ~WaitClock() { counters.wait_ns.fetch_add(now_ns() - start, std::memory_order_relaxed); }
  };

  std::unique_ptr<Stream> inner_;
  StageCounters& counters_;
};

template <typename E>
[[noreturn]] void rethrow_as(const std::string& message) {
  throw E(message);
}

}  // namespace

std::unique_ptr<Stream> open_stream(const Node& node, const PassContext& context,
                                    StageCounters* parent, int slot, StageCounters** counters) {
  StageCounters& stage =
      context.state->stats.counters(parent, slot, node.name(), node.asynchronous());
  if (counters != nullptr) *counters = &stage;
  return std::make_unique<CountedStream>(node.open(context, stage), stage);
}

std::uint64_t mix_keys(std::uint64_t first, std::uint64_t second) {
  std::uint64_t z = first * 0x9E3779B97F4A7C15ull + second + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string element_error(const std::string& stage, const Origin& origin,
                          const std::string& error) {
  // Readers' own messages start with the file already.
  if (origin.source && error.starts_with(*origin.source)) return stage + ": " + error;
  return stage + ": " + origin.str() + ": " + error;
}

std::optional<Element> apply_guarded(const std::function<Element(Element)>& fn, Element element,
                                     const std::string& stage, OnError on_error,
                                     StageCounters& self) {
  const Origin origin = element.origin();
  std::string message;
  try {
    return fn(std::move(element));
  } catch (const OutOfMemory&) {
    // Not the element's fault: never skipped, and still an OutOfMemory for whoever handles
    // that (a batch-size search, fit's advice).
    throw;
  } catch (const IoError& error) {
    message = element_error(stage, origin, error.what());
    if (on_error == OnError::raise) rethrow_as<IoError>(message);
  } catch (const InvalidArgument& error) {
    message = element_error(stage, origin, error.what());
    if (on_error == OnError::raise) rethrow_as<InvalidArgument>(message);
  } catch (const std::exception& error) {
    message = element_error(stage, origin, error.what());
    if (on_error == OnError::raise) rethrow_as<Error>(message);
  }
  self.record_skip(message);
  return std::nullopt;
}

std::uint64_t stream_key(std::uint64_t pass, const std::string& source) {
  return mix_keys(pass, std::hash<std::string>{}(source));
}

// ---- ElementIterator ----

struct ElementIterator::Pass {
  // The graph stays alive while the pass runs, even if every Pipeline handle to it is gone.
  std::shared_ptr<const Node> node;
  std::unique_ptr<PassState> state;
  std::unique_ptr<Stream> root;  // declared last: destroyed (and its threads joined) first
};

ElementIterator::ElementIterator(std::unique_ptr<Pass> pass) : pass_(std::move(pass)) {}
ElementIterator::ElementIterator(ElementIterator&&) noexcept = default;
ElementIterator& ElementIterator::operator=(ElementIterator&&) noexcept = default;
ElementIterator::~ElementIterator() = default;

std::optional<Element> ElementIterator::next() {
  return pass_->root->next();
}

PipelineStats ElementIterator::stats() const {
  const double seconds = static_cast<double>(now_ns() - pass_->state->start_ns) * 1e-9;
  return pass_->state->stats.snapshot(seconds, pass_->state->cpu_budget);
}

// ---- Pipeline ----

Pipeline::Pipeline(std::shared_ptr<const Node> node, PipelineOptions options)
    : node_(std::move(node)),
      options_(options),
      counted_(std::make_shared<std::atomic<std::int64_t>>(kUnknownCardinality)) {
  TANDEM_ASSERT(node_ != nullptr, "a pipeline without a node");
}

Pipeline Pipeline::then(std::shared_ptr<const Node> node) const {
  Pipeline next(std::move(node), options_);
  next.features_key_ = features_key_;
  next.labels_key_ = labels_key_;
  return next;
}

Pipeline Pipeline::from_tensor_slices(const Element& columns) {
  return Pipeline(make_tensor_slices_node(columns));
}
Pipeline Pipeline::range(std::int64_t count) {
  return Pipeline(make_range_node(count));
}
Pipeline Pipeline::from_generator(std::function<Generator()> start, std::int64_t count) {
  return Pipeline(make_generator_node(std::move(start), count));
}
Pipeline Pipeline::idx(const std::string& images_path, const std::string& labels_path,
                       IdxOptions options) {
  return Pipeline(make_idx_node(images_path, labels_path, options));
}
Pipeline Pipeline::cifar10(std::vector<std::string> files, ReaderOptions options) {
  return Pipeline(make_cifar10_node(std::move(files), options));
}
Pipeline Pipeline::tfrecord(std::vector<std::string> files, ReaderOptions options) {
  return Pipeline(make_tfrecord_node(std::move(files), options));
}
Pipeline Pipeline::image_folder(const std::string& root, ImageFolderOptions options) {
  return Pipeline(make_image_folder_node(root, options));
}
Pipeline Pipeline::synthetic(std::vector<SyntheticComponent> components, std::int64_t count,
                             std::uint64_t seed) {
  return Pipeline(make_synthetic_node(std::move(components), count, seed));
}
Pipeline Pipeline::list_files(std::vector<std::string> patterns) {
  return Pipeline(make_list_files_node(std::move(patterns)));
}

Pipeline Pipeline::map(MapFn fn, MapOptions options) const {
  return then(make_map_node(node_, std::move(fn), std::move(options)));
}
Pipeline Pipeline::filter(Predicate keep, std::string name) const {
  return then(make_filter_node(node_, std::move(keep), std::move(name)));
}
Pipeline Pipeline::shuffle(std::int64_t buffer_size, std::uint64_t seed,
                           bool reshuffle_each_iteration) const {
  return then(make_shuffle_node(node_, buffer_size, seed, reshuffle_each_iteration));
}
Pipeline Pipeline::batch(std::int64_t size, bool drop_remainder) const {
  return then(make_batch_node(node_, size, drop_remainder));
}
Pipeline Pipeline::padded_batch(std::int64_t size, PaddedBatchOptions options) const {
  return then(make_padded_batch_node(node_, size, std::move(options)));
}
Pipeline Pipeline::prefetch(int buffer_size) const {
  return then(make_prefetch_node(node_, buffer_size));
}
Pipeline Pipeline::cache(std::string path) const {
  return then(make_cache_node(node_, std::move(path)));
}
Pipeline Pipeline::repeat(std::int64_t count) const {
  return then(make_repeat_node(node_, count));
}
Pipeline Pipeline::take(std::int64_t count) const {
  return then(make_take_node(node_, count));
}
Pipeline Pipeline::assert_cardinality(std::int64_t count) const {
  return then(make_assert_cardinality_node(node_, count));
}
Pipeline Pipeline::skip(std::int64_t count) const {
  return then(make_skip_node(node_, count));
}
Pipeline Pipeline::shard(std::int64_t num_shards, std::int64_t index) const {
  return then(make_shard_node(node_, num_shards, index));
}
Pipeline Pipeline::interleave(std::function<Pipeline(const Element&)> open,
                              InterleaveOptions options) const {
  return then(make_interleave_node(node_, std::move(open), options));
}

Pipeline Pipeline::with_options(PipelineOptions options) const {
  if (options.cpu_budget < 0) {
    throw InvalidArgument(
        "PipelineOptions: cpu_budget must be 0 (the usable cores) or positive, got " +
        std::to_string(options.cpu_budget));
  }
  if (options.ram_budget <= 0) {
    throw InvalidArgument("PipelineOptions: ram_budget must be positive, got " +
                          std::to_string(options.ram_budget) + " bytes");
  }
  Pipeline next = then(node_);
  next.options_ = options;
  return next;
}

Pipeline Pipeline::with_keys(std::string features, std::string labels) const {
  if (features.empty() || labels.empty()) {
    throw InvalidArgument(
        "Pipeline::with_keys: give the names of the feature and label "
        "components, e.g. with_keys(\"image\", \"label\")");
  }
  Pipeline next = then(node_);
  next.features_key_ = std::move(features);
  next.labels_key_ = std::move(labels);
  return next;
}

ElementIterator Pipeline::start(std::int64_t pass) const {
  auto state = std::make_unique<ElementIterator::Pass>();
  state->node = node_;
  state->state = std::make_unique<PassState>(options_, static_cast<std::uint64_t>(pass));
  const PassContext context{state->state.get(), state->state->pass};
  state->root = open_stream(*node_, context, nullptr, 0);
  return ElementIterator(std::move(state));
}

std::vector<Element> Pipeline::collect(std::int64_t pass) const {
  if (cardinality() == kInfiniteCardinality) {
    throw InvalidArgument("Pipeline::collect: " + describe() +
                          " repeats forever; take(N) elements first");
  }
  std::vector<Element> elements;
  ElementIterator iterator = start(pass);
  while (std::optional<Element> element = iterator.next())
    elements.push_back(std::move(*element));
  return elements;
}

std::int64_t Pipeline::cardinality() const {
  return node_->cardinality();
}

std::string Pipeline::describe() const {
  return node_->describe();
}

std::vector<std::string> Pipeline::class_names() const {
  return node_->class_names();
}

// ---- data::Dataset ----

namespace {

class PipelineBatches final : public BatchIterator {
 public:
  PipelineBatches(ElementIterator elements, std::string features_key, std::string labels_key)
      : elements_(std::move(elements)),
        features_key_(std::move(features_key)),
        labels_key_(std::move(labels_key)) {}

  std::optional<Batch> next() override {
    std::optional<Element> element = elements_.next();
    if (!element) return std::nullopt;
    if (!element->contains(features_key_) || !element->contains(labels_key_)) {
      throw InvalidArgument("Pipeline: model.fit takes the components '" + features_key_ +
                            "' (features) and '" + labels_key_ +
                            "' (labels), but the elements are " + element->signature() +
                            "; name the right ones with .with_keys(features, labels)");
    }
    return Batch{element->at(features_key_), element->at(labels_key_)};
  }

  PassReport report() const override {
    const PipelineStats stats = elements_.stats();
    return PassReport{stats.skipped(), stats.skipped_summary(), stats.advice(), stats.table()};
  }

 private:
  ElementIterator elements_;
  std::string features_key_;
  std::string labels_key_;
};

}  // namespace

std::unique_ptr<BatchIterator> Pipeline::iterate(std::int64_t epoch) const {
  if (batch_size() <= 0) {
    throw InvalidArgument("Pipeline: model.fit and model.evaluate take batches, but " + describe() +
                          " yields single elements; add .batch(N)");
  }
  return std::make_unique<PipelineBatches>(start(epoch), features_key_, labels_key_);
}

std::int64_t Pipeline::counted_batches() const {
  // A race between two threads only counts twice; both get the same number.
  if (counted_->load() == kUnknownCardinality) {
    std::int64_t count = 0;
    ElementIterator iterator = start(0);
    while (iterator.next())
      ++count;
    counted_->store(count);
  }
  return counted_->load();
}

std::int64_t Pipeline::num_batches() const {
  const std::int64_t count = cardinality();
  if (count == kInfiniteCardinality) {
    throw InvalidArgument("Pipeline: " + describe() +
                          " repeats forever, but model.fit needs epochs of known length; "
                          "take(N) batches per epoch, or drop the repeat()");
  }
  return count == kUnknownCardinality ? counted_batches() : count;
}

std::int64_t Pipeline::num_examples() const {
  const std::int64_t examples = node_->examples();
  if (examples >= 0) return examples;
  return num_batches() * batch_size();
}

std::int64_t Pipeline::batch_size() const {
  return node_->batch_size();
}

}  // namespace tandem::data
