// tf.train.Example in protobuf wire format, written and parsed by hand: TensorFlow does the same
// (example_proto_fast_parsing.cc) because a generic protobuf parse into maps and lists is far
// slower than reading the few message types straight into tensors.
//
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }   // entries: { string key = 1; Feature value =
//   2; } Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List
//   int64_list = 3; } } BytesList { repeated bytes value = 1; }  FloatList { repeated float value =
//   1 [packed]; } Int64List { repeated int64 value = 1 [packed]; }
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <type_traits>

#include "tandem/tfrecord.h"

namespace tandem::data {
namespace {

enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

using Bytes = std::vector<std::uint8_t>;

// ---- Writing ----

void put_varint(Bytes& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(value | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(value));
}

void put_tag(Bytes& out, std::uint32_t field, WireType type) {
  put_varint(out, (field << 3) | type);
}

void put_message(Bytes& out, std::uint32_t field, const Bytes& message) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, message.size());
  out.insert(out.end(), message.begin(), message.end());
}

void put_bytes(Bytes& out, std::uint32_t field, const std::uint8_t* data, std::size_t size) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, size);
  out.insert(out.end(), data, data + size);
}

Bytes encode_feature(const std::string& name, const Tensor& value) {
  if (!value.defined() || value.device().type != DeviceType::cpu) {
    throw InvalidArgument("serialize_example: component '" + name +
                          "' must be a defined tensor in host memory");
  }
  Bytes list;
  Bytes feature;
  const auto count = static_cast<std::size_t>(value.numel());
  if (value.dtype() == DType::u8) {
    put_bytes(list, 1, static_cast<const std::uint8_t*>(value.raw_data()), count);
    put_message(feature, 1, list);
  } else if (is_floating(value.dtype())) {
    const std::vector<float> floats = value.to_vector<float>();
    if (!floats.empty()) {
      put_tag(list, 1, kLengthDelimited);
      put_varint(list, floats.size() * 4);
      for (const float element : floats) {
        const auto bits = std::bit_cast<std::uint32_t>(element);
        for (int shift = 0; shift < 32; shift += 8)
          list.push_back(static_cast<std::uint8_t>(bits >> shift));
      }
    }
    put_message(feature, 2, list);
  } else {
    const std::vector<std::int64_t> integers = value.to_vector<std::int64_t>();
    if (!integers.empty()) {
      Bytes packed;
      for (const std::int64_t element : integers)
        put_varint(packed, static_cast<std::uint64_t>(element));
      put_message(list, 1, packed);
    }
    put_message(feature, 3, list);
  }
  return feature;
}

// ---- Parsing ----

// A bounded reader over a byte span; every overrun is a malformed message.
class WireReader {
 public:
  WireReader(std::span<const std::uint8_t> bytes, const std::string& what, std::size_t base = 0)
      : bytes_(bytes), what_(what), base_(base) {}

  bool done() const { return position_ >= bytes_.size(); }

  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (position_ >= bytes_.size()) fail("a varint runs past the end");
      const std::uint8_t byte = bytes_[position_++];
      value |= std::uint64_t{byte & 0x7Fu} << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail("a varint is longer than 10 bytes");
  }

  std::uint32_t fixed32() {
    if (bytes_.size() - position_ < 4) fail("a 4-byte value runs past the end");
    std::uint32_t value = 0;
    for (int i = 3; i >= 0; --i)
      value = (value << 8) | bytes_[position_ + static_cast<std::size_t>(i)];
    position_ += 4;
    return value;
  }

  // A length-delimited field's bytes, and where they start (for nested error offsets).
  std::span<const std::uint8_t> delimited(std::size_t& start) {
    const std::uint64_t length = varint();
    if (length > bytes_.size() - position_) {
      fail("a field declares " + std::to_string(length) + " bytes but only " +
           std::to_string(bytes_.size() - position_) + " remain");
    }
    start = base_ + position_;
    const auto field = bytes_.subspan(position_, static_cast<std::size_t>(length));
    position_ += static_cast<std::size_t>(length);
    return field;
  }

  void skip(std::uint32_t type) {
    std::size_t ignored = 0;
    switch (type) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        if (bytes_.size() - position_ < 8) fail("an 8-byte value runs past the end");
        position_ += 8;
        return;
      case kLengthDelimited:
        delimited(ignored);
        return;
      case kFixed32:
        fixed32();
        return;
      default:
        fail("wire type " + std::to_string(type) + " is not valid here");
    }
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw IoError((what_.empty() ? std::string() : what_ + ": ") + "malformed tf.train.Example: " +
                  problem + " (at byte " + std::to_string(base_ + position_) + ")");
  }

  const std::string& what() const { return what_; }

 private:
  std::span<const std::uint8_t> bytes_;
  const std::string& what_;
  std::size_t base_;
  std::size_t position_ = 0;
};

