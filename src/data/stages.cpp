// The synchronous stages: filter, shuffle, batch, padded_batch, take, skip, shard and repeat.
// Each runs on its consumer's thread.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>

#include "data/nodes.h"
#include "tandem/random.h"

namespace tandem::data {
namespace {

std::string count_text(std::int64_t count) {
  return count < 0 ? std::string("forever") : std::to_string(count);
}

// ---- filter ----

class FilterNode final : public Node {
 public:
  FilterNode(NodePtr input, Predicate keep, std::string name)
      : Node({std::move(input)}), keep_(std::move(keep)), label_(std::move(name)) {
    if (!keep_) throw InvalidArgument("Pipeline::filter: the predicate is empty");
  }
  std::string name() const override { return label_.empty() ? "filter" : "filter(" + label_ + ")"; }
  std::int64_t cardinality() const override {
    return input().cardinality() == kInfiniteCardinality ? kInfiniteCardinality
                                                         : kUnknownCardinality;
  }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class FilterStream final : public Stream {
     public:
      FilterStream(const FilterNode& node, std::unique_ptr<Stream> input)
          : node_(node), input_(std::move(input)) {}
      std::optional<Element> next() override {
        while (std::optional<Element> element = input_->next()) {
          bool keep = false;
          try {
            keep = node_.keep_(*element);
          } catch (const std::exception& error) {
            throw Error(element_error(node_.name(), element->origin(), error.what()));
          }
          if (keep) return element;
        }
        return std::nullopt;
      }

     private:
      const FilterNode& node_;
      std::unique_ptr<Stream> input_;
    };
    return std::make_unique<FilterStream>(*this, open_input(*this, context, self));
  }

