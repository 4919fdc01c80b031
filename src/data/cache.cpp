// cache: the first complete pass is kept, in memory or in a file, and later passes (and, for a
// file, later runs) replay it instead of running the stages before it. A file cache is written
// to a temporary name and renamed into place only when its pass completes, so a pass cut short
// leaves nothing behind and a file in place is always whole. It is a TFRecord file (so CRC
// checked): a header record naming the pipeline that wrote it, one record per element, and a
// footer record with the count.
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/files.h"
#include "data/nodes.h"
#include "tandem/tfrecord.h"

namespace tandem::data {
namespace {

constexpr std::string_view kHeaderMagic = "tandem-cache 1\n";
constexpr std::string_view kFooterMagic = "tandem-cache-end\n";

// ---- Element records ----

class RecordWriter {
 public:
  void u8(std::uint8_t value) { bytes_.push_back(value); }
  void u64(std::uint64_t value) {
    for (int i = 0; i < 8; ++i)
      bytes_.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  }
  void text(std::string_view value) {
    u64(value.size());
    raw(value.data(), value.size());
  }
  void raw(const void* data, std::size_t size) {
    const auto* begin = static_cast<const std::uint8_t*>(data);
    bytes_.insert(bytes_.end(), begin, begin + size);
  }
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

class RecordReader {
 public:
  RecordReader(const Tensor& record, const std::string& where)
      : data_(static_cast<const std::uint8_t*>(record.raw_data())),
        size_(static_cast<std::size_t>(record.numel())),
        where_(where) {}

  std::uint8_t u8() {
    need(1);
    return data_[position_++];
  }
  std::uint64_t u64() {
    need(8);
    std::uint64_t value = 0;
    for (int i = 7; i >= 0; --i)
      value = (value << 8) | data_[position_ + static_cast<std::size_t>(i)];
    position_ += 8;
    return value;
  }
  std::string text() {
    const std::uint64_t length = u64();
    need(length);
    std::string value(reinterpret_cast<const char*>(data_ + position_),
                      static_cast<std::size_t>(length));
    position_ += static_cast<std::size_t>(length);
    return value;
  }
  void raw(void* out, std::uint64_t size) {
    need(size);
    if (size > 0) std::memcpy(out, data_ + position_, static_cast<std::size_t>(size));
    position_ += static_cast<std::size_t>(size);
  }
  bool done() const { return position_ == size_; }

  void need(std::uint64_t count) const {
    if (count > size_ - position_) {
      throw IoError(where_ +
                    ": the cache record is malformed (it ends early); delete the cache "
                    "file and run again to rebuild it");
    }
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t position_ = 0;
  std::string where_;
};

std::vector<std::uint8_t> encode_element(const Element& element) {
  RecordWriter out;
  out.u64(element.size());
  for (const auto& [name, value] : element) {
    out.text(name);
    out.u8(static_cast<std::uint8_t>(value.dtype()));
    out.u64(static_cast<std::uint64_t>(value.rank()));
    for (const std::int64_t extent : value.shape())
      out.u64(static_cast<std::uint64_t>(extent));
    out.raw(value.raw_data(), value.nbytes());
  }
  const Origin& origin = element.origin();
  out.text(origin.source ? *origin.source : std::string());
  out.u64(static_cast<std::uint64_t>(origin.index));
  out.u64(static_cast<std::uint64_t>(origin.offset));
  out.u64(element.random_key());
  return out.bytes();
}

Element decode_element(const Tensor& record, const std::string& where) {
  RecordReader in(record, where);
  Element element;
  const std::uint64_t count = in.u64();
  for (std::uint64_t component = 0; component < count; ++component) {
    std::string name = in.text();
    const std::uint8_t dtype = in.u8();
    const std::uint64_t rank = in.u64();
    if (dtype >= kNumDTypes || rank > 64) {
      throw IoError(where + ": the cache record is malformed (dtype " + std::to_string(dtype) +
                    ", rank " + std::to_string(rank) + "); delete the cache file and run again");
    }
    Shape shape;
    std::uint64_t elements = 1;
    for (std::uint64_t axis = 0; axis < rank; ++axis) {
      const std::uint64_t extent = in.u64();
      // The record must hold the elements, so a corrupt extent fails here, before allocating.
      if (extent != 0 && elements > (std::uint64_t{1} << 62) / extent) in.need(~std::uint64_t{0});
      shape.push_back(static_cast<std::int64_t>(extent));
      elements *= extent;
    }
    const std::uint64_t bytes = elements * dtype_size(static_cast<DType>(dtype));
    in.need(bytes);
    Tensor value = Tensor::empty(shape, static_cast<DType>(dtype));
    in.raw(value.raw_data(), bytes);
    element.set(std::move(name), std::move(value));
  }
  const std::string source = in.text();
  const auto index = static_cast<std::int64_t>(in.u64());
  const auto offset = static_cast<std::int64_t>(in.u64());
  element.set_origin(Origin{source.empty() ? nullptr : std::make_shared<const std::string>(source),
                            index, offset});
  element.set_random_key(in.u64());
  return element;
}

// ---- Streams ----

// Hands out a pass's elements again, with fresh random keys for this pass.
Element rekeyed(Element element, std::uint64_t pass) {
  element.set_random_key(mix_keys(element.random_key(), pass));
  return element;
}

struct MemoryCache {
  std::mutex mutex;
  bool complete = false;
  std::vector<Element> elements;
};

class MemoryReplayStream final : public Stream {
 public:
  MemoryReplayStream(std::shared_ptr<MemoryCache> cache, std::uint64_t pass)
      : cache_(std::move(cache)), pass_(pass) {}
  std::optional<Element> next() override {
    if (index_ >= cache_->elements.size()) return std::nullopt;
    return rekeyed(cache_->elements[index_++], pass_);
  }