struct ParsedFeature {
  enum class Kind { none, bytes, float32, int64 } kind = Kind::none;
  std::vector<std::span<const std::uint8_t>> bytes;
  std::vector<float> floats;
  std::vector<std::int64_t> integers;
};

void parse_list(ParsedFeature& feature, std::span<const std::uint8_t> list, std::size_t base,
                const std::string& what) {
  WireReader reader(list, what, base);
  while (!reader.done()) {
    const std::uint64_t tag = reader.varint();
    const auto type = static_cast<std::uint32_t>(tag & 7);
    if ((tag >> 3) != 1) {
      reader.skip(type);
      continue;
    }
    std::size_t start = 0;
    switch (feature.kind) {
      case ParsedFeature::Kind::bytes:
        if (type != kLengthDelimited) reader.fail("a bytes_list value is not length-delimited");
        feature.bytes.push_back(reader.delimited(start));
        break;
      case ParsedFeature::Kind::float32:
        if (type == kFixed32) {
          feature.floats.push_back(std::bit_cast<float>(reader.fixed32()));
        } else if (type == kLengthDelimited) {
          const auto packed = reader.delimited(start);
          if (packed.size() % 4 != 0) {
            reader.fail("a packed float_list of " + std::to_string(packed.size()) +
                        " bytes is not a whole number of floats");
          }
          for (std::size_t i = 0; i < packed.size(); i += 4) {
            std::uint32_t bits = 0;
            for (int b = 3; b >= 0; --b)
              bits = (bits << 8) | packed[i + static_cast<std::size_t>(b)];
            feature.floats.push_back(std::bit_cast<float>(bits));
          }
        } else {
          reader.fail("a float_list value has wire type " + std::to_string(type));
        }
        break;
      case ParsedFeature::Kind::int64:
        if (type == kVarint) {
          feature.integers.push_back(static_cast<std::int64_t>(reader.varint()));
        } else if (type == kLengthDelimited) {
          const auto packed = reader.delimited(start);
          WireReader values(packed, what, start);
          while (!values.done())
            feature.integers.push_back(static_cast<std::int64_t>(values.varint()));
        } else {
          reader.fail("an int64_list value has wire type " + std::to_string(type));
        }
        break;
      case ParsedFeature::Kind::none:
        reader.skip(type);
        break;
    }
  }
}

ParsedFeature parse_feature(std::span<const std::uint8_t> bytes, std::size_t base,
                            const std::string& what) {
  ParsedFeature feature;
  WireReader reader(bytes, what, base);
  while (!reader.done()) {
    const std::uint64_t tag = reader.varint();
    const auto field = tag >> 3;
    const auto type = static_cast<std::uint32_t>(tag & 7);
    if (field < 1 || field > 3 || type != kLengthDelimited) {
      reader.skip(type);
      continue;
    }
    std::size_t start = 0;
    const auto list = reader.delimited(start);
    // A oneof: the last list given wins, as protobuf parsing has it.
    feature = ParsedFeature{};
    feature.kind = field == 1   ? ParsedFeature::Kind::bytes
                   : field == 2 ? ParsedFeature::Kind::float32
                                : ParsedFeature::Kind::int64;
    parse_list(feature, list, start, what);
  }
  return feature;
}