 private:
  Predicate keep_;
  std::string label_;
};

// ---- shuffle ----

class ShuffleNode final : public Node {
 public:
  ShuffleNode(NodePtr input, std::int64_t buffer_size, std::uint64_t seed, bool reshuffle)
      : Node({std::move(input)}), buffer_size_(buffer_size), seed_(seed), reshuffle_(reshuffle) {
    if (buffer_size <= 0) {
      throw InvalidArgument("Pipeline::shuffle: buffer_size must be positive, got " +
                            std::to_string(buffer_size) +
                            "; a buffer as large as the data set gives a full shuffle");
    }
  }
  std::string name() const override { return "shuffle(" + std::to_string(buffer_size_) + ")"; }
  std::int64_t cardinality() const override { return input().cardinality(); }
  std::int64_t examples() const override { return input().examples(); }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class ShuffleStream final : public Stream {
     public:
      ShuffleStream(std::unique_ptr<Stream> input, std::size_t capacity, std::uint64_t seed,
                    std::uint64_t stream)
          : input_(std::move(input)), capacity_(capacity), seed_(seed), stream_(stream) {
        // A buffer that would hold the whole pass, over an input read by position: the shuffle
        // permutes positions, drawing as the buffer would, and never holds an element.
        const std::optional<std::int64_t> count = input_->positions();
        by_position_ = count && static_cast<std::size_t>(*count) <= capacity_;
        if (by_position_) {
          order_.resize(static_cast<std::size_t>(*count));
          std::iota(order_.begin(), order_.end(), std::int64_t{0});
        }
      }

      std::optional<Element> next() override {
        if (by_position_) {
          if (emitted_ == order_.size()) return std::nullopt;
          return input_->element_at(shuffled(emitted_++));
        }
        while (!input_done_ && buffer_.size() < capacity_) {
          std::optional<Element> element = input_->next();
          if (!element) {
            input_done_ = true;
            input_.reset();
            break;
          }
          buffer_.push_back(std::move(*element));
        }
        if (buffer_.empty()) return std::nullopt;
        const auto words = philox4x32(draws_++, stream_, seed_);
        const std::uint64_t draw = (std::uint64_t{words[0]} << 32) | words[1];
        const std::size_t pick = draw % buffer_.size();
        Element chosen = std::move(buffer_[pick]);
        // Refill the slot at once from the input (tf.data's order), else close the gap.
        std::optional<Element> replacement = input_done_ ? std::nullopt : input_->next();
        if (replacement) {
          buffer_[pick] = std::move(*replacement);
        } else {
          if (!input_done_) {
            input_done_ = true;
            input_.reset();
          }
          buffer_[pick] = std::move(buffer_.back());
          buffer_.pop_back();
        }
        return chosen;
      }

      std::optional<std::int64_t> positions() override {
        if (!by_position_ || emitted_ > 0) return std::nullopt;
        return static_cast<std::int64_t>(order_.size());
      }

      Element element_at(std::int64_t position) override {
        return input_->element_at(shuffled(static_cast<std::size_t>(position)));
      }

      Element gather(std::span<const std::int64_t> positions) override {
        std::vector<std::int64_t> input_positions;
        input_positions.reserve(positions.size());
        for (const std::int64_t position : positions)
          input_positions.push_back(shuffled(static_cast<std::size_t>(position)));
        return input_->gather(input_positions);
      }

     private:
      // The input position the buffer would hand out `position`-th. The buffer's draw picks one
      // of the positions not handed out yet, and the last one fills its gap; order_ keeps those
      // left at its front and the ones handed out behind them, the first one last.
      std::int64_t shuffled(std::size_t position) {
        const std::size_t count = order_.size();
        for (; drawn_ <= position; ++drawn_) {
          const auto words = philox4x32(draws_++, stream_, seed_);
          const std::uint64_t draw = (std::uint64_t{words[0]} << 32) | words[1];
          const std::size_t left = count - drawn_;
          std::swap(order_[draw % left], order_[left - 1]);
        }
        return order_[count - 1 - position];
      }

      std::unique_ptr<Stream> input_;
      std::size_t capacity_;
      std::uint64_t seed_;
      std::uint64_t stream_;
      std::uint64_t draws_ = 0;
      bool input_done_ = false;
      std::vector<Element> buffer_;
      bool by_position_ = false;
      std::vector<std::int64_t> order_;  // by position: the input's positions, see shuffled()
      std::size_t drawn_ = 0;
      std::size_t emitted_ = 0;
    };
    const std::uint64_t stream = reshuffle_ ? context.pass : 0;
    return std::make_unique<ShuffleStream>(open_input(*this, context, self),
                                           static_cast<std::size_t>(buffer_size_), seed_, stream);
  }

 private:
  std::int64_t buffer_size_;
  std::uint64_t seed_;
  bool reshuffle_;
};

// ---- batch and padded_batch ----

// What a batch's components look like, from its first element.
struct Layout {
  std::string name;
  DType dtype;
  Shape shape;  // without the batch axis, after padding
};

std::string mismatch(const std::string& stage, const Element& element, std::size_t position,
                     const std::string& what) {
  return stage + ": element " + std::to_string(position) + " of the batch (" +
         element.origin().str() + ") " + what;
}

// Copies `source` into the leading corner of `destination` (same rank, every extent at least as
// large), row by row of the last axis.
void copy_into_corner(const std::uint8_t* source, const Shape& source_shape,
                      std::uint8_t* destination, const Shape& destination_shape,
                      std::size_t element_size) {
  const std::size_t rank = source_shape.size();
  if (rank == 0) {
    std::memcpy(destination, source, element_size);
    return;
  }
  const std::int64_t rows =
      shape_numel(source_shape) / std::max<std::int64_t>(1, source_shape.back());
  if (shape_numel(source_shape) == 0) return;
  const std::size_t row_bytes = static_cast<std::size_t>(source_shape.back()) * element_size;
  std::vector<std::int64_t> index(rank, 0);  // over every axis but the last
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t offset = 0;
    for (std::size_t axis = 0; axis + 1 < rank; ++axis)
      offset = offset * destination_shape[axis] + index[axis];
    offset *= destination_shape.back();
    std::memcpy(destination + static_cast<std::size_t>(offset) * element_size,
                source + static_cast<std::size_t>(r) * row_bytes, row_bytes);
    for (std::size_t axis = rank - 1; axis-- > 0;) {
      if (++index[axis] < source_shape[axis]) break;
      index[axis] = 0;
    }
  }
}

