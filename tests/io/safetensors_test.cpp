// The safetensors reader and writer: round trips of every dtype, the layout the specification
// asks for, files built by hand from the specification, and the damage a reader must catch
// (flipped bytes, truncation, wrong header lengths, inconsistent headers).
#include <gtest/gtest.h>

#include <cstring>

#include "io/file_io.h"
#include "io/io_support.h"

namespace tandem {
namespace {

using testing::Bytes;
using testing::io_error_of;
using testing::same_bits;
using testing::ScratchDir;

io::NamedTensors every_dtype() {
  return {
      {"f32", Tensor::from_vector<float>({1.5f, -2.25f, 3e-8f, 1e30f, 0.0f, -0.0f}, {2, 3})},
      {"f64", Tensor::from_vector<double>({3.141592653589793, -1e-300}, {2})},
      {"bf16", cast(Tensor::from_vector<float>({1.0f, -3.5f, 100.0f}, {3}), DType::bf16)},
      {"f16", cast(Tensor::from_vector<float>({0.5f, 65504.0f}, {1, 2}), DType::f16)},
      {"i32", Tensor::from_vector<std::int32_t>({-7, 2147483647}, {2})},
      {"i64", Tensor::from_vector<std::int64_t>({-9007199254740993LL}, {1})},
      {"u8", Tensor::from_vector<std::uint8_t>({0, 255, 7, 8}, {2, 2})},
      {"bool", Tensor::from_vector<bool>({true, false, true}, {3})},
      {"scalar", Tensor::scalar(42.0)},
      {"empty", Tensor::zeros({0, 4})},
  };
}

std::uint64_t header_length(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = length << 8 | bytes[static_cast<std::size_t>(i)];
  return length;
}

// A file built from the specification by hand: no Tandem metadata, keys in another order than
// the data, the header padded with spaces.
std::vector<std::uint8_t> handmade_file() {
  const std::string header =
      R"({"b":{"dtype":"I32","shape":[2],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}})"
      "      ";
  std::vector<std::uint8_t> bytes;
  for (int shift = 0; shift < 64; shift += 8)
    bytes.push_back(static_cast<std::uint8_t>(header.size() >> shift));
  bytes.insert(bytes.end(), header.begin(), header.end());
  const float a[2] = {0.25f, -8.0f};
  const std::int32_t b[2] = {3, -4};
  const auto* a_bytes = reinterpret_cast<const std::uint8_t*>(a);
  const auto* b_bytes = reinterpret_cast<const std::uint8_t*>(b);
  bytes.insert(bytes.end(), a_bytes, a_bytes + 8);
  bytes.insert(bytes.end(), b_bytes, b_bytes + 8);
  return bytes;
}

// The bytes of a file whose JSON header is `header`, with `data` after it.
std::vector<std::uint8_t> file_with_header(const std::string& header, std::size_t data = 0) {
  std::vector<std::uint8_t> bytes;
  for (int shift = 0; shift < 64; shift += 8)
    bytes.push_back(static_cast<std::uint8_t>(header.size() >> shift));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data, 0);
  return bytes;
}

TEST(Safetensors, RoundTripsEveryDtypeAndShape) {
  const io::NamedTensors tensors = every_dtype();
  const io::Safetensors read =
      io::decode_safetensors(io::encode_safetensors(tensors, {{"note", "hello"}}), "memory");
  ASSERT_EQ(read.tensors.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(read.tensors[i].first, tensors[i].first);
    EXPECT_TRUE(same_bits(read.tensors[i].second, tensors[i].second)) << tensors[i].first;
  }
  EXPECT_EQ(read.metadata.at("note"), "hello");
  EXPECT_EQ(read.metadata.count(io::kDataChecksumKey), 1u);
  ASSERT_NE(read.find("bool"), nullptr);
  EXPECT_EQ(read.find("missing"), nullptr);
}

TEST(Safetensors, LaysOutTheFileAsTheSpecificationSays) {
  const std::vector<std::uint8_t> bytes = io::encode_safetensors(every_dtype());
  const std::uint64_t length = header_length(bytes);
  EXPECT_EQ((8 + length) % 8, 0u) << "the data must start 8-byte aligned";
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(length));
  EXPECT_EQ(header.front(), '{');
  EXPECT_NE(header.find(R"("f32":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find(R"("bool":{"dtype":"BOOL","shape":[3])"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("scalar":{"dtype":"F32","shape":[])"), std::string::npos) << header;
  // The f32 tensor's data is its little-endian bytes, first in the data section.
  float first = 0.0f;
  std::memcpy(&first, bytes.data() + 8 + length, sizeof first);
  EXPECT_EQ(first, 1.5f);
}

TEST(Safetensors, ReadsAFileWrittenFromTheSpecificationByHand) {
  const io::Safetensors read = io::decode_safetensors(handmade_file(), "handmade");
  ASSERT_EQ(read.tensors.size(), 2u);
  EXPECT_EQ(read.tensors[0].first, "a");  // data order, not key order
  EXPECT_EQ(read.tensors[0].second.to_vector<float>(), (std::vector<float>{0.25f, -8.0f}));
  EXPECT_EQ(read.tensors[1].second.to_vector<std::int32_t>(), (std::vector<std::int32_t>{3, -4}));
  EXPECT_EQ(read.metadata.at("format"), "pt");
}

TEST(Safetensors, EveryFlippedDataByteIsDetected) {
  const std::vector<std::uint8_t> good = io::encode_safetensors(every_dtype());
  const std::size_t data_start = 8 + header_length(good);
  for (std::size_t offset = data_start; offset < good.size(); ++offset) {
    std::vector<std::uint8_t> bad = good;
    bad[offset] ^= 0x01;
    const std::string message =
        io_error_of([&] { io::decode_safetensors(bad, "model.safetensors"); });
    EXPECT_NE(message.find("model.safetensors: the data's CRC-32C"), std::string::npos)
        << "flip at " << offset << ": " << message;
  }
}

TEST(Safetensors, FlippedHeaderBytesAreDetected) {
  // A flip in the length, the JSON syntax, a dtype, a shape, an offset or the checksum is caught
  // by the reader itself; a flip inside a name or a metadata value makes a well-formed file that
  // only the checksums of checkpoints and saved models (which cover whole files) can tell.
  const std::vector<std::uint8_t> good = io::encode_safetensors(every_dtype());
  const std::string header(good.begin() + 8,
                           good.begin() + 8 + static_cast<long>(header_length(good)));
  std::size_t detected = 0;
  std::size_t total = 0;
  for (std::size_t offset = 0; offset < 8 + header.size(); ++offset) {
    std::vector<std::uint8_t> bad = good;
    bad[offset] ^= 0x01;
    ++total;
    try {
      io::decode_safetensors(bad, "file");
    } catch (const IoError&) {
      ++detected;
    }
  }
  // Names and metadata values are a small part of the header.
  EXPECT_GT(static_cast<double>(detected), 0.6 * static_cast<double>(total))
      << detected << " of " << total << " header flips detected";
  for (std::size_t offset = 0; offset < 8; ++offset) {
    std::vector<std::uint8_t> bad = good;
    bad[offset] ^= 0x01;
    EXPECT_NE(io_error_of([&] { io::decode_safetensors(bad, "file"); }), "(no IoError thrown)")
        << "length byte " << offset;
  }
}

TEST(Safetensors, EveryTruncationIsDetected) {
  const std::vector<std::uint8_t> good = io::encode_safetensors(every_dtype());
  for (std::size_t size = 0; size < good.size(); ++size) {
    const std::vector<std::uint8_t> cut(good.begin(), good.begin() + static_cast<long>(size));
    const std::string message =
        io_error_of([&] { io::decode_safetensors(cut, "cut.safetensors"); });
    EXPECT_TRUE(message.starts_with("cut.safetensors: ")) << "size " << size << ": " << message;
    if (size >= 8 + header_length(good)) {
      EXPECT_NE(message.find("truncated"), std::string::npos) << message;
    }
  }
}

TEST(Safetensors, WrongHeaderLengthsAreDetected) {
  const std::vector<std::uint8_t> good = io::encode_safetensors(every_dtype());
  const std::uint64_t length = header_length(good);
  for (const std::uint64_t wrong :
       {length - 1, length + 1, length + 8, std::uint64_t{0}, std::uint64_t{good.size()},
        std::uint64_t{1} << 40, ~std::uint64_t{0}}) {
    std::vector<std::uint8_t> bad = good;
    for (int i = 0; i < 8; ++i)
      bad[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(wrong >> (8 * i));
    const std::string message = io_error_of([&] { io::decode_safetensors(bad, "x.safetensors"); });
    EXPECT_TRUE(message.starts_with("x.safetensors: ")) << "length " << wrong << ": " << message;
  }
  EXPECT_NE(io_error_of([&] {
              io::decode_safetensors(std::vector<std::uint8_t>(5), "tiny");
            }).find("too short"),
            std::string::npos);
}

TEST(Safetensors, InconsistentHeadersAreRejectedNamingTheProblem) {
  struct Case {
    std::string header;
    std::size_t data;
    std::string expected;
  };
  const std::vector<Case> cases{
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "overlap or leave a gap"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       12, "overlap or leave a gap"},
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "needs 12 bytes"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 16, "trailing bytes"},
      {R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8, "unknown dtype 'Q7'"},
      {R"({"a":{"dtype":"I16","shape":[2],"data_offsets":[0,4]}})", 4, "Tandem cannot hold"},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "non-negative integers"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8, "end before they begin"},
      {R"({"a":{"dtype":"F32","shape":[2]}})", 8, "lacks dtype, shape or data_offsets"},
      {R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", 8,
       "too many"},
      {R"({"__metadata__":{"n":3}})", 0, "is not a string"},
      {R"([1,2])", 0, "does not start with '{'"},
      {R"({"a":)", 0, "malformed"},
      {R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", 0, ""},
  };
  for (const Case& test : cases) {
    std::vector<std::uint8_t> bytes = file_with_header(test.header, test.data);
    if (test.expected.empty()) {
      bytes.push_back(1);
      bytes.push_back(2);  // a BOOL byte that is neither 0 nor 1
    }
    const std::string message = io_error_of([&] { io::decode_safetensors(bytes, "bad"); });
    EXPECT_NE(message.find(test.expected.empty() ? "only 0 and 1" : test.expected),
              std::string::npos)
        << test.header << " -> " << message;
  }
}

TEST(Safetensors, WritingRejectsNamesThatCannotBeRead) {
  const Tensor x = Tensor::zeros({2});
  EXPECT_THROW(io::encode_safetensors({{"a", x}, {"a", x}}), InvalidArgument);
  EXPECT_THROW(io::encode_safetensors({{"", x}}), InvalidArgument);
  EXPECT_THROW(io::encode_safetensors({{"__metadata__", x}}), InvalidArgument);
  EXPECT_THROW(io::encode_safetensors({{"a", Tensor()}}), InvalidArgument);
}

TEST(Safetensors, SavingReplacesTheFileAtomically) {
  ScratchDir scratch;
  const std::string path = scratch.file("weights.safetensors");
  io::save_safetensors(path, {{"x", Tensor::ones({3})}});
  io::save_safetensors(path, {{"x", Tensor::full({3}, 2.0)}});
  EXPECT_EQ(io::load_safetensors(path).tensors.at(0).second.to_vector<float>(),
            (std::vector<float>{2, 2, 2}));
  EXPECT_TRUE(testing::hidden_entries(scratch.path()).empty());
  EXPECT_NE(io_error_of([&] { io::load_safetensors(scratch.file("absent")); }).find("absent"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