std::map<std::string, ParsedFeature> parse_features(std::span<const std::uint8_t> serialized,
                                                    const std::string& what) {
  std::map<std::string, ParsedFeature> features;
  WireReader example(serialized, what);
  while (!example.done()) {
    const std::uint64_t tag = example.varint();
    const auto type = static_cast<std::uint32_t>(tag & 7);
    if ((tag >> 3) != 1 || type != kLengthDelimited) {
      example.skip(type);
      continue;
    }
    std::size_t features_start = 0;
    WireReader entries(example.delimited(features_start), what, features_start);
    while (!entries.done()) {
      const std::uint64_t entry_tag = entries.varint();
      const auto entry_type = static_cast<std::uint32_t>(entry_tag & 7);
      if ((entry_tag >> 3) != 1 || entry_type != kLengthDelimited) {
        entries.skip(entry_type);
        continue;
      }
      std::size_t entry_start = 0;
      WireReader entry(entries.delimited(entry_start), what, entry_start);
      std::string key;
      ParsedFeature value;
      while (!entry.done()) {
        const std::uint64_t field_tag = entry.varint();
        const auto field = field_tag >> 3;
        const auto field_type = static_cast<std::uint32_t>(field_tag & 7);
        if ((field != 1 && field != 2) || field_type != kLengthDelimited) {
          entry.skip(field_type);
          continue;
        }
        std::size_t start = 0;
        const auto bytes = entry.delimited(start);
        if (field == 1) {
          key.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        } else {
          value = parse_feature(bytes, start, what);
        }
      }
      features[key] = std::move(value);
    }
  }
  return features;
}

const char* kind_name(ParsedFeature::Kind kind) {
  switch (kind) {
    case ParsedFeature::Kind::bytes:
      return "a bytes_list";
    case ParsedFeature::Kind::float32:
      return "a float_list";
    case ParsedFeature::Kind::int64:
      return "an int64_list";
    case ParsedFeature::Kind::none:
      return "no list";
  }
  return "?";
}

const char* kind_name(FeatureSpec::Kind kind) {
  switch (kind) {
    case FeatureSpec::Kind::bytes:
      return "bytes";
    case FeatureSpec::Kind::float32:
      return "float32";
    case FeatureSpec::Kind::int64:
      return "int64";
  }
  return "?";
}

Tensor bytes_tensor(std::span<const std::uint8_t> bytes, const Shape& shape) {
  Tensor tensor = Tensor::empty(shape, DType::u8);
  if (!bytes.empty()) std::memcpy(tensor.raw_data(), bytes.data(), bytes.size());
  return tensor;
}

template <typename Source>
Tensor numeric_tensor(const std::vector<Source>& values, const Shape& shape, DType dtype) {
  Tensor tensor = Tensor::empty(shape, dtype);
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(tensor.raw_data());
    for (std::size_t i = 0; i < values.size(); ++i)
      out[i] = convert_element<T>(values[i]);
  });
  return tensor;
}

// Tensors of a feature without a spec: rank-1 of the list's natural type.
Tensor natural_tensor(const std::string& name, const ParsedFeature& feature,
                      const std::string& what) {
  switch (feature.kind) {
    case ParsedFeature::Kind::bytes: {
      if (feature.bytes.empty()) return Tensor::empty({0}, DType::u8);
      if (feature.bytes.size() == 1) {
        return bytes_tensor(feature.bytes[0], {static_cast<std::int64_t>(feature.bytes[0].size())});
      }
      const std::size_t length = feature.bytes[0].size();
      for (const auto& value : feature.bytes) {
        if (value.size() != length) {
          throw InvalidArgument((what.empty() ? std::string() : what + ": ") + "feature '" + name +
                                "' holds " + std::to_string(feature.bytes.size()) +
                                " byte strings of different lengths; pass an ExampleSpec that "
                                "leaves it out, or write one string per feature");
        }
      }
      Tensor tensor = Tensor::empty(
          {static_cast<std::int64_t>(feature.bytes.size()), static_cast<std::int64_t>(length)},
          DType::u8);
      auto* out = static_cast<std::uint8_t*>(tensor.raw_data());
      for (std::size_t i = 0; i < feature.bytes.size(); ++i) {
        if (length > 0) std::memcpy(out + i * length, feature.bytes[i].data(), length);
      }
      return tensor;
    }
    case ParsedFeature::Kind::float32:
      return numeric_tensor(feature.floats, {static_cast<std::int64_t>(feature.floats.size())},
                            DType::f32);
    case ParsedFeature::Kind::int64:
      return numeric_tensor(feature.integers, {static_cast<std::int64_t>(feature.integers.size())},
                            DType::i64);
    case ParsedFeature::Kind::none:
      return Tensor::empty({0}, DType::f32);
  }
  return {};
}

