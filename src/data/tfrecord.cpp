// TFRecord files: the reader and writer, the Pipeline source, and write_tfrecord.
#include "tandem/tfrecord.h"

#include <cstring>

#include "core/crc32c.h"
#include "data/file_io.h"
#include "data/nodes.h"

namespace tandem::data {
namespace {

constexpr std::size_t kHeaderBytes = 12;  // u64 length, u32 masked CRC of the length
constexpr std::size_t kFooterBytes = 4;   // u32 masked CRC of the data
// Records up to this size are read straight into their tensor; a larger declared length is
// read in steps, so a corrupt length cannot make us allocate more than the file holds.
constexpr std::uint64_t kDirectReadLimit = std::uint64_t{64} << 20;
// The most one record may hold. Read in steps, a gzip-compressed file declaring a 2^62-byte record
// would still inflate as much as it decompresses to; an Example of even a large image is
// megabytes.
constexpr std::uint64_t kMaxRecordBytes = std::uint64_t{1} << 30;

std::uint64_t load_little_endian(const std::uint8_t* bytes, int width) {
  std::uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

void store_little_endian(std::uint8_t* bytes, std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i)
    bytes[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08X", value);
  return text;
}

}  // namespace

// ---- Writer ----

struct TFRecordWriter::File {
  File(const std::string& path, bool gzip) : output(path, gzip) {}
  OutputFile output;
};

TFRecordWriter::TFRecordWriter(const std::string& path, Compression compression)
    : file_(std::make_unique<File>(path, compression == Compression::gzip)) {}

TFRecordWriter::~TFRecordWriter() = default;

void TFRecordWriter::write(std::span<const std::uint8_t> record) {
  if (!file_) throw InvalidArgument("TFRecordWriter: write after close()");
  std::uint8_t header[kHeaderBytes];
  store_little_endian(header, record.size(), 8);
  store_little_endian(header + 8, mask_crc(crc32c({header, 8})), 4);
  std::uint8_t footer[kFooterBytes];
  store_little_endian(footer, mask_crc(crc32c(record)), 4);
  file_->output.write(header);
  file_->output.write(record);
  file_->output.write(footer);
  ++records_;
}

void TFRecordWriter::write(const Tensor& record) {
  if (!record.defined() || record.dtype() != DType::u8 || record.rank() != 1) {
    throw InvalidArgument("TFRecordWriter::write: a record is a byte string (u8 of rank 1), got " +
                          (record.defined() ? std::string(dtype_name(record.dtype())) + " " +
                                                  shape_str(record.shape())
                                            : std::string("an undefined tensor")));
  }
  write(std::span<const std::uint8_t>(static_cast<const std::uint8_t*>(record.raw_data()),
                                      static_cast<std::size_t>(record.numel())));
}

void TFRecordWriter::close() {
  if (!file_) return;
  file_->output.close();
  file_.reset();
}

// ---- Reader ----

struct TFRecordReader::File {
  explicit File(const std::string& path) : input(path) {}
  InputFile input;
  std::int64_t index = 0;
  bool at_end = false;
};

TFRecordReader::TFRecordReader(const std::string& path) : file_(std::make_unique<File>(path)) {}

TFRecordReader::~TFRecordReader() = default;

const std::string& TFRecordReader::path() const {
  return file_->input.path();
}

std::optional<TFRecordReader::Record> TFRecordReader::next() {
  File& file = *file_;
  if (file.at_end) return std::nullopt;
  const std::string& path = file.input.path();
  const std::int64_t index = file.index;
  const auto offset = static_cast<std::int64_t>(file.input.offset());
  const std::string where =
      path + ": record " + std::to_string(index) + " at byte " + std::to_string(offset);
  // Until the record is complete, a failure leaves the reader at the end: without a trustworthy
  // length there is no way to find the next record.
  file.at_end = true;
  std::uint8_t header[kHeaderBytes];
  const std::size_t header_read = file.input.read(header, kHeaderBytes);
  if (header_read == 0) return std::nullopt;
  if (header_read < kHeaderBytes) {
    throw IoError(where + " is truncated: the file ends " + std::to_string(header_read) +
                  " bytes into its 12-byte header; the file was cut short: write it again");
  }
  const std::uint64_t length = load_little_endian(header, 8);
  const auto stored_length_crc = static_cast<std::uint32_t>(load_little_endian(header + 8, 4));
  const std::uint32_t length_crc = mask_crc(crc32c({header, 8}));
  if (stored_length_crc != length_crc) {
    throw IoError(where + ": CRC mismatch in the length (stored " + hex32(stored_length_crc) +
                  ", computed " + hex32(length_crc) +
                  "); the file is corrupt or not a TFRecord file");
  }
  if (length > kMaxRecordBytes) {
    throw IoError(where + " declares " + std::to_string(length) + " bytes, more than the " +
                  std::to_string(kMaxRecordBytes) +
                  " a record may hold; the file is corrupt or crafted: write it again");
  }
  Tensor data;  // (length,)
  if (length <= kDirectReadLimit) {
    data = Tensor::empty({static_cast<std::int64_t>(length)}, DType::u8);
    const std::size_t got = file.input.read(data.raw_data(), static_cast<std::size_t>(length));
    if (got < length) {
      throw IoError(where + " is truncated: it declares " + std::to_string(length) +
                    " bytes of data but the file ends after " + std::to_string(got) +
                    "; the file was cut short: write it again");
    }
  } else {
    const std::vector<std::uint8_t> bytes = file.input.read_up_to(length);
    if (bytes.size() < length) {
      throw IoError(where + " is truncated: it declares " + std::to_string(length) +
                    " bytes of data but the file ends after " + std::to_string(bytes.size()) +
                    "; the file was cut short: write it again");
    }
    data = Tensor::empty({static_cast<std::int64_t>(length)}, DType::u8);
    std::memcpy(data.raw_data(), bytes.data(), bytes.size());
  }
  std::uint8_t footer[kFooterBytes];
  const std::size_t footer_read = file.input.read(footer, kFooterBytes);
  if (footer_read < kFooterBytes) {
    throw IoError(where + " is truncated: the file ends " + std::to_string(footer_read) +
                  " bytes into its 4-byte data CRC; the file was cut short: write it again");
  }
  // The framing is intact from here on: the next record can be read whatever the data holds.
  file.at_end = false;
  file.index = index + 1;
  const auto stored_data_crc = static_cast<std::uint32_t>(load_little_endian(footer, 4));
  const std::uint32_t data_crc = mask_crc(crc32c(std::span<const std::uint8_t>(
      static_cast<const std::uint8_t*>(data.raw_data()), static_cast<std::size_t>(length))));
  if (stored_data_crc != data_crc) {
    throw IoError(where + ": CRC mismatch in the data (stored " + hex32(stored_data_crc) +
                  ", computed " + hex32(data_crc) + ", " + std::to_string(length) +
                  " bytes); the record is corrupt");
  }
  return Record{std::move(data), index, offset};
}

// ---- Pipeline source ----

namespace {

class TFRecordNode final : public Node {
 public:
  TFRecordNode(std::vector<std::string> files, ReaderOptions options) : options_(options) {
    if (files.empty()) {
      throw InvalidArgument(
          "Pipeline::tfrecord: give at least one file (Pipeline::list_files "
          "and interleave read many)");
    }
    for (std::string& file : files)
      files_.push_back(std::make_shared<const std::string>(std::move(file)));
  }
  std::string name() const override {
    return "tfrecord(" + std::to_string(files_.size()) +
           (files_.size() == 1 ? " file)" : " files)");
  }
  std::int64_t cardinality() const override { return kUnknownCardinality; }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class RecordStream final : public Stream {
     public:
      RecordStream(const TFRecordNode& node, std::uint64_t pass, StageCounters& self)
          : node_(node), pass_(pass), self_(self) {}

      std::optional<Element> next() override {
        while (file_ < node_.files_.size()) {
          const std::string& path = *node_.files_[file_];
          try {
            if (!reader_) {
              reader_ = std::make_unique<TFRecordReader>(path);
              file_key_ = stream_key(pass_, path);
            }
            if (std::optional<TFRecordReader::Record> record = reader_->next()) {
              Element element{{"record", std::move(record->data)}};
              element.set_origin(Origin{node_.files_[file_], record->index, record->offset});
              element.set_random_key(
                  mix_keys(file_key_, static_cast<std::uint64_t>(record->index)));
              return element;
            }
          } catch (const IoError& error) {
            if (node_.options_.on_error == OnError::raise) throw;
            self_.record_skip(error.what());
            // A reader that can go on (a data CRC mismatch) keeps its place; one at its end
            // moves on to the next file below.
            if (reader_) continue;
          }
          reader_.reset();
          ++file_;
        }
        return std::nullopt;
      }

     private:
      const TFRecordNode& node_;
      std::uint64_t pass_;
      std::uint64_t file_key_ = 0;
      StageCounters& self_;
      std::size_t file_ = 0;
      std::unique_ptr<TFRecordReader> reader_;
    };
    return std::make_unique<RecordStream>(*this, context.pass, self);
  }

 private:
  std::vector<std::shared_ptr<const std::string>> files_;
  ReaderOptions options_;
};

}  // namespace

NodePtr make_tfrecord_node(std::vector<std::string> files, const ReaderOptions& options) {
  return std::make_shared<TFRecordNode>(std::move(files), options);
}

std::int64_t write_tfrecord(const Pipeline& pipeline, const std::string& path,
                            Compression compression) {
  if (pipeline.cardinality() == kInfiniteCardinality) {
    throw InvalidArgument("write_tfrecord: " + pipeline.describe() +
                          " repeats forever; take(N) elements first");
  }
  TFRecordWriter writer(path, compression);
  ElementIterator elements = pipeline.start();
  while (std::optional<Element> element = elements.next())
    writer.write(serialize_example(*element));
  writer.close();
  return writer.records_written();
}

}  // namespace tandem::data
