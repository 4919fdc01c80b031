// The safetensors format, written from its specification
// (https://github.com/huggingface/safetensors#format): an unsigned 64-bit little-endian header
// length N, N bytes of UTF-8 JSON {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets":
// [begin, end]}, ..., "__metadata__": {"key": "value"}}, then the data, little-endian and
// row-major, the offsets relative to the end of the header. The reader enforces what the
// reference implementation does: a header within the file and below 100 MB, a JSON object, known
// dtypes, a byte range per tensor that matches its shape and dtype, and ranges that tile the data
// section exactly.
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/crc32c.h"
#include "core/files.h"
#include "io/file_io.h"
#include "io/format_util.h"
#include "tandem/io.h"

namespace tandem::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr std::size_t kAlignment = 8;
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::f32, "F32"}, {DType::f64, "F64"}, {DType::bf16, "BF16"},
    {DType::f16, "F16"}, {DType::i32, "I32"}, {DType::i64, "I64"},
    {DType::u8, "U8"},   {DType::i8, "I8"},   {DType::boolean, "BOOL"},
};
// Valid in the format, but without a Tandem dtype to load them into.
constexpr const char* kForeignDTypes[] = {"I8",  "I16",     "U16",     "U32",
                                          "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0",
                                          "F4",  "F6_E2M3", "F6_E3M2", "C64"};

const char* safetensors_dtype(DType dtype) {
  for (const auto& [known, name] : kDTypeNames) {
    if (known == dtype) return name;
  }
  TANDEM_ASSERT(false, "dtype missing from the safetensors table");
}

std::optional<DType> parse_dtype_name(const std::string& name) {
  for (const auto& [dtype, known] : kDTypeNames) {
    if (name == known) return dtype;
  }
  return std::nullopt;
}

[[noreturn]] void fail(const std::string& what, const std::string& problem) {
  throw IoError(what + ": " + problem);
}

std::string tensor_label(const std::string& name) {
  return "tensor '" + name + "'";
}

// Elements of `shape`, or nothing when the product overflows.
std::optional<std::uint64_t> checked_numel(const std::vector<std::int64_t>& shape) {
  std::uint64_t count = 1;
  for (const std::int64_t extent : shape) {
    if (extent < 0) return std::nullopt;
    const auto unsigned_extent = static_cast<std::uint64_t>(extent);
    if (unsigned_extent != 0 &&
        count > std::numeric_limits<std::uint64_t>::max() / unsigned_extent) {
      return std::nullopt;
    }
    count *= unsigned_extent;
  }
  return count;
}

struct HeaderEntry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin;
  std::uint64_t end;
};

HeaderEntry parse_entry(const std::string& what, const std::string& name,
                        const nlohmann::json& info) {
  const std::string label = tensor_label(name);
  if (name.empty()) fail(what, "a tensor has an empty name in the header");
  if (!info.is_object()) fail(what, label + " is not described by a JSON object in the header");
  const auto dtype_field = info.find("dtype");
  const auto shape_field = info.find("shape");
  const auto offsets_field = info.find("data_offsets");
  if (dtype_field == info.end() || shape_field == info.end() || offsets_field == info.end()) {
    fail(what, label + " lacks dtype, shape or data_offsets in the header");
  }
  if (!dtype_field->is_string()) fail(what, label + ": dtype is not a string");
  const std::string dtype_name = dtype_field->get<std::string>();
  const std::optional<DType> dtype = parse_dtype_name(dtype_name);
  if (!dtype) {
    for (const char* foreign : kForeignDTypes) {
      if (dtype_name == foreign) {
        fail(what, label + " has dtype " + dtype_name +
                       ", which Tandem cannot hold (it has F32, F64, BF16, F16, I32, I64, U8, "
                       "BOOL); convert the tensor before saving it");
      }
    }
    fail(what, label + " has the unknown dtype '" + dtype_name + "'");
  }
  if (!shape_field->is_array()) fail(what, label + ": shape is not a list");
  Shape shape;
  for (const nlohmann::json& extent : *shape_field) {
    if (!extent.is_number_unsigned() ||
        extent.get<std::uint64_t>() > std::uint64_t{std::numeric_limits<std::int64_t>::max()}) {
      fail(what, label + ": shape " + shape_field->dump() + " must list non-negative integers");
    }
    shape.push_back(extent.get<std::int64_t>());
  }
  if (!offsets_field->is_array() || offsets_field->size() != 2 ||
      !(*offsets_field)[0].is_number_unsigned() || !(*offsets_field)[1].is_number_unsigned()) {
    fail(what, label + ": data_offsets must be [begin, end] with two non-negative integers");
  }
  const auto begin = (*offsets_field)[0].get<std::uint64_t>();
  const auto end = (*offsets_field)[1].get<std::uint64_t>();
  if (end < begin) {
    fail(what, label + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                   "] end before they begin");
  }
  const std::optional<std::uint64_t> numel = checked_numel(shape);
  if (!numel || *numel > std::numeric_limits<std::uint64_t>::max() / dtype_size(*dtype) ||
      *numel * dtype_size(*dtype) != end - begin) {
    fail(what, label + " of shape " + shape_str(shape) + " and dtype " + dtype_name + " needs " +
                   (numel ? std::to_string(*numel * dtype_size(*dtype)) : "too many") +
                   " bytes but its data_offsets give " + std::to_string(end - begin));
  }
  return {name, *dtype, std::move(shape), begin, end};
}

}  // namespace

const Tensor* Safetensors::find(const std::string& name) const {
  for (const auto& [tensor_name, tensor] : tensors) {
    if (tensor_name == name) return &tensor;
  }
  return nullptr;
}

