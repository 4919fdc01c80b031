#include <gtest/gtest.h>

#include <bit>
#include <string>

#include "data/idx_files.h"
#include "tandem/data.h"
#include "tandem/pipeline.h"

namespace tandem::data {
namespace {

using testing::append_big_endian;
using testing::Bytes;
using testing::concat;
using testing::idx_header;
using testing::ScratchDir;
using testing::write_file;

// Runs `body`, expecting an IoError whose message contains every one of `parts`.
template <typename Body>
void expect_io_error(Body&& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "expected an IoError";
  } catch (const IoError& error) {
    const std::string message = error.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  }
}

class IdxTest : public ::testing::TestWithParam<std::string> {
 protected:
  // A file name with the suffix under test ("" plain, ".gz" gzip).
  std::string file(const std::string& stem) const { return dir_.file(stem + GetParam()); }
  ScratchDir dir_;
};

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, IdxTest, ::testing::Values("", ".gz"),
                         [](const auto& info) { return info.param.empty() ? "plain" : "gzip"; });

TEST_P(IdxTest, ReadsUnsignedBytesWithShape) {
  Bytes pixels;
  for (int i = 0; i < 2 * 3 * 4; ++i)
    pixels.push_back(static_cast<unsigned char>(i * 10));
  const std::string path = file("images");
  write_file(path, concat(idx_header(0x08, {2, 3, 4}), pixels));
  const Tensor images = read_idx(path);
  EXPECT_EQ(images.dtype(), DType::u8);
  EXPECT_EQ(images.shape(), (Shape{2, 3, 4}));
  const auto values = images.to_vector<int>();
  for (int i = 0; i < 24; ++i)
    EXPECT_EQ(values[static_cast<std::size_t>(i)], (i * 10) % 256);
}

TEST_P(IdxTest, ReadsSignedIntegersBigEndianIntoI32) {
  const std::string i8_path = file("i8");
  write_file(i8_path, concat(idx_header(0x09, {3}), Bytes{0x7F, 0x80, 0xFF}));
  EXPECT_EQ(read_idx(i8_path).dtype(), DType::i32);
  EXPECT_EQ(read_idx(i8_path).to_vector<int>(), (std::vector<int>{127, -128, -1}));

  const std::string i16_path = file("i16");
  write_file(i16_path, concat(idx_header(0x0B, {3}), Bytes{0x01, 0x2C, 0xFF, 0xFE, 0x80, 0x00}));
  EXPECT_EQ(read_idx(i16_path).to_vector<int>(), (std::vector<int>{300, -2, -32768}));

  Bytes i32_data;
  append_big_endian(i32_data, static_cast<std::uint32_t>(-123456789), 4);
  append_big_endian(i32_data, 2000000000u, 4);
  const std::string i32_path = file("i32");
  write_file(i32_path, concat(idx_header(0x0C, {1, 2}), i32_data));
  const Tensor i32 = read_idx(i32_path);
  EXPECT_EQ(i32.shape(), (Shape{1, 2}));
  EXPECT_EQ(i32.to_vector<int>(), (std::vector<int>{-123456789, 2000000000}));
}

TEST_P(IdxTest, ReadsFloatsBigEndian) {
  Bytes f32_data;
  for (float value : {1.5f, -0.25f, 3.0e-8f})
    append_big_endian(f32_data, std::bit_cast<std::uint32_t>(value), 4);
  const std::string f32_path = file("f32");
  write_file(f32_path, concat(idx_header(0x0D, {3}), f32_data));
  const Tensor f32 = read_idx(f32_path);
  EXPECT_EQ(f32.dtype(), DType::f32);
  EXPECT_EQ(f32.to_vector<float>(), (std::vector<float>{1.5f, -0.25f, 3.0e-8f}));

  Bytes f64_data;
  for (double value : {-2.0, 0.1})
    append_big_endian(f64_data, std::bit_cast<std::uint64_t>(value), 8);
  const std::string f64_path = file("f64");
  write_file(f64_path, concat(idx_header(0x0E, {2, 1}), f64_data));
  const Tensor f64 = read_idx(f64_path);
  EXPECT_EQ(f64.dtype(), DType::f64);
  EXPECT_EQ(f64.to_vector<double>(), (std::vector<double>{-2.0, 0.1}));
}

TEST_P(IdxTest, TruncatedDataSaysHowManyBytesWereExpectedAndFound) {
  const std::string path = file("short");
  write_file(path, concat(idx_header(0x08, {2, 3, 4}), Bytes(10, 1)));
  expect_io_error(
      [&] { read_idx(path); },
      {path, "declares shape (2, 3, 4), 24 bytes of data, but only 10 follow", "cut short"});
}

TEST_P(IdxTest, TruncatedHeaderIsAnError) {
  const std::string path = file("header");
  Bytes bytes = idx_header(0x08, {2, 3, 4});
  bytes.resize(9);
  write_file(path, bytes);
  expect_io_error([&] { read_idx(path); }, {path, "declares 3 dimensions", "truncated"});
}