// `shape` with its -1 extent (if any) resolved so that it holds `count` elements.
Shape resolve_shape(const Shape& shape, std::size_t count, const std::string& problem_prefix) {
  Shape resolved = shape;
  std::int64_t known = 1;
  int unknown_axis = -1;
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] == -1) {
      if (unknown_axis >= 0) {
        throw InvalidArgument(problem_prefix + "the spec's shape " + shape_str(shape) +
                              " has more than one -1 extent; give at most one");
      }
      unknown_axis = static_cast<int>(axis);
    } else if (shape[axis] < 0) {
      throw InvalidArgument(problem_prefix + "the spec's shape " + shape_str(shape) +
                            " has a negative extent; use -1 for 'any length'");
    } else {
      known *= shape[axis];
    }
  }
  const auto total = static_cast<std::int64_t>(count);
  if (unknown_axis >= 0) {
    if (known == 0 || total % known != 0) {
      throw InvalidArgument(problem_prefix + std::to_string(count) +
                            " values do not fill the spec's shape " + shape_str(shape));
    }
    resolved[static_cast<std::size_t>(unknown_axis)] = total / known;
  } else if (known != total) {
    throw InvalidArgument(problem_prefix + std::to_string(count) +
                          " values do not fill the spec's shape " + shape_str(shape) + " (" +
                          std::to_string(known) + " elements)");
  }
  return resolved;
}

// Integers the spec's dtype cannot hold are refused, not wrapped: the one place an int64_list
// narrows (a TFRecord label of 2^62 read as i32 used to become class 0).
void require_representable(const std::vector<std::int64_t>& values, DType dtype,
                           const std::string& prefix) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, std::int64_t>) {
      const auto low = static_cast<std::int64_t>(std::numeric_limits<T>::min());
      const auto high = static_cast<std::int64_t>(std::numeric_limits<T>::max());
      for (const std::int64_t value : values) {
        if (value < low || value > high) {
          throw InvalidArgument(prefix + "the value " + std::to_string(value) + " does not fit " +
                                dtype_name(dtype) + " (" + std::to_string(low) + " to " +
                                std::to_string(high) +
                                "); as a label it names a class no classifier has: check the "
                                "data (or the feature read as the label)");
        }
      }
    }
  });
}