std::vector<std::uint8_t> encode_safetensors(const NamedTensors& tensors,
                                             const Metadata& metadata) {
  std::set<std::string> names;
  std::vector<Tensor> host;  // the tensors in host memory, in order
  host.reserve(tensors.size());
  std::uint64_t data_bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == kMetadataKey) {
      throw InvalidArgument("safetensors: tensor names must be non-empty and not '" +
                            std::string(kMetadataKey) + "', got '" + name + "'");
    }
    if (!names.insert(name).second) {
      throw InvalidArgument("safetensors: two tensors are named '" + name +
                            "'; names must be unique");
    }
    if (!tensor.defined()) {
      throw InvalidArgument("safetensors: " + tensor_label(name) + " is undefined");
    }
    host.push_back(tensor.to(Device::cpu()));
    data_bytes += tensor.nbytes();
  }
  std::vector<std::uint8_t> data(data_bytes);
  std::size_t offset = 0;
  for (const Tensor& tensor : host) {
    if (tensor.nbytes() > 0) std::memcpy(data.data() + offset, tensor.raw_data(), tensor.nbytes());
    offset += tensor.nbytes();
  }

  // The metadata first, as the reference writer puts it, then the tensors in order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  nlohmann::ordered_json& meta = header[kMetadataKey] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : metadata)
    meta[key] = value;
  meta[kDataChecksumKey] = detail::hex32(crc32c(data));
  offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& tensor = host[i];
    header[tensors[i].first] = {{"dtype", safetensors_dtype(tensor.dtype())},
                                {"shape", tensor.shape()},
                                {"data_offsets", {offset, offset + tensor.nbytes()}}};
    offset += tensor.nbytes();
  }

  std::string text = header.dump();
  text.append((kAlignment - (8 + text.size()) % kAlignment) % kAlignment, ' ');
  std::vector<std::uint8_t> bytes;
  bytes.reserve(8 + text.size() + data.size());
  const std::uint64_t length = text.size();
  for (int shift = 0; shift < 64; shift += 8)
    bytes.push_back(static_cast<std::uint8_t>(length >> shift));
  bytes.insert(bytes.end(), text.begin(), text.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

Safetensors decode_safetensors(std::span<const std::uint8_t> bytes, const std::string& what) {
  if (bytes.size() < 8) {
    fail(what, "only " + std::to_string(bytes.size()) +
                   " bytes, too short for a safetensors file (8-byte header length first); the "
                   "file is truncated or not a safetensors file");
  }
  std::uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i)
    header_length = header_length << 8 | bytes[static_cast<std::size_t>(i)];
  if (header_length > kMaxHeaderBytes || header_length > bytes.size() - 8) {
    fail(what, "the header length " + std::to_string(header_length) + " does not fit the " +
                   std::to_string(bytes.size()) +
                   "-byte file; the file is truncated, corrupt or not a safetensors file");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8),
                              static_cast<std::size_t>(header_length));
  if (text.empty() || text.front() != '{') {
    fail(what,
         "the header does not start with '{'; the file is corrupt or not a safetensors "
         "file");
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {  // malformed, or a number out of range
    fail(what, std::string("the JSON header is malformed (") + error.what() +
                   "); the file is corrupt or truncated");
  }
  if (!header.is_object()) fail(what, "the JSON header is not an object");

  Safetensors result;
  std::vector<HeaderEntry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) fail(what, "__metadata__ is not a JSON object");
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          fail(what, "__metadata__ entry '" + meta_key + "' is not a string");
        }
        result.metadata[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(what, key, value));
  }

  const std::span<const std::uint8_t> data = bytes.subspan(8 + header_length);
  std::sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  for (const HeaderEntry& entry : entries) {
    if (entry.begin != covered) {
      fail(what, tensor_label(entry.name) + " starts at data byte " + std::to_string(entry.begin) +
                     " but the tensors before it end at " + std::to_string(covered) +
                     "; the offsets overlap or leave a gap (corrupt header)");
    }
    covered = entry.end;
  }
  if (covered != data.size()) {
    fail(what, "the header describes " + std::to_string(covered) + " data bytes but the file has " +
                   std::to_string(data.size()) +
                   (covered > data.size() ? "; the file is truncated" : "; trailing bytes"));
  }
  if (const auto recorded = result.metadata.find(kDataChecksumKey);
      recorded != result.metadata.end()) {
    const std::string actual = detail::hex32(crc32c(data));
    if (recorded->second != actual) {
      fail(what, "the data's CRC-32C is " + actual + " but the header records " + recorded->second +
                     "; the file is corrupt");
    }
  }

  for (const HeaderEntry& entry : entries) {
    Tensor tensor = Tensor::empty(entry.shape, entry.dtype);
    const std::size_t size = static_cast<std::size_t>(entry.end - entry.begin);
    if (size > 0) std::memcpy(tensor.raw_data(), data.data() + entry.begin, size);
    if (entry.dtype == DType::boolean) {
      const std::uint8_t* flags = data.data() + entry.begin;
      for (std::size_t i = 0; i < size; ++i) {
        if (flags[i] > 1) {
          fail(what, tensor_label(entry.name) + " is BOOL but holds the byte " +
                         std::to_string(flags[i]) + " (only 0 and 1 are booleans)");
        }
      }
    }
    result.tensors.emplace_back(entry.name, std::move(tensor));
  }
  return result;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  const std::vector<std::uint8_t> bytes = encode_safetensors(tensors, metadata);
  write_file_atomically(path, bytes);
}

Safetensors load_safetensors(const std::string& path) {
  const detail::Bytes bytes = read_whole_file(path, {.max_bytes = detail::kMaxWeightsFileBytes});
  return decode_safetensors(bytes, path);
}

}  // namespace tandem::io
