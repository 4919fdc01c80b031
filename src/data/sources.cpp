// In-memory and synthetic sources: tensor slices, range, a generator, synthetic data, file lists.
#include <glob.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "data/nodes.h"
#include "data/rows.h"
#include "tandem/random.h"

namespace tandem::data {
namespace {

std::shared_ptr<const std::string> shared_text(std::string text) {
  return std::make_shared<const std::string>(std::move(text));
}

// Stamps an element made by a source with where it came from and its random key (`key` is the
// source's stream_key for the pass).
void stamp(Element& element, const std::shared_ptr<const std::string>& source, std::int64_t index,
           std::uint64_t key) {
  element.set_origin(Origin{source, index, -1});
  element.set_random_key(mix_keys(key, static_cast<std::uint64_t>(index)));
}

// ---- from_tensor_slices ----

class TensorSlicesNode final : public Node {
 public:
  explicit TensorSlicesNode(const Element& columns)
      : columns_(columns), source_(shared_text("tensor_slices")) {
    if (columns_.size() == 0) {
      throw InvalidArgument(
          "Pipeline::from_tensor_slices: give at least one named tensor, e.g. "
          "{{\"image\", images}, {\"label\", labels}}");
    }
    for (const auto& [name, tensor] : columns_) {
      if (!tensor.defined() || tensor.rank() == 0) {
        throw InvalidArgument("Pipeline::from_tensor_slices: '" + name +
                              "' needs a leading element axis; reshape scalars to (1,)");
      }
      if (tensor.device().type != DeviceType::cpu) {
        throw InvalidArgument("Pipeline::from_tensor_slices: '" + name + "' is on " +
                              tensor.device().str() +
                              "; the pipeline works in host memory: pass tensor.to(Device::cpu())");
      }
      if (tensor.dim(0) != columns_.begin()->second.dim(0)) {
        throw InvalidArgument("Pipeline::from_tensor_slices: " + columns_.signature() +
                              " hold different numbers of elements (dimension 0); pass tensors "
                              "of the same length");
      }
    }
    count_ = columns_.begin()->second.dim(0);
  }

  std::string name() const override { return "tensor_slices"; }
  std::int64_t cardinality() const override { return count_; }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters&) const override {
    class SliceStream final : public Stream {
     public:
      SliceStream(const TensorSlicesNode& node, std::uint64_t pass)
          : node_(node), key_(stream_key(pass, *node.source_)) {}
      std::optional<Element> next() override {
        if (index_ >= node_.count_) return std::nullopt;
        return element_at(index_++);
      }

      std::optional<std::int64_t> positions() override {
        if (index_ > 0) return std::nullopt;
        return node_.count_;
      }

      Element element_at(std::int64_t index) override {
        Element element;
        for (const auto& [name, tensor] : node_.columns_)
          element.set(name, row(tensor, index));
        stamp(element, node_.source_, index, key_);
        return element;
      }

      Element gather(std::span<const std::int64_t> indices) override {
        Element stacked;
        for (const auto& [name, tensor] : node_.columns_)
          stacked.set(name, gather_rows(tensor, indices));
        stamp(stacked, node_.source_, indices.front(), key_);
        return stacked;
      }

     private:
      const TensorSlicesNode& node_;
      std::uint64_t key_;
      std::int64_t index_ = 0;
    };
    return std::make_unique<SliceStream>(*this, context.pass);
  }

 private:
  Element columns_;
  std::shared_ptr<const std::string> source_;
  std::int64_t count_ = 0;
};

// ---- range ----

class RangeNode final : public Node {
 public:
  explicit RangeNode(std::int64_t count) : count_(count) {
    if (count < 0) {
      throw InvalidArgument("Pipeline::range: count must be >= 0, got " + std::to_string(count));
    }
  }
  std::string name() const override { return "range(" + std::to_string(count_) + ")"; }
  std::int64_t cardinality() const override { return count_; }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters&) const override {
    class RangeStream final : public Stream {
     public:
      RangeStream(std::int64_t count, std::uint64_t pass, std::shared_ptr<const std::string> source)
          : count_(count), key_(stream_key(pass, *source)), source_(std::move(source)) {}
      std::optional<Element> next() override {
        if (index_ >= count_) return std::nullopt;
        Element element{{"value", Tensor::scalar(static_cast<double>(index_), DType::i64)}};
        stamp(element, source_, index_++, key_);
        return element;
      }

     private:
      std::int64_t count_;
      std::uint64_t key_;
      std::shared_ptr<const std::string> source_;
      std::int64_t index_ = 0;
    };
    return std::make_unique<RangeStream>(count_, context.pass, source_);
  }