void fill_with(Tensor& tensor, double value) {
  if (value == 0.0) {
    std::memset(tensor.raw_data(), 0, tensor.nbytes());
    return;
  }
  visit_dtype(tensor.dtype(), [&](auto tag) {
    using T = decltype(tag);
    std::fill_n(static_cast<T*>(tensor.raw_data()), tensor.numel(), convert_element<T>(value));
  });
}

class BatchNode final : public Node {
 public:
  BatchNode(NodePtr input, std::int64_t size, bool drop_remainder, bool padded,
            PaddedBatchOptions options)
      : Node({std::move(input)}),
        size_(size),
        drop_remainder_(drop_remainder),
        padded_(padded),
        options_(std::move(options)) {
    if (size <= 0) {
      throw InvalidArgument(std::string("Pipeline::") + (padded ? "padded_batch" : "batch") +
                            ": size must be positive, got " + std::to_string(size));
    }
  }
  std::string name() const override {
    return (padded_ ? "padded_batch(" : "batch(") + std::to_string(size_) + ")";
  }
  std::int64_t cardinality() const override {
    const std::int64_t count = input().cardinality();
    if (count < 0) return count;
    return drop_remainder_ ? count / size_ : (count + size_ - 1) / size_;
  }
  std::int64_t batch_size() const override { return size_; }
  std::int64_t examples() const override {
    const std::int64_t count = input().cardinality();
    if (count < 0 || !drop_remainder_) return count;
    return count / size_ * size_;
  }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class BatchStream final : public Stream {
     public:
      // An input read by position (elements in memory, all of one shape) is copied row by row
      // into the batch's tensors, without an element made for each.
      BatchStream(const BatchNode& node, std::unique_ptr<Stream> input)
          : node_(node),
            input_(std::move(input)),
            count_(node.padded_ ? std::nullopt : input_->positions()) {}
      std::optional<Element> next() override {
        if (count_) return next_gathered();
        std::vector<Element> elements;
        // Room for the batch up front, but not for a batch size far beyond any data set: the
        // vector grows as elements actually arrive.
        constexpr std::int64_t kReservedAtMost = 65536;
        elements.reserve(static_cast<std::size_t>(std::min(node_.size_, kReservedAtMost)));
        while (input_ && static_cast<std::int64_t>(elements.size()) < node_.size_) {
          std::optional<Element> element = input_->next();
          if (!element) {
            input_.reset();
            break;
          }
          elements.push_back(std::move(*element));
        }
        if (elements.empty()) return std::nullopt;
        if (node_.drop_remainder_ && static_cast<std::int64_t>(elements.size()) < node_.size_) {
          return std::nullopt;
        }
        return node_.assemble(elements);
      }

     private:
      std::optional<Element> next_gathered() {
        const std::int64_t size = std::min(node_.size_, *count_ - gathered_);
        if (size <= 0 || (node_.drop_remainder_ && size < node_.size_)) {
          input_.reset();
          return std::nullopt;
        }
        positions_.resize(static_cast<std::size_t>(size));
        std::iota(positions_.begin(), positions_.end(), gathered_);
        gathered_ += size;
        Element batch = input_->gather(positions_);
        batch.set_random_key(batch_key(batch.random_key()));
        return batch;
      }

      const BatchNode& node_;
      std::unique_ptr<Stream> input_;
      std::optional<std::int64_t> count_;  // by position: the input's elements
      std::int64_t gathered_ = 0;
      std::vector<std::int64_t> positions_;
    };
    return std::make_unique<BatchStream>(*this, open_input(*this, context, self));
  }

 private:
  // The layout of every component, checking that all elements agree.
  std::vector<Layout> layouts(const std::vector<Element>& elements) const {
    const Element& first = elements.front();
    std::vector<Layout> result;
    for (const auto& [name, tensor] : first) {
      if (!tensor.defined()) {
        throw InvalidArgument(mismatch(this->name(), first, 0, "has an undefined '" + name + "'"));
      }
      result.push_back({name, tensor.dtype(), tensor.shape()});
    }
    for (std::size_t position = 1; position < elements.size(); ++position) {
      const Element& element = elements[position];
      if (element.size() != first.size()) {
        throw InvalidArgument(mismatch(
            name(), element, position,
            "has components " + element.signature() + " but the first has " + first.signature()));
      }
      for (Layout& layout : result) {
        if (!element.contains(layout.name)) {
          throw InvalidArgument(
              mismatch(name(), element, position,
                       "has no '" + layout.name + "' but the first has " + first.signature()));
        }
        const Tensor& tensor = element.at(layout.name);
        if (tensor.dtype() != layout.dtype) {
          throw InvalidArgument(mismatch(name(), element, position,
                                         "has '" + layout.name + "' of type " +
                                             dtype_name(tensor.dtype()) + " but the first has " +
                                             dtype_name(layout.dtype) + "; cast() them alike"));
        }
        if (tensor.shape() == layout.shape) continue;
        if (!padded_) {
          throw InvalidArgument(mismatch(
              name(), element, position,
              "has '" + layout.name + "' of shape " + shape_str(tensor.shape()) +
                  " but the first has " + shape_str(layout.shape) +
                  "; resize them alike, or use padded_batch for sequences of different lengths"));
        }
        if (tensor.rank() != static_cast<int>(layout.shape.size())) {
          throw InvalidArgument(
              mismatch(name(), element, position,
                       "has '" + layout.name + "' of rank " + std::to_string(tensor.rank()) + " " +
                           shape_str(tensor.shape()) + " but the first has " +
                           shape_str(layout.shape) + "; padded_batch pads extents, not ranks"));
        }
        for (std::size_t axis = 0; axis < layout.shape.size(); ++axis)
          layout.shape[axis] = std::max(layout.shape[axis], tensor.shape()[axis]);
      }
    }
    if (padded_) apply_padded_shapes(result, elements);
    return result;
  }

  void apply_padded_shapes(std::vector<Layout>& result,
                           const std::vector<Element>& elements) const {
    for (Layout& layout : result) {
      const auto wanted = options_.padded_shapes.find(layout.name);
      if (wanted == options_.padded_shapes.end()) continue;
      const Shape& target = wanted->second;
      if (target.size() != layout.shape.size()) {
        throw InvalidArgument(name() + ": padded shape " + shape_str(target) + " for '" +
                              layout.name + "' has rank " + std::to_string(target.size()) +
                              " but the elements' '" + layout.name + "' has rank " +
                              std::to_string(layout.shape.size()));
      }
      for (std::size_t axis = 0; axis < target.size(); ++axis) {
        if (target[axis] < 0) continue;
        if (target[axis] < layout.shape[axis]) {
          throw InvalidArgument(
              name() + ": '" + layout.name + "' of extent " + std::to_string(layout.shape[axis]) +
              " on axis " + std::to_string(axis) + " (in the batch starting at " +
              elements.front().origin().str() + ") does not fit the padded shape " +
              shape_str(target) + "; give a larger padded shape or -1 to pad to the longest");
        }
        layout.shape[axis] = target[axis];
      }
    }
  }

  Element assemble(const std::vector<Element>& elements) const {
    const std::vector<Layout> components = layouts(elements);
    const auto count = static_cast<std::int64_t>(elements.size());
    Element batch;
    for (const Layout& layout : components) {
      Shape shape{count};
      shape.insert(shape.end(), layout.shape.begin(), layout.shape.end());
      Tensor stacked = Tensor::empty(shape, layout.dtype);  // (B, ...)
      const std::size_t element_size = dtype_size(layout.dtype);
      const std::size_t slot_bytes =
          static_cast<std::size_t>(shape_numel(layout.shape)) * element_size;
      auto* out = static_cast<std::uint8_t*>(stacked.raw_data());
      if (padded_) {
        const auto value = options_.padding_values.find(layout.name);
        fill_with(stacked, value == options_.padding_values.end() ? 0.0 : value->second);
      }
      for (std::size_t i = 0; i < elements.size(); ++i) {
        const Tensor& part = elements[i].at(layout.name);
        const auto* in = static_cast<const std::uint8_t*>(part.raw_data());
        if (part.shape() == layout.shape) {
          std::memcpy(out + i * slot_bytes, in, slot_bytes);
        } else {
          copy_into_corner(in, part.shape(), out + i * slot_bytes, layout.shape, element_size);
        }
      }
      batch.set(layout.name, std::move(stacked));
    }
    batch.set_origin(elements.front().origin());
    batch.set_random_key(batch_key(elements.front().random_key()));
    return batch;
  }

  // A batch's random key, from its first element's.
  static std::uint64_t batch_key(std::uint64_t first_key) {
    return mix_keys(first_key, 0xBA7C4ull);
  }

  std::int64_t size_;
  bool drop_remainder_;
  bool padded_;
  PaddedBatchOptions options_;
};