Tensor spec_tensor(const std::string& name, const FeatureSpec& spec, const ParsedFeature* feature,
                   const std::string& what) {
  const std::string prefix =
      (what.empty() ? std::string() : what + ": ") + "feature '" + name + "': ";
  if (spec.kind == FeatureSpec::Kind::bytes && spec.dtype != DType::u8) {
    throw InvalidArgument(prefix + "a bytes feature becomes u8, not " + dtype_name(spec.dtype) +
                          "; set dtype to DType::u8 and cast() afterwards");
  }
  if (feature == nullptr || feature->kind == ParsedFeature::Kind::none) {
    if (!spec.default_value) {
      throw InvalidArgument(prefix + "absent from the record and the spec gives no default_value");
    }
    const std::vector<double>& defaults = *spec.default_value;
    const bool fixed_shape =
        std::none_of(spec.shape.begin(), spec.shape.end(), [](std::int64_t e) { return e < 0; });
    // One default value fills a fixed shape, as tf.io.FixedLenFeature's scalar default does.
    if (defaults.size() == 1 && fixed_shape)
      return Tensor::full(spec.shape, defaults[0], spec.dtype);
    return numeric_tensor(defaults, resolve_shape(spec.shape, defaults.size(), prefix), spec.dtype);
  }
  const bool kind_matches =
      (spec.kind == FeatureSpec::Kind::bytes && feature->kind == ParsedFeature::Kind::bytes) ||
      (spec.kind == FeatureSpec::Kind::float32 && feature->kind == ParsedFeature::Kind::float32) ||
      (spec.kind == FeatureSpec::Kind::int64 && feature->kind == ParsedFeature::Kind::int64);
  if (!kind_matches) {
    throw InvalidArgument(prefix + "the record holds " + kind_name(feature->kind) +
                          " but the spec expects " + kind_name(spec.kind));
  }
  switch (spec.kind) {
    case FeatureSpec::Kind::bytes:
      if (feature->bytes.size() != 1) {
        throw InvalidArgument(prefix + "the record holds " + std::to_string(feature->bytes.size()) +
                              " byte strings; a bytes spec takes exactly one");
      }
      return bytes_tensor(feature->bytes[0],
                          resolve_shape(spec.shape, feature->bytes[0].size(), prefix));
    case FeatureSpec::Kind::float32:
      return numeric_tensor(feature->floats,
                            resolve_shape(spec.shape, feature->floats.size(), prefix), spec.dtype);
    case FeatureSpec::Kind::int64:
      require_representable(feature->integers, spec.dtype, prefix);
      return numeric_tensor(feature->integers,
                            resolve_shape(spec.shape, feature->integers.size(), prefix),
                            spec.dtype);
  }
  return {};
}

}  // namespace

FeatureSpec FeatureSpec::int64(Shape shape, DType dtype) {
  return FeatureSpec{Kind::int64, dtype, std::move(shape), std::nullopt};
}
FeatureSpec FeatureSpec::float32(Shape shape, DType dtype) {
  return FeatureSpec{Kind::float32, dtype, std::move(shape), std::nullopt};
}
FeatureSpec FeatureSpec::bytes(Shape shape) {
  return FeatureSpec{Kind::bytes, DType::u8, std::move(shape), std::nullopt};
}

std::vector<std::uint8_t> serialize_example(const Element& element) {
  std::vector<std::pair<std::string, const Tensor*>> sorted;
  for (const auto& [name, value] : element)
    sorted.emplace_back(name, &value);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  Bytes features;
  for (const auto& [name, value] : sorted) {
    Bytes entry;
    put_bytes(entry, 1, reinterpret_cast<const std::uint8_t*>(name.data()), name.size());
    put_message(entry, 2, encode_feature(name, *value));
    put_message(features, 1, entry);
  }
  Bytes example;
  put_message(example, 1, features);
  return example;
}

Element parse_example(std::span<const std::uint8_t> serialized, const ExampleSpec* spec,
                      const std::string& what) {
  const std::map<std::string, ParsedFeature> features = parse_features(serialized, what);
  Element element;
  if (spec == nullptr || spec->empty()) {
    for (const auto& [name, feature] : features)
      element.set(name, natural_tensor(name, feature, what));
    return element;
  }
  for (const auto& [name, feature_spec] : *spec) {
    const auto found = features.find(name);
    element.set(name, spec_tensor(name, feature_spec,
                                  found == features.end() ? nullptr : &found->second, what));
  }
  return element;
}

MapFn parse_examples(ExampleSpec spec, std::string key) {
  return [spec = std::move(spec), key = std::move(key)](Element element) {
    const Tensor& record = element.at(key);
    if (record.dtype() != DType::u8 || record.rank() != 1) {
      throw InvalidArgument("parse_examples: component '" + key + "' is " +
                            dtype_name(record.dtype()) + " " + shape_str(record.shape()) +
                            ", not a serialized record (u8 of rank 1)");
    }
    Element parsed = parse_example(
        std::span<const std::uint8_t>(static_cast<const std::uint8_t*>(record.raw_data()),
                                      static_cast<std::size_t>(record.numel())),
        &spec);
    parsed.set_origin(element.origin());
    parsed.set_random_key(element.random_key());
    return parsed;
  };
}

}  // namespace tandem::data