 private:
  std::shared_ptr<MemoryCache> cache_;  // complete: read without the lock
  std::uint64_t pass_;
  std::size_t index_ = 0;
};

class MemoryRecordStream final : public Stream {
 public:
  MemoryRecordStream(std::unique_ptr<Stream> input, std::shared_ptr<MemoryCache> cache)
      : input_(std::move(input)), cache_(std::move(cache)) {}
  std::optional<Element> next() override {
    if (!input_) return std::nullopt;
    std::optional<Element> element = input_->next();
    if (element) {
      recorded_.push_back(*element);
      return element;
    }
    input_.reset();
    std::lock_guard lock(cache_->mutex);
    if (!cache_->complete) {
      cache_->elements = std::move(recorded_);
      cache_->complete = true;
    }
    return std::nullopt;
  }

 private:
  std::unique_ptr<Stream> input_;
  std::shared_ptr<MemoryCache> cache_;
  std::vector<Element> recorded_;
};

class FileReplayStream final : public Stream {
 public:
  FileReplayStream(const std::string& path, const std::string& fingerprint, std::uint64_t pass)
      : reader_(path), pass_(pass) {
    std::optional<TFRecordReader::Record> header = reader_.next();
    const std::string expected = std::string(kHeaderMagic) + fingerprint;
    if (!header || header->data.numel() != static_cast<std::int64_t>(expected.size()) ||
        std::memcmp(header->data.raw_data(), expected.data(), expected.size()) != 0) {
      const std::string found = header
                                    ? std::string(static_cast<const char*>(header->data.raw_data()),
                                                  static_cast<std::size_t>(header->data.numel()))
                                    : std::string();
      if (!found.starts_with(kHeaderMagic)) {
        throw IoError(path + ": not a Tandem cache file; delete it or give cache() another path");
      }
      throw IoError(path + ": the cache was written by a different pipeline (" +
                    found.substr(kHeaderMagic.size()) + ", this one is " + fingerprint +
                    "); delete it or give cache() another path");
    }
  }

  std::optional<Element> next() override {
    if (done_) return std::nullopt;
    std::optional<TFRecordReader::Record> record = reader_.next();
    const std::string where =
        reader_.path() + ": record " + std::to_string(record ? record->index : count_ + 1);
    if (!record) {
      throw IoError(where +
                    ": the cache ends without its footer; delete it and run again to "
                    "rebuild it");
    }
    const auto size = static_cast<std::size_t>(record->data.numel());
    if (size >= kFooterMagic.size() &&
        std::memcmp(record->data.raw_data(), kFooterMagic.data(), kFooterMagic.size()) == 0) {
      done_ = true;
      return std::nullopt;
    }
    ++count_;
    return rekeyed(decode_element(record->data, where), pass_);
  }