// ---- take, skip, shard ----

class TakeNode final : public Node {
 public:
  TakeNode(NodePtr input, std::int64_t count) : Node({std::move(input)}), count_(count) {
    if (count < -1) {
      throw InvalidArgument("Pipeline::take: count must be >= 0 (or -1 for all), got " +
                            std::to_string(count));
    }
  }
  std::string name() const override { return "take(" + count_text(count_) + ")"; }
  std::int64_t cardinality() const override {
    const std::int64_t input_count = input().cardinality();
    if (count_ < 0) return input_count;
    if (input_count == kInfiniteCardinality) return count_;
    if (input_count == kUnknownCardinality) return kUnknownCardinality;
    return std::min(count_, input_count);
  }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class TakeStream final : public Stream {
     public:
      TakeStream(std::unique_ptr<Stream> input, std::int64_t count)
          : input_(std::move(input)), left_(count) {}
      std::optional<Element> next() override {
        if (!input_) return std::nullopt;
        if (left_ == 0) {
          // Done early: stop the input's threads now rather than when the pass ends.
          input_.reset();
          return std::nullopt;
        }
        std::optional<Element> element = input_->next();
        if (!element) {
          input_.reset();
          return std::nullopt;
        }
        if (left_ > 0) --left_;
        return element;
      }

      // The first `count` of the input's positions.
      std::optional<std::int64_t> positions() override {
        const std::optional<std::int64_t> count = input_ ? input_->positions() : std::nullopt;
        if (!count || left_ < 0) return count;
        return std::min(*count, left_);
      }
      Element element_at(std::int64_t position) override { return input_->element_at(position); }
      Element gather(std::span<const std::int64_t> positions) override {
        return input_->gather(positions);
      }

     private:
      std::unique_ptr<Stream> input_;
      std::int64_t left_;
    };
    return std::make_unique<TakeStream>(open_input(*this, context, self), count_);
  }

 private:
  std::int64_t count_;
};