 private:
  std::int64_t count_;
  std::shared_ptr<const std::string> source_ = shared_text("range");
};

// ---- from_generator ----

class GeneratorNode final : public Node {
 public:
  GeneratorNode(std::function<Pipeline::Generator()> start, std::int64_t count)
      : start_(std::move(start)), count_(count) {
    if (!start_) throw InvalidArgument("Pipeline::from_generator: the start function is empty");
    if (count < kUnknownCardinality) {
      throw InvalidArgument(
          "Pipeline::from_generator: count must be >= 0 or kUnknownCardinality, "
          "got " +
          std::to_string(count));
    }
  }
  std::string name() const override { return "generator"; }
  std::int64_t cardinality() const override { return count_; }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters&) const override {
    class GeneratorStream final : public Stream {
     public:
      GeneratorStream(Pipeline::Generator generate, std::uint64_t pass,
                      std::shared_ptr<const std::string> source)
          : generate_(std::move(generate)),
            key_(stream_key(pass, *source)),
            source_(std::move(source)) {}
      std::optional<Element> next() override {
        std::optional<Element> element;
        try {
          element = generate_();
        } catch (const std::exception& error) {
          throw Error("generator: element " + std::to_string(index_) + ": " + error.what());
        }
        if (!element) return std::nullopt;
        if (!element->origin().source) element->set_origin(Origin{source_, index_, -1});
        element->set_random_key(mix_keys(key_, static_cast<std::uint64_t>(index_++)));
        return element;
      }

     private:
      Pipeline::Generator generate_;
      std::uint64_t key_;
      std::shared_ptr<const std::string> source_;
      std::int64_t index_ = 0;
    };
    Pipeline::Generator generate = start_();
    if (!generate) throw InvalidArgument("Pipeline::from_generator: start() returned no function");
    return std::make_unique<GeneratorStream>(std::move(generate), context.pass, source_);
  }

 private:
  std::function<Pipeline::Generator()> start_;
  std::int64_t count_;
  std::shared_ptr<const std::string> source_ = shared_text("generator");
};

// ---- synthetic ----

class SyntheticNode final : public Node {
 public:
  // A few distinct random elements, reused: generating fresh values would measure the random
  // number generator rather than the pipeline.
  static constexpr std::int64_t kDistinct = 16;

  SyntheticNode(std::vector<SyntheticComponent> components, std::int64_t count, std::uint64_t seed)
      : count_(count) {
    if (count < 0) {
      throw InvalidArgument("Pipeline::synthetic: count must be >= 0, got " +
                            std::to_string(count));
    }
    if (components.empty()) {
      throw InvalidArgument(
          "Pipeline::synthetic: give at least one component, e.g. "
          "{{\"image\", {224, 224, 3}, DType::u8, 0, 256}}");
    }
    Generator generator(seed);
    for (std::int64_t i = 0; i < std::min(count, kDistinct); ++i) {
      Element element;
      for (const SyntheticComponent& component : components) {
        if (!(component.low < component.high)) {
          throw InvalidArgument("Pipeline::synthetic: component '" + component.name +
                                "' needs low < high, got [" + std::to_string(component.low) + ", " +
                                std::to_string(component.high) + ")");
        }
        element.set(component.name, uniform(component, generator));
      }
      prototypes_.push_back(std::move(element));
    }
  }
  std::string name() const override { return "synthetic"; }

