#pragma once
// TFRecord files and tf.train.Example, byte-compatible with TensorFlow's.
//
// A TFRecord file is a sequence of records, each
//   u64 length (little-endian) | u32 masked CRC-32C of the length | data | u32 masked CRC-32C of
//   data
// optionally gzip-compressed as a whole (TFRecordOptions(compression_type="GZIP")).
// A tf.train.Example maps feature names to a list of byte strings, floats or int64s.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tandem/pipeline.h"
#include "tandem/tensor.h"

namespace tandem::data {

enum class Compression { none, gzip };

// Writes records; the file is complete once close() returns (the destructor closes too, but
// cannot report a failure).
class TFRecordWriter {
 public:
  explicit TFRecordWriter(const std::string& path, Compression compression = Compression::none);
  ~TFRecordWriter();
  TFRecordWriter(const TFRecordWriter&) = delete;
  TFRecordWriter& operator=(const TFRecordWriter&) = delete;

  void write(std::span<const std::uint8_t> record);
  // A rank-1 u8 tensor's bytes.
  void write(const Tensor& record);
  void close();
  std::int64_t records_written() const { return records_; }

 private:
  struct File;
  std::unique_ptr<File> file_;
  std::int64_t records_ = 0;
};

// Reads records one by one, gzip or plain (told apart by content), checking both CRCs.
class TFRecordReader {
 public:
  explicit TFRecordReader(const std::string& path);
  ~TFRecordReader();
  TFRecordReader(const TFRecordReader&) = delete;
  TFRecordReader& operator=(const TFRecordReader&) = delete;

  struct Record {
    Tensor data;              // u8 (n,)
    std::int64_t index = 0;   // from 0
    std::int64_t offset = 0;  // byte offset of its header in the (decompressed) file
  };
  // Nothing at the end of the file. A corrupt record throws IoError naming the file, the record
  // index and the byte offset. After a data CRC mismatch the next record can still be read
  // (the framing is intact); after a truncated record or a bad length CRC the reader is at the
  // end (there is no way to find the next record).
  std::optional<Record> next();
  const std::string& path() const;

 private:
  struct File;
  std::unique_ptr<File> file_;
};

// How one feature of a tf.train.Example becomes a tensor (tf.io.FixedLenFeature).
struct FeatureSpec {
  enum class Kind { bytes, int64, float32 };
  Kind kind = Kind::int64;
  // Element type of the tensor: u8 for bytes; any numeric type for int64 and float32 lists.
  DType dtype = DType::i64;
  // The tensor's shape: {} a scalar, {-1} whatever length the list has, or a fixed shape whose
  // element count the list (for bytes: the single byte string) must match.
  Shape shape{};
  // Used when the feature is absent (else the element is an error).
  std::optional<std::vector<double>> default_value;

  // The common cases.
  static FeatureSpec int64(Shape shape = {}, DType dtype = DType::i64);
  static FeatureSpec float32(Shape shape = {}, DType dtype = DType::f32);
  // One byte string, as u8 with `shape` (raw pixels, say) or {-1} (an encoded image).
  static FeatureSpec bytes(Shape shape = {-1});
};
using ExampleSpec = std::map<std::string, FeatureSpec>;

// tf.train.Example wire format. Features are written sorted by name; floating tensors become a
// float_list, integer and bool ones an int64_list, u8 ones a bytes_list of one byte string
// (the tensor's bytes); shapes are not stored.
std::vector<std::uint8_t> serialize_example(const Element& element);
// Without a spec every feature becomes a rank-1 tensor: int64_list -> i64, float_list -> f32,
// a bytes_list of one string -> u8. Throws IoError naming `what` and the problem for malformed
// data, and InvalidArgument when the data does not match the spec.
Element parse_example(std::span<const std::uint8_t> serialized, const ExampleSpec* spec = nullptr,
                      const std::string& what = "");

// Map function: parses the "record" component (from Pipeline::tfrecord) into the features,
// naming the record's file, index and offset in errors.
MapFn parse_examples(ExampleSpec spec = {}, std::string key = "record");

// Writes every element of one pass as a tf.train.Example; returns the number written.
std::int64_t write_tfrecord(const Pipeline& pipeline, const std::string& path,
                            Compression compression = Compression::none);

}  // namespace tandem::data