// Declares the input's element count (a TFRecord source's, say, counted once by the caller), so
// that later stages and model.fit know it without a pass; a pass that yields another count is
// an error, as tf.data's assert_cardinality.
class AssertCardinalityNode final : public Node {
 public:
  AssertCardinalityNode(NodePtr input, std::int64_t count)
      : Node({std::move(input)}), count_(count) {
    if (count < 0) {
      throw InvalidArgument("Pipeline::assert_cardinality: count must be >= 0, got " +
                            std::to_string(count));
    }
    const std::int64_t known = this->input().cardinality();
    if (known >= 0 && known != count) {
      throw InvalidArgument("Pipeline::assert_cardinality: the input has " + std::to_string(known) +
                            " elements, not " + std::to_string(count));
    }
  }
  std::string name() const override { return "assert_cardinality(" + std::to_string(count_) + ")"; }
  std::int64_t cardinality() const override { return count_; }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class CountingStream final : public Stream {
     public:
      CountingStream(std::unique_ptr<Stream> input, std::int64_t count, std::string where)
          : input_(std::move(input)), expected_(count), where_(std::move(where)) {}
      std::optional<Element> next() override {
        std::optional<Element> element = input_->next();
        if (element ? ++seen_ > expected_ : seen_ < expected_) {
          throw InvalidArgument(where_ + ": the data was counted as " + std::to_string(expected_) +
                                " elements, but a pass " +
                                (element ? "yields more" : "ended after " + std::to_string(seen_)) +
                                "; the files changed while in use: start again");
        }
        return element;
      }

     private:
      std::unique_ptr<Stream> input_;
      std::int64_t expected_;
      std::int64_t seen_ = 0;
      std::string where_;
    };
    return std::make_unique<CountingStream>(open_input(*this, context, self), count_,
                                            input().name());
  }

 private:
  std::int64_t count_;
};