TEST_P(IdxTest, EmptyFileIsAnError) {
  const std::string path = file("empty");
  write_file(path, {});
  expect_io_error([&] { read_idx(path); }, {path, "is empty (0 bytes"});
  const std::string short_path = file("three");
  write_file(short_path, Bytes{0, 0, 8});
  expect_io_error([&] { read_idx(short_path); }, {short_path, "too short for an IDX header"});
}

TEST_P(IdxTest, AFileOfTheOtherRoleIsNamedBeforeItsDataIsRead) {
  // An images header (rank 3) given as labels: no "truncated" for a file that is whole.
  const std::string images = file("images");
  write_file(images, concat(idx_header(0x08, {2, 3, 4}), Bytes(24, 1)));
  const std::string labels = file("labels");
  write_file(labels, concat(idx_header(0x08, {2}), Bytes(2, 1)));
  expect_io_error([&] { data::Pipeline::idx(labels, images); },
                  {labels, "declares 1 dimension (2,)", "as a labels file's does",
                   "pass the *-images-idx3-ubyte file as the images"});
  expect_io_error([&] { data::Pipeline::idx(images, images); },
                  {images, "declares 3 dimensions (2, 3, 4)", "as an images file's does",
                   "a labels file has 1 (magic 0x00000801)"});
}

TEST_P(IdxTest, ExtraDataAfterTheElementsIsAnError) {
  const std::string path = file("long");
  write_file(path, concat(idx_header(0x08, {2, 2}), Bytes(7, 1)));
  expect_io_error([&] { read_idx(path); },
                  {path, "expected 4 bytes of data after the header, found 7"});
}

TEST_P(IdxTest, WrongMagicNumberIsNamed) {
  const std::string path = file("magic");
  write_file(path, concat(Bytes{0x12, 0x34, 0x08, 0x01, 0, 0, 0, 1}, Bytes{5}));
  expect_io_error([&] { read_idx(path); }, {path, "not an IDX file", "0x12340801"});

  const std::string bad_type = file("type");
  write_file(bad_type, concat(idx_header(0x0A, {1}), Bytes{5}));
  expect_io_error([&] { read_idx(bad_type); }, {bad_type, "magic number 0x00000A01"});
}

TEST_P(IdxTest, ImpossibleShapesAreRejected) {
  const std::string zero_dims = file("rank0");
  write_file(zero_dims, Bytes{0, 0, 0x08, 0});
  expect_io_error([&] { read_idx(zero_dims); }, {zero_dims, "impossible shape", "0 dimensions"});

  const std::string zero_extent = file("zero");
  write_file(zero_extent, concat(idx_header(0x08, {3, 0, 2}), Bytes(6, 0)));
  expect_io_error([&] { read_idx(zero_extent); },
                  {zero_extent, "impossible shape (3, 0, 2)", "dimension 1 is 0"});

  const std::string overflow = file("overflow");
  write_file(overflow, concat(idx_header(0x0E, {0xFFFFFFFF, 0xFFFFFFFF}), Bytes(8, 0)));
  expect_io_error([&] { read_idx(overflow); }, {overflow, "impossible shape", "overflows"});
}

TEST_P(IdxTest, HugeDeclaredShapeReportsTruncationWithoutAllocatingIt) {
  // 2^40 bytes declared, 16 present: must fail fast with the counts, not try to allocate 1 TiB.
  const std::string path = file("huge");
  write_file(path, concat(idx_header(0x08, {1u << 20, 1u << 20}), Bytes(16, 3)));
  expect_io_error([&] { read_idx(path); },
                  {path, "1099511627776 bytes of data, but only 16 follow"});
}

TEST(Idx, MissingFileAndDirectoryAreNamed) {
  ScratchDir dir;
  const std::string missing = dir.file("nope-idx1-ubyte.gz");
  expect_io_error([&] { read_idx(missing); }, {missing, "no such file"});
  expect_io_error([&] { read_idx(dir.path().string()); }, {dir.path().string(), "is a directory"});
}

TEST(Idx, CorruptGzipStreamIsAnError) {
  ScratchDir dir;
  const std::string source = dir.file("good.gz");
  Bytes pixels(5000);
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<unsigned char>(i * 31 % 251);
  write_file(source, concat(idx_header(0x08, {50, 100}), pixels));
  Bytes compressed = testing::read_file(source);
  ASSERT_GT(compressed.size(), 40u);
  // Flip bytes in the middle of the deflate stream: zlib reports bad data or a CRC mismatch.
  for (std::size_t i = 20; i < 30; ++i)
    compressed[i] ^= 0x5A;
  const std::string corrupt = dir.file("corrupt.gz");
  write_file(dir.file("corrupt"), compressed);
  std::filesystem::rename(dir.file("corrupt"), corrupt);
  expect_io_error([&] { read_idx(corrupt); }, {corrupt});

  // Cut the gzip stream short: the elements are missing.
  compressed = testing::read_file(source);
  compressed.resize(compressed.size() / 2);
  const std::string cut = dir.file("cut.gz");
  write_file(dir.file("cut"), compressed);
  std::filesystem::rename(dir.file("cut"), cut);
  expect_io_error([&] { read_idx(cut); }, {cut});
}

}  // namespace
}  // namespace tandem::data