 private:
  TFRecordReader reader_;
  std::uint64_t pass_;
  std::int64_t count_ = 0;
  bool done_ = false;
};

class FileRecordStream final : public Stream {
 public:
  // The cache's file, once it is known to be one that may be replaced (a device node is refused
  // before anything is written beside it, never renamed over).
  static std::string checked_destination(std::string path) {
    require_replaceable(path, Destination::file, "cache");
    return path;
  }

  FileRecordStream(std::unique_ptr<Stream> input, std::string path, const std::string& fingerprint)
      : input_(std::move(input)),
        path_(checked_destination(std::move(path))),
        temporary_(path_ + ".tmp." + std::to_string(::getpid()) + "." +
                   std::to_string(next_writer_id())),
        writer_(std::make_unique<TFRecordWriter>(temporary_)) {
    const std::string header = std::string(kHeaderMagic) + fingerprint;
    writer_->write(std::span<const std::uint8_t>(
        reinterpret_cast<const std::uint8_t*>(header.data()), header.size()));
  }
  ~FileRecordStream() override {
    if (writer_) {
      writer_.reset();
      std::error_code ignored;
      std::filesystem::remove(temporary_, ignored);
    }
  }

  std::optional<Element> next() override {
    if (!input_) return std::nullopt;
    std::optional<Element> element = input_->next();
    if (element) {
      writer_->write(encode_element(*element));
      ++count_;
      return element;
    }
    input_.reset();
    const std::string footer = std::string(kFooterMagic) + std::to_string(count_);
    writer_->write(std::span<const std::uint8_t>(
        reinterpret_cast<const std::uint8_t*>(footer.data()), footer.size()));
    writer_->close();
    writer_.reset();
    std::error_code error;
    std::filesystem::rename(temporary_, path_, error);
    if (error) {
      std::filesystem::remove(temporary_, error);
      throw IoError(path_ + ": cannot put the finished cache in place (" + error.message() + ")");
    }
    return std::nullopt;
  }

 private:
  static std::uint64_t next_writer_id() {
    static std::atomic<std::uint64_t> counter{0};
    return counter.fetch_add(1);
  }

  std::unique_ptr<Stream> input_;
  std::string path_;
  std::string temporary_;
  std::unique_ptr<TFRecordWriter> writer_;
  std::int64_t count_ = 0;
};

class CacheNode final : public Node {
 public:
  CacheNode(NodePtr input, std::string path)
      : Node({std::move(input)}), path_(std::move(path)), memory_(std::make_shared<MemoryCache>()) {
    if (!path_.empty()) {
      const auto parent = std::filesystem::absolute(path_).parent_path();
      if (!std::filesystem::is_directory(parent)) {
        throw InvalidArgument("Pipeline::cache: directory " + parent.string() + " of '" + path_ +
                              "' does not exist; create it or choose another path");
      }
    }
  }
  std::string name() const override {
    return path_.empty() ? "cache(memory)" : "cache(" + path_ + ")";
  }
  std::int64_t cardinality() const override { return input().cardinality(); }
  std::int64_t examples() const override { return input().examples(); }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    if (path_.empty()) {
      {
        std::lock_guard lock(memory_->mutex);
        if (memory_->complete) return std::make_unique<MemoryReplayStream>(memory_, context.pass);
      }
      return std::make_unique<MemoryRecordStream>(open_input(*this, context, self), memory_);
    }
    const std::string fingerprint = input().describe();
    if (std::filesystem::exists(path_)) {
      return std::make_unique<FileReplayStream>(path_, fingerprint, context.pass);
    }
    return std::make_unique<FileRecordStream>(open_input(*this, context, self), path_, fingerprint);
  }

 private:
  std::string path_;
  std::shared_ptr<MemoryCache> memory_;
};

}  // namespace

NodePtr make_cache_node(NodePtr input, std::string path) {
  return std::make_shared<CacheNode>(std::move(input), std::move(path));
}

}  // namespace tandem::data