class SkipNode final : public Node {
 public:
  SkipNode(NodePtr input, std::int64_t count) : Node({std::move(input)}), count_(count) {
    if (count < 0) {
      throw InvalidArgument("Pipeline::skip: count must be >= 0, got " + std::to_string(count));
    }
  }
  std::string name() const override { return "skip(" + std::to_string(count_) + ")"; }
  std::int64_t cardinality() const override {
    const std::int64_t input_count = input().cardinality();
    return input_count < 0 ? input_count : std::max<std::int64_t>(0, input_count - count_);
  }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class SkipStream final : public Stream {
     public:
      SkipStream(std::unique_ptr<Stream> input, std::int64_t count)
          : input_(std::move(input)), to_skip_(count) {}
      std::optional<Element> next() override {
        for (; to_skip_ > 0; --to_skip_) {
          if (!input_->next()) {
            to_skip_ = 0;
            return std::nullopt;
          }
        }
        return input_->next();
      }

      // The input's positions after the first `count`.
      std::optional<std::int64_t> positions() override {
        const std::optional<std::int64_t> count = input_->positions();
        if (!count) return count;
        return std::max<std::int64_t>(0, *count - to_skip_);
      }
      Element element_at(std::int64_t position) override {
        return input_->element_at(position + to_skip_);
      }
      Element gather(std::span<const std::int64_t> positions) override {
        std::vector<std::int64_t> input_positions(positions.begin(), positions.end());
        for (std::int64_t& position : input_positions)
          position += to_skip_;
        return input_->gather(input_positions);
      }

     private:
      std::unique_ptr<Stream> input_;
      std::int64_t to_skip_;
    };
    return std::make_unique<SkipStream>(open_input(*this, context, self), count_);
  }

 private:
  std::int64_t count_;
};

class ShardNode final : public Node {
 public:
  ShardNode(NodePtr input, std::int64_t num_shards, std::int64_t index)
      : Node({std::move(input)}), num_shards_(num_shards), index_(index) {
    if (num_shards <= 0 || index < 0 || index >= num_shards) {
      throw InvalidArgument(
          "Pipeline::shard: need num_shards > 0 and 0 <= index < num_shards, got "
          "num_shards " +
          std::to_string(num_shards) + ", index " + std::to_string(index));
    }
  }
  std::string name() const override {
    return "shard(" + std::to_string(num_shards_) + ", " + std::to_string(index_) + ")";
  }
  std::int64_t cardinality() const override {
    const std::int64_t count = input().cardinality();
    if (count < 0) return count;
    return count > index_ ? (count - index_ + num_shards_ - 1) / num_shards_ : 0;
  }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class ShardStream final : public Stream {
     public:
      ShardStream(std::unique_ptr<Stream> input, std::int64_t num_shards, std::int64_t index)
          : input_(std::move(input)), num_shards_(num_shards), index_(index) {}
      std::optional<Element> next() override {
        while (std::optional<Element> element = input_->next()) {
          if (position_++ % num_shards_ == index_) return element;
        }
        return std::nullopt;
      }

     private:
      std::unique_ptr<Stream> input_;
      std::int64_t num_shards_;
      std::int64_t index_;
      std::int64_t position_ = 0;
    };
    return std::make_unique<ShardStream>(open_input(*this, context, self), num_shards_, index_);
  }

 private:
  std::int64_t num_shards_;
  std::int64_t index_;
};