  // Uniform values in [low, high); integer types take the floor (the generator draws floats).
  static Tensor uniform(const SyntheticComponent& component, Generator& generator) {
    const Tensor draws =
        random_uniform(component.shape, component.low, component.high, DType::f64, generator);
    Tensor values = Tensor::empty(component.shape, component.dtype);
    const double* in = draws.data<double>();
    visit_dtype(component.dtype, [&](auto tag) {
      using T = decltype(tag);
      T* out = static_cast<T*>(values.raw_data());
      for (std::int64_t i = 0; i < values.numel(); ++i)
        out[i] = convert_element<T>(is_floating(component.dtype) ? in[i] : std::floor(in[i]));
    });
    return values;
  }
  std::int64_t cardinality() const override { return count_; }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters&) const override {
    class SyntheticStream final : public Stream {
     public:
      SyntheticStream(const SyntheticNode& node, std::uint64_t pass)
          : node_(node), key_(stream_key(pass, *node.source_)) {}
      std::optional<Element> next() override {
        if (index_ >= node_.count_) return std::nullopt;
        Element element = node_.prototypes_[static_cast<std::size_t>(index_ % kDistinct)];
        stamp(element, node_.source_, index_++, key_);
        return element;
      }

     private:
      const SyntheticNode& node_;
      std::uint64_t key_;
      std::int64_t index_ = 0;
    };
    return std::make_unique<SyntheticStream>(*this, context.pass);
  }

 private:
  std::int64_t count_;
  std::vector<Element> prototypes_;
  std::shared_ptr<const std::string> source_ = shared_text("synthetic");
};

// ---- list_files ----

class ListFilesNode final : public Node {
 public:
  explicit ListFilesNode(std::vector<std::string> patterns) {
    if (patterns.empty()) {
      throw InvalidArgument("Pipeline::list_files: give at least one path or glob pattern");
    }
    std::set<std::string> files;
    for (const std::string& pattern : patterns) {
      glob_t matches{};
      const int status = ::glob(pattern.c_str(), 0, nullptr, &matches);
      for (std::size_t i = 0; status == 0 && i < matches.gl_pathc; ++i)
        files.insert(matches.gl_pathv[i]);
      ::globfree(&matches);
      if (status != 0) {
        throw IoError("Pipeline::list_files: '" + pattern +
                      "' matches no file; check the directory and the pattern");
      }
    }
    files_.assign(files.begin(), files.end());
  }
  std::string name() const override {
    return "list_files(" + std::to_string(files_.size()) + " files)";
  }
  std::int64_t cardinality() const override { return static_cast<std::int64_t>(files_.size()); }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters&) const override {
    class FilesStream final : public Stream {
     public:
      FilesStream(const ListFilesNode& node, std::uint64_t pass)
          : node_(node), key_(stream_key(pass, *node.source_)) {}
      std::optional<Element> next() override {
        if (index_ >= static_cast<std::int64_t>(node_.files_.size())) return std::nullopt;
        Element element{{"path", Element::bytes(node_.files_[static_cast<std::size_t>(index_)])}};
        stamp(element, node_.source_, index_++, key_);
        return element;
      }

     private:
      const ListFilesNode& node_;
      std::uint64_t key_;
      std::int64_t index_ = 0;
    };
    return std::make_unique<FilesStream>(*this, context.pass);
  }

 private:
  std::vector<std::string> files_;
  std::shared_ptr<const std::string> source_ = shared_text("list_files");
};

}  // namespace

NodePtr make_tensor_slices_node(const Element& columns) {
  return std::make_shared<TensorSlicesNode>(columns);
}
NodePtr make_range_node(std::int64_t count) {
  return std::make_shared<RangeNode>(count);
}
NodePtr make_generator_node(std::function<Pipeline::Generator()> start, std::int64_t count) {
  return std::make_shared<GeneratorNode>(std::move(start), count);
}
NodePtr make_synthetic_node(std::vector<SyntheticComponent> components, std::int64_t count,
                            std::uint64_t seed) {
  return std::make_shared<SyntheticNode>(std::move(components), count, seed);
}
NodePtr make_list_files_node(std::vector<std::string> patterns) {
  return std::make_shared<ListFilesNode>(std::move(patterns));
}

}  // namespace tandem::data
