#pragma once
// An event-file reader written for the tests, independent of what Tandem writes with: a bitwise
// CRC-32C, the TFRecord framing, and a protobuf wire-format decoder that knows nothing of
// Tandem's .proto files. The field numbers the tests look up are TensorBoard's, typed in by hand
// from tensorboard/compat/proto/{event,summary,tensor}.proto and plugins/hparams/*.proto.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tandem::testing {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time.
inline std::uint32_t reference_crc32c(const std::string& data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const unsigned char byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// TensorFlow's mask (tensorflow/core/lib/hash/crc32c.h).
inline std::uint32_t reference_mask(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

inline std::uint64_t little_endian(const std::string& bytes, std::size_t offset, int width) {
  std::uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(bytes.at(offset + i));
  return value;
}

// The records of a TFRecord file; fails the test on a bad CRC or a truncated record.
inline std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  std::size_t offset = 0;
  while (offset < file.size()) {
    if (file.size() - offset < 12) throw std::runtime_error("truncated record header in " + path);
    const std::uint64_t length = little_endian(file, offset, 8);
    const auto length_crc = static_cast<std::uint32_t>(little_endian(file, offset + 8, 4));
    if (length_crc != reference_mask(reference_crc32c(file.substr(offset, 8)))) {
      throw std::runtime_error("bad length CRC at byte " + std::to_string(offset) + " of " + path);
    }
    if (file.size() - offset < 16 + length) throw std::runtime_error("truncated record in " + path);
    std::string data = file.substr(offset + 12, length);
    const auto data_crc = static_cast<std::uint32_t>(little_endian(file, offset + 12 + length, 4));
    if (data_crc != reference_mask(reference_crc32c(data))) {
      throw std::runtime_error("bad data CRC at byte " + std::to_string(offset) + " of " + path);
    }
    records.push_back(std::move(data));
    offset += 16 + length;
  }
  return records;
}

// One decoded protobuf message: the values of each field number, in order.
struct Field {
  int wire_type = 0;  // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  std::uint64_t number = 0;
  std::string bytes;  // wire type 2
};

class Message {
 public:
  Message() = default;
  explicit Message(const std::string& data) {
    std::size_t offset = 0;
    while (offset < data.size()) {
      const std::uint64_t key = varint(data, offset);
      Field field;
      field.wire_type = static_cast<int>(key & 7);
      const int number = static_cast<int>(key >> 3);
      switch (field.wire_type) {
        case 0:
          field.number = varint(data, offset);
          break;
        case 1:
          field.number = little_endian(data, offset, 8);
          offset += 8;
          break;
        case 2: {
          const std::uint64_t length = varint(data, offset);
          if (offset + length > data.size()) throw std::runtime_error("truncated field");
          field.bytes = data.substr(offset, length);
          offset += length;
          break;
        }
        case 5:
          field.number = little_endian(data, offset, 4);
          offset += 4;
          break;
        default:
          throw std::runtime_error("unknown wire type " + std::to_string(field.wire_type));
      }
      fields_[number].push_back(std::move(field));
    }
  }

  bool has(int number) const { return fields_.count(number) != 0; }
  std::size_t count(int number) const { return has(number) ? fields_.at(number).size() : 0; }
  const Field& field(int number, std::size_t index = 0) const {
    if (!has(number) || index >= fields_.at(number).size()) {
      throw std::runtime_error("no field " + std::to_string(number));
    }
    return fields_.at(number)[index];
  }
  Message message(int number, std::size_t index = 0) const {
    return Message(field(number, index).bytes);
  }
  std::string string(int number, std::size_t index = 0) const { return field(number, index).bytes; }
  // Numbers read as proto3 does: an absent field is 0 (defaults are not written).
  std::uint64_t varint_value(int number, std::size_t index = 0) const {
    return has(number) ? field(number, index).number : 0;
  }
  double double_value(int number, std::size_t index = 0) const {
    const std::uint64_t bits = has(number) ? field(number, index).number : 0;
    double value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  float float_value(int number, std::size_t index = 0) const {
    const auto bits = static_cast<std::uint32_t>(has(number) ? field(number, index).number : 0);
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  // A packed repeated double field (wire type 2 holding 8-byte values).
  std::vector<double> packed_doubles(int number) const {
    std::vector<double> values;
    if (!has(number)) return values;
    const std::string& bytes = field(number).bytes;
    for (std::size_t offset = 0; offset + 8 <= bytes.size(); offset += 8) {
      const std::uint64_t bits = little_endian(bytes, offset, 8);
      double value;
      std::memcpy(&value, &bits, sizeof value);
      values.push_back(value);
    }
    return values;
  }

 private:
  static std::uint64_t varint(const std::string& data, std::size_t& offset) {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (offset >= data.size()) throw std::runtime_error("truncated varint");
      const auto byte = static_cast<unsigned char>(data[offset++]);
      value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    throw std::runtime_error("varint too long");
  }

  std::map<int, std::vector<Field>> fields_;
};

// TensorBoard's field numbers.
namespace tb {
// Event
constexpr int kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5;
// Summary
constexpr int kSummaryValue = 1;
// Summary.Value
constexpr int kTag = 1, kSimpleValue = 2, kImage = 4, kHisto = 5, kTensor = 8, kMetadata = 9;
// Summary.Image
constexpr int kHeight = 1, kWidth = 2, kColorspace = 3, kEncodedImage = 4;
// HistogramProto
constexpr int kMin = 1, kMax = 2, kNum = 3, kSum = 4, kSumSquares = 5, kBucketLimit = 6,
              kBucket = 7;
// SummaryMetadata and its PluginData
constexpr int kPluginData = 1, kPluginName = 1, kPluginContent = 2;
// TensorProto
constexpr int kDtype = 1, kTensorShape = 2, kStringVal = 8;
constexpr int kDtString = 7, kDtFloat = 1;
// HParamsPluginData
constexpr int kSessionStartInfo = 3, kSessionEndInfo = 4;
// SessionStartInfo: hparams map entries (key 1, google.protobuf.Value 2), group name, start time
constexpr int kHParams = 1, kGroupName = 4, kStartTime = 5;
// google.protobuf.Value
constexpr int kNumberValue = 2, kStringValue = 3, kBoolValue = 4;
// SessionEndInfo
constexpr int kStatus = 1, kEndTime = 2;
constexpr int kStatusSuccess = 1, kStatusFailure = 2;
}  // namespace tb

// A summary event's single value, with its step.
struct SummaryValue {
  std::int64_t step = 0;
  double wall_time = 0.0;
  std::string tag;
  Message value;
};

// Every Summary.Value in the event files of `directory` (not its subfolders), in file order.
inline std::vector<SummaryValue> read_summaries(const std::filesystem::path& directory) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<SummaryValue> values;
  for (const auto& file : files) {
    for (const std::string& record : read_records(file.string())) {
      const Message event(record);
      if (!event.has(tb::kSummary)) continue;
      const Message summary = event.message(tb::kSummary);
      for (std::size_t i = 0; i < summary.count(tb::kSummaryValue); ++i) {
        SummaryValue value;
        value.step = static_cast<std::int64_t>(event.varint_value(tb::kStep));
        value.wall_time = event.double_value(tb::kWallTime);
        value.value = summary.message(tb::kSummaryValue, i);
        value.tag = value.value.string(tb::kTag);
        values.push_back(std::move(value));
      }
    }
  }
  return values;
}

// The values with this tag.
inline std::vector<SummaryValue> with_tag(const std::vector<SummaryValue>& values,
                                          const std::string& tag) {
  std::vector<SummaryValue> found;
  for (const SummaryValue& value : values) {
    if (value.tag == tag) found.push_back(value);
  }
  return found;
}

}  // namespace tandem::testing