// ---- repeat ----

class RepeatNode final : public Node {
 public:
  RepeatNode(NodePtr input, std::int64_t count) : Node({std::move(input)}), count_(count) {
    if (count < -1) {
      throw InvalidArgument("Pipeline::repeat: count must be >= 0, or -1 to repeat forever, got " +
                            std::to_string(count));
    }
  }
  std::string name() const override { return "repeat(" + count_text(count_) + ")"; }
  std::int64_t cardinality() const override {
    const std::int64_t input_count = input().cardinality();
    if (count_ == 0 || input_count == 0) return 0;
    if (count_ < 0) return kInfiniteCardinality;
    return input_count < 0 ? input_count : input_count * count_;
  }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class RepeatStream final : public Stream {
     public:
      RepeatStream(const RepeatNode& node, const PassContext& context, StageCounters& self)
          : node_(node), context_(context), self_(self) {}
      std::optional<Element> next() override {
        while (node_.count_ < 0 || repetition_ < node_.count_) {
          if (!input_) {
            PassContext repetition = context_;
            // Every repetition is a pass of its own: reshuffled, fresh random transforms.
            repetition.pass =
                repetition_ == 0 ? context_.pass
                                 : mix_keys(context_.pass, static_cast<std::uint64_t>(repetition_));
            input_ = open_input(node_, repetition, self_);
            yielded_ = false;
          }
          if (std::optional<Element> element = input_->next()) {
            yielded_ = true;
            return element;
          }
          input_.reset();
          ++repetition_;
          // An empty input would make repeat-forever spin without end.
          if (!yielded_) break;
        }
        return std::nullopt;
      }

     private:
      const RepeatNode& node_;
      PassContext context_;
      StageCounters& self_;
      std::unique_ptr<Stream> input_;
      std::int64_t repetition_ = 0;
      bool yielded_ = false;
    };
    return std::make_unique<RepeatStream>(*this, context, self);
  }

 private:
  std::int64_t count_;
};

}  // namespace

NodePtr make_filter_node(NodePtr input, Predicate keep, std::string name) {
  return std::make_shared<FilterNode>(std::move(input), std::move(keep), std::move(name));
}
NodePtr make_shuffle_node(NodePtr input, std::int64_t buffer_size, std::uint64_t seed,
                          bool reshuffle_each_iteration) {
  return std::make_shared<ShuffleNode>(std::move(input), buffer_size, seed,
                                       reshuffle_each_iteration);
}
NodePtr make_batch_node(NodePtr input, std::int64_t size, bool drop_remainder) {
  return std::make_shared<BatchNode>(std::move(input), size, drop_remainder, false,
                                     PaddedBatchOptions{});
}
NodePtr make_padded_batch_node(NodePtr input, std::int64_t size, PaddedBatchOptions options) {
  const bool drop_remainder = options.drop_remainder;
  return std::make_shared<BatchNode>(std::move(input), size, drop_remainder, true,
                                     std::move(options));
}
NodePtr make_assert_cardinality_node(NodePtr input, std::int64_t count) {
  return std::make_shared<AssertCardinalityNode>(std::move(input), count);
}

NodePtr make_take_node(NodePtr input, std::int64_t count) {
  return std::make_shared<TakeNode>(std::move(input), count);
}
NodePtr make_skip_node(NodePtr input, std::int64_t count) {
  return std::make_shared<SkipNode>(std::move(input), count);
}
NodePtr make_shard_node(NodePtr input, std::int64_t num_shards, std::int64_t index) {
  return std::make_shared<ShardNode>(std::move(input), num_shards, index);
}
NodePtr make_repeat_node(NodePtr input, std::int64_t count) {
  return std::make_shared<RepeatNode>(std::move(input), count);
}

}  // namespace tandem::data
