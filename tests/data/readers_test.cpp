// The readers on files the tests write: TFRecord (and tf.train.Example), CIFAR-10, IDX pairs and
// image folders, including every kind of bad input: truncation, CRC mismatches, labels out of
// range, files that disappear, and what on_error=skip does with them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/crc32c.h"
#include "data/idx_files.h"
#include "support/errors.h"
#include "tandem/image.h"
#include "tandem/tfrecord.h"

namespace tandem::data {
namespace {

using testing::Bytes;
using testing::ScratchDir;

template <typename Body>
std::string io_error_of(Body&& body) {
  try {
    body();
  } catch (const IoError& error) {
    return error.what();
  }
  return "(no IoError thrown)";
}

void expect_contains(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& part : parts)
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
  EXPECT_EQ(text.find('\n'), std::string::npos) << "not one line: " << text;
}

Bytes bytes_of(const std::string& text) {
  return Bytes(text.begin(), text.end());
}

std::vector<Bytes> read_records(const std::string& path) {
  std::vector<Bytes> records;
  TFRecordReader reader(path);
  while (std::optional<TFRecordReader::Record> record = reader.next()) {
    const auto* data = static_cast<const std::uint8_t*>(record->data.raw_data());
    records.emplace_back(data, data + record->data.numel());
  }
  return records;
}

void write_records(const std::string& path, const std::vector<Bytes>& records,
                   Compression compression = Compression::none) {
  TFRecordWriter writer(path, compression);
  for (const Bytes& record : records)
    writer.write(record);
  writer.close();
}

// ---- CRC-32C ----

TEST(Crc32c, MatchesTheStandardCheckValues) {
  // RFC 3720's check value and its all-zero / all-one vectors (B.4).
  const Bytes digits = bytes_of("123456789");
  EXPECT_EQ(crc32c(digits), 0xE3069283u);
  EXPECT_EQ(crc32c(Bytes(32, 0x00)), 0x8A9136AAu);
  EXPECT_EQ(crc32c(Bytes(32, 0xFF)), 0x62A8AB43u);
  Bytes ascending(32);
  for (std::size_t i = 0; i < ascending.size(); ++i)
    ascending[i] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  // Extending a CRC piece by piece gives the CRC of the whole.
  const Bytes text = bytes_of("The quick brown fox jumps over the lazy dog, twice over.");
  const std::uint32_t whole = crc32c(text);
  const std::uint32_t first = crc32c({text.data(), 13});
  EXPECT_EQ(crc32c({text.data() + 13, text.size() - 13}, first), whole);
}

// ---- TFRecord ----

TEST(TFRecord, WrittenRecordsReadBackByteIdentically) {
  ScratchDir dir;
  std::vector<Bytes> records{bytes_of("first"), Bytes{}, Bytes(100000, 7), bytes_of("last")};
  for (const Compression compression : {Compression::none, Compression::gzip}) {
    const std::string path =
        dir.file(compression == Compression::gzip ? "r.tfrecord.gz" : "r.tfrecord");
    write_records(path, records, compression);
    EXPECT_EQ(read_records(path), records);
  }
  // The framing of a record is TensorFlow's: 8 + 4 + data + 4 bytes.
  EXPECT_EQ(std::filesystem::file_size(dir.file("r.tfrecord")), 4 * 16 + 5 + 100000 + 4u);
}

TEST(TFRecord, ExamplesRoundTripAndAFileRewrittenFromItsElementsIsIdentical) {
  ScratchDir dir;
  const Pipeline examples = Pipeline::range(20).map([](Element element) {
    const double value = element.at("value").item();
    Element example;
    example.set("image", Tensor::full({2, 3}, value, DType::u8));
    example.set("label", Tensor::scalar(value, DType::i64));
    example.set("weights", Tensor::from_vector<float>({0.5f, static_cast<float>(-value)}, {2}));
    example.set("ids", Tensor::from_vector<std::int64_t>({-1, 1LL << 40}, {2}));
    return example;
  });
  const std::string first = dir.file("first.tfrecord");
  EXPECT_EQ(write_tfrecord(examples, first), 20);
  // Read back with a spec: shapes and types restored.
  const ExampleSpec spec{{"image", FeatureSpec::bytes({2, 3})},
                         {"label", FeatureSpec::int64({}, DType::i32)},
                         {"weights", FeatureSpec::float32({2})},
                         {"ids", FeatureSpec::int64({-1})}};
  const std::vector<Element> parsed =
      Pipeline::tfrecord({first}).map(parse_examples(spec)).collect();
  ASSERT_EQ(parsed.size(), 20u);
  EXPECT_EQ(parsed[7].at("image").shape(), (Shape{2, 3}));
  EXPECT_EQ(parsed[7].at("image").to_vector<int>(), std::vector<int>(6, 7));
  EXPECT_EQ(parsed[7].at("label").dtype(), DType::i32);
  EXPECT_EQ(parsed[7].at("label").item(), 7.0);
  EXPECT_EQ(parsed[7].at("weights").to_vector<float>(), (std::vector<float>{0.5f, -7.0f}));
  EXPECT_EQ(parsed[7].at("ids").to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{-1, 1LL << 40}));
  // Without a spec: rank-1 tensors of the lists' own types; written again, the same bytes.
  const std::string second = dir.file("second.tfrecord");
  EXPECT_EQ(write_tfrecord(Pipeline::tfrecord({first}).map(parse_examples()), second), 20);
  EXPECT_EQ(testing::read_file(second), testing::read_file(first));
}

TEST(TFRecord, LabelsOutsideTheClassesNameTheRecordOrAreSkipped) {
  ScratchDir dir;
  const std::string path = dir.file("labels.tfrecord");
  const Pipeline labels = Pipeline::from_tensor_slices(
      {{"label", Tensor::from_vector<std::int64_t>({0, 9, 10, 3, -1}, {5})}});
  ASSERT_EQ(write_tfrecord(labels, path), 5);
  const Pipeline parsed =
      Pipeline::tfrecord({path}).map(parse_examples({{"label", FeatureSpec::int64()}}));
  // Map errors name the stage and where the element came from: file, record, byte offset.
  expect_contains(io_error_of([&] { parsed.map(check_label(10), {.name = "labels"}).collect(); }),
                  {"map(labels)", path, "record 2 at byte", "label 10 is outside [0, 10)"});
  ElementIterator skipping =
      parsed.map(check_label(10), {.on_error = OnError::skip, .name = "labels"}).start();
  std::vector<std::int64_t> kept;
  while (std::optional<Element> element = skipping.next())
    kept.push_back(static_cast<std::int64_t>(element->at("label").item()));
  EXPECT_EQ(kept, (std::vector<std::int64_t>{0, 9, 3}));
  EXPECT_EQ(skipping.stats().skipped(), 2);
  expect_contains(skipping.stats().skipped_summary(), {"2 bad elements skipped", "label 10"});
  EXPECT_THROW(check_label(0), InvalidArgument);
}

TEST(TFRecord, ExampleSpecDefaultsAndMismatches) {
  Element example;
  example.set("label", Tensor::scalar(3, DType::i64));
  const std::vector<std::uint8_t> bytes = serialize_example(example);
  FeatureSpec with_default = FeatureSpec::float32({2});
  with_default.default_value = std::vector<double>{1.5};
  const ExampleSpec spec{{"label", FeatureSpec::int64()}, {"missing", with_default}};
  const Element parsed = parse_example(bytes, &spec);
  EXPECT_EQ(parsed.at("missing").to_vector<float>(), (std::vector<float>{1.5f, 1.5f}));
  const ExampleSpec wrong_kind{{"label", FeatureSpec::float32()}};
  EXPECT_NE(testing::error_of([&] {
              parse_example(bytes, &wrong_kind, "r");
            }).find("feature 'label': the record holds an int64_list but the spec expects float32"),
            std::string::npos);
  const ExampleSpec absent{{"nothing", FeatureSpec::int64()}};
  EXPECT_NE(testing::error_of([&] { parse_example(bytes, &absent); }).find("no default_value"),
            std::string::npos);
  const ExampleSpec wrong_shape{{"label", FeatureSpec::int64({2})}};
  EXPECT_NE(testing::error_of([&] { parse_example(bytes, &wrong_shape); }).find("do not fill"),
            std::string::npos);
  // An integer the spec's dtype cannot hold is refused, not wrapped (2^62 as i32 was class 0).
  Element huge;
  huge.set("label", Tensor::scalar(static_cast<double>(std::int64_t{1} << 62), DType::i64));
  const ExampleSpec narrow{{"label", FeatureSpec::int64({}, DType::i32)}};
  expect_contains(testing::error_of([&] { parse_example(serialize_example(huge), &narrow, "r"); }),
                  {"r: feature 'label': the value 4611686018427387904 does not fit i32",
                   "-2147483648 to 2147483647"});
  Element negative;
  negative.set("label", Tensor::scalar(-1, DType::i64));
  const ExampleSpec bytes_wide{{"label", FeatureSpec::int64({}, DType::u8)}};
  expect_contains(
      testing::error_of([&] { parse_example(serialize_example(negative), &bytes_wide); }),
      {"the value -1 does not fit u8 (0 to 255)"});
  EXPECT_EQ(parse_example(bytes, &narrow).at("label").item(), 3.0);  // in range: read as it is
  // Malformed bytes are an IoError naming where.
  Bytes cut = bytes;
  cut.pop_back();
  expect_contains(io_error_of([&] { parse_example(cut, nullptr, "x.tfrecord: record 4"); }),
                  {"x.tfrecord: record 4", "malformed tf.train.Example"});
}

TEST(TFRecord, ACrcMismatchNamesTheFileRecordAndOffsetAndCanBeSkipped) {
  ScratchDir dir;
  const std::string path = dir.file("bad.tfrecord");
  write_records(path, {bytes_of("aaaa"), bytes_of("bbbb"), bytes_of("cccc")});
  Bytes file = testing::read_file(path);
  file[20 + 12] ^= 0x01;  // a data byte of record 1 (records are 20 bytes each)
  testing::write_file(path, file);
  TFRecordReader reader(path);
  ASSERT_TRUE(reader.next());
  expect_contains(io_error_of([&] { reader.next(); }),
                  {path, "record 1 at byte 20", "CRC mismatch in the data"});
  // The framing survives a data CRC mismatch: the next record still reads.
  std::optional<TFRecordReader::Record> third = reader.next();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->index, 2);

  expect_contains(io_error_of([&] { Pipeline::tfrecord({path}).collect(); }),
                  {path, "record 1 at byte 20", "CRC mismatch"});
  ElementIterator skipping = Pipeline::tfrecord({path}, {.on_error = OnError::skip}).start();
  std::vector<std::string> kept;
  while (std::optional<Element> element = skipping.next())
    kept.push_back(element->string("record"));
  EXPECT_EQ(kept, (std::vector<std::string>{"aaaa", "cccc"}));
  EXPECT_EQ(skipping.stats().skipped(), 1);

  // A corrupt length cannot be trusted: that is the end of the file.
  file = testing::read_file(dir.file("bad.tfrecord"));
  file[3] ^= 0x40;
  testing::write_file(path, file);
  expect_contains(io_error_of([&] { Pipeline::tfrecord({path}).collect(); }),
                  {path, "record 0 at byte 0", "CRC mismatch in the length"});
}

TEST(TFRecord, TruncatedFilesAreReportedAtTheRecordThatIsCut) {
  ScratchDir dir;
  const std::string whole = dir.file("whole.tfrecord");
  write_records(whole, {bytes_of("0123456789"), bytes_of("abcdefghij")});
  const Bytes bytes = testing::read_file(whole);
  for (const std::size_t keep : {26u + 5u, 26u + 20u, 26u + 24u}) {
    for (const bool gzip : {false, true}) {
      const std::string cut = dir.file(gzip ? "cut.tfrecord.gz" : "cut.tfrecord");
      testing::write_file(cut, Bytes(bytes.begin(), bytes.begin() + static_cast<long>(keep)));
      expect_contains(io_error_of([&] { Pipeline::tfrecord({cut}).collect(); }),
                      {cut, "record 1 at byte 26 is truncated"});
      const std::vector<Element> kept =
          Pipeline::tfrecord({cut}, {.on_error = OnError::skip}).collect();
      ASSERT_EQ(kept.size(), 1u);
      EXPECT_EQ(kept[0].string("record"), "0123456789");
      EXPECT_EQ(kept[0].origin().str(), cut + ", record 0 at byte 0");
    }
  }
}

// A record whose header declares more than a record may hold (2^62 bytes, its length's CRC
// correct) is refused before anything is read for it: compressed, it would have inflated as much
// as the stream decompressed to.
TEST(TFRecord, ARecordDeclaringMoreThanARecordMayHoldIsRefused) {
  ScratchDir dir;
  Bytes header(12);
  const std::uint64_t length = std::uint64_t{1} << 62;
  for (int i = 0; i < 8; ++i)
    header[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(length >> (8 * i));
  const std::uint32_t crc = mask_crc(crc32c({header.data(), 8}));
  for (int i = 0; i < 4; ++i)
    header[static_cast<std::size_t>(8 + i)] = static_cast<std::uint8_t>(crc >> (8 * i));
  header.resize(64, 0x41);
  const std::string path = dir.file("huge.tfrecord");
  testing::write_file(path, header);
  expect_contains(io_error_of([&] { Pipeline::tfrecord({path}).collect(); }),
                  {path + ": record 0 at byte 0 declares 4611686018427387904 bytes, more than the "
                          "1073741824 a record may hold"});
}

TEST(TFRecord, MissingFilesAreNamedOrSkippedAndGzipIsDetectedByContent) {
  ScratchDir dir;
  const std::string plain = dir.file("a.tfrecord");
  const std::string gzip = dir.file("b.data");  // no .gz suffix: told by content
  write_records(plain, {bytes_of("p")});
  write_records(gzip, {bytes_of("g1"), bytes_of("g2")}, Compression::gzip);
  const std::string missing = dir.file("missing.tfrecord");
  expect_contains(io_error_of([&] {
                    Pipeline::tfrecord({plain, missing, gzip}).collect();
                  }),
                  {missing, "no such file"});
  const std::vector<Element> kept =
      Pipeline::tfrecord({plain, missing, gzip}, {.on_error = OnError::skip}).collect();
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[2].string("record"), "g2");
}

TEST(TFRecord, InterleavedFilesAreReadInParallel) {
  ScratchDir dir;
  std::vector<std::string> expected;
  for (int file = 0; file < 4; ++file) {
    std::vector<Bytes> records;
    for (int record = 0; record < 5; ++record) {
      const std::string text = std::to_string(file) + ":" + std::to_string(record);
      records.push_back(bytes_of(text));
      expected.push_back(text);
    }
    write_records(dir.file("part-" + std::to_string(file) + ".tfrecord"), records);
  }
  const Pipeline records =
      Pipeline::list_files({dir.file("part-*.tfrecord")})
          .interleave([](const Element& file) { return Pipeline::tfrecord({file.string("path")}); },
                      {.cycle_length = 4, .num_parallel_calls = kAutotune});
  std::vector<std::string> got;
  for (const Element& element : records.collect())
    got.push_back(element.string("record"));
  ASSERT_EQ(got.size(), 20u);
  EXPECT_EQ(got[0], "0:0");
  EXPECT_EQ(got[1], "1:0");
  EXPECT_EQ(got[4], "0:1");
  std::sort(got.begin(), got.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(got, expected);
}

// ---- CIFAR-10 ----

// A CIFAR-10 batch whose record n has label labels[n] and pixel (plane c, i) = n + c + i.
Bytes cifar_batch(const std::vector<int>& labels) {
  Bytes bytes;
  for (std::size_t n = 0; n < labels.size(); ++n) {
    bytes.push_back(static_cast<std::uint8_t>(labels[n]));
    for (int channel = 0; channel < 3; ++channel) {
      for (int pixel = 0; pixel < 1024; ++pixel)
        bytes.push_back(static_cast<std::uint8_t>(n + static_cast<std::size_t>(channel) * 50 +
                                                  static_cast<std::size_t>(pixel)));
    }
  }
  return bytes;
}

TEST(Cifar10, RecordsBecomeHwcImagesWithLabels) {
  ScratchDir dir;
  testing::write_file(dir.file("data_batch_1.bin"), cifar_batch({3, 9}));
  testing::write_file(dir.file("data_batch_2.bin.gz"), cifar_batch({0}));
  const Pipeline cifar =
      Pipeline::cifar10({dir.file("data_batch_1.bin"), dir.file("data_batch_2.bin.gz")});
  EXPECT_EQ(cifar.cardinality(), kUnknownCardinality);  // a gzip file hides its count
  EXPECT_EQ(Pipeline::cifar10({dir.file("data_batch_1.bin")}).cardinality(), 2);
  const std::vector<Element> elements = cifar.collect();
  ASSERT_EQ(elements.size(), 3u);
  const Tensor& image = elements[1].at("image");
  EXPECT_EQ(image.shape(), (Shape{32, 32, 3}));
  const std::vector<int> pixels = image.to_vector<int>();
  // Pixel (row 0, column 5) of record 1: planes R, G, B at index 5.
  EXPECT_EQ(pixels[5 * 3 + 0], 1 + 0 + 5);
  EXPECT_EQ(pixels[5 * 3 + 1], 1 + 50 + 5);
  EXPECT_EQ(pixels[5 * 3 + 2], (1 + 100 + 5) % 256);
  EXPECT_EQ(elements[1].at("label").item(), 9.0);
  EXPECT_EQ(elements[2].at("label").item(), 0.0);
}

TEST(Cifar10, BadLabelsAndTruncatedRecordsAreNamedOrSkipped) {
  ScratchDir dir;
  const std::string path = dir.file("data_batch_1.bin");
  Bytes bytes = cifar_batch({1, 12, 2, 4});
  bytes.resize(bytes.size() - 100);  // record 3 cut short
  testing::write_file(path, bytes);
  expect_contains(io_error_of([&] { Pipeline::cifar10({path}).collect(); }),
                  {path, "record 1 at byte 3073", "label 12 is outside [0, 10)"});
  ElementIterator skipping = Pipeline::cifar10({path}, {.on_error = OnError::skip}).start();
  std::vector<double> labels;
  while (std::optional<Element> element = skipping.next())
    labels.push_back(element->at("label").item());
  EXPECT_EQ(labels, (std::vector<double>{1, 2}));
  const PipelineStats stats = skipping.stats();
  EXPECT_EQ(stats.skipped(), 2);
  ASSERT_EQ(stats.stages[0].skip_reasons.size(), 2u);
  EXPECT_NE(stats.stages[0].skip_reasons[1].find("record 3 at byte 9219 is truncated"),
            std::string::npos)
      << stats.stages[0].skip_reasons[1];
}

// ---- IDX pairs ----

TEST(IdxSource, ImagesAndLabelsWithOffsetsAndLabelChecks) {
  ScratchDir dir;
  testing::write_file(dir.file("images.gz"),
                      testing::concat(testing::idx_header(0x08, {3, 2, 2}),
                                      {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23}));
  testing::write_file(dir.file("labels"),
                      testing::concat(testing::idx_header(0x08, {3}), {4, 11, 6}));
  const std::vector<Element> elements =
      Pipeline::idx(dir.file("images.gz"), dir.file("labels")).collect();
  ASSERT_EQ(elements.size(), 3u);
  EXPECT_EQ(elements[1].at("image").shape(), (Shape{2, 2, 1}));
  EXPECT_EQ(elements[1].at("image").to_vector<int>(), (std::vector<int>{10, 11, 12, 13}));
  EXPECT_EQ(elements[1].at("label").dtype(), DType::i32);
  EXPECT_EQ(elements[2].origin().str(), dir.file("images.gz") + ", record 2 at byte 24");
  const Pipeline checked =
      Pipeline::idx(dir.file("images.gz"), dir.file("labels"), {.num_classes = 10});
  expect_contains(io_error_of([&] { checked.collect(); }),
                  {dir.file("labels"), "label 11 of element 1 (byte 9)", "outside [0, 10)"});
  const Pipeline skipping = Pipeline::idx(dir.file("images.gz"), dir.file("labels"),
                                          {.num_classes = 10, .on_error = OnError::skip});
  EXPECT_EQ(skipping.collect().size(), 2u);
  testing::write_file(dir.file("short_labels"),
                      testing::concat(testing::idx_header(0x08, {2}), {1, 2}));
  expect_contains(
      io_error_of([&] { Pipeline::idx(dir.file("images.gz"), dir.file("short_labels")); }),
      {"holds 3 images", "holds 2 labels"});
}

// ---- Image folders ----

// root/cat/{0,1}.png, root/dog/{0}.jpg and a non-image file.
void write_folder(const std::filesystem::path& root) {
  for (const char* name : {"cat", "dog"})
    std::filesystem::create_directories(root / name);
  const Tensor red = Tensor::full({4, 6, 3}, 200, DType::u8);
  const Tensor png = image::encode_png(red);
  const Tensor jpeg = image::encode_jpeg(red);
  auto save = [](const std::filesystem::path& path, const Tensor& bytes) {
    const auto* data = static_cast<const std::uint8_t*>(bytes.raw_data());
    testing::write_file(path.string(), Bytes(data, data + bytes.numel()));
  };
  save(root / "cat" / "0.png", png);
  save(root / "cat" / "1.PNG", png);
  save(root / "dog" / "0.jpg", jpeg);
  testing::write_file((root / "dog" / "notes.txt").string(), bytes_of("not an image"));
}

TEST(ImageFolder, ClassesFromFoldersAndDecodedThroughMap) {
  ScratchDir dir;
  write_folder(dir.path());
  const Pipeline folder = Pipeline::image_folder(dir.path().string());
  EXPECT_EQ(folder.class_names(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(folder.cardinality(), 3);
  const std::vector<Element> images =
      folder.map(decode_image(), {.num_parallel_calls = 2}).batch(3).collect();
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].at("image").shape(), (Shape{3, 4, 6, 3}));
  EXPECT_EQ(images[0].at("label").to_vector<int>(), (std::vector<int>{0, 0, 1}));
  expect_contains(io_error_of([&] { Pipeline::image_folder(dir.file("nowhere")); }),
                  {"nowhere", "no such directory"});
}

TEST(ImageFolder, AFileThatDisappearsMidEpochIsNamedOrSkipped) {
  ScratchDir dir;
  write_folder(dir.path());
  const Pipeline folder = Pipeline::image_folder(dir.path().string());
  ElementIterator iterator = folder.start();
  ASSERT_TRUE(iterator.next());
  const std::string gone = (dir.path() / "cat" / "1.PNG").string();
  std::filesystem::remove(gone);
  expect_contains(io_error_of([&] { iterator.next(); }),
                  {gone, "no such file", "listed when the pipeline was built"});
  const std::vector<Element> kept =
      Pipeline::image_folder(dir.path().string(), {.on_error = OnError::skip}).collect();
  EXPECT_EQ(kept.size(), 2u);  // listed afresh: the file is gone
  ElementIterator skipping =
      Pipeline::image_folder(dir.path().string(), {.on_error = OnError::skip}).start();
  std::filesystem::remove(dir.path() / "dog" / "0.jpg");
  int count = 0;
  while (skipping.next())
    ++count;
  EXPECT_EQ(count, 1);
  EXPECT_EQ(skipping.stats().skipped(), 1);
}

TEST(ImageFolder, CorruptAndNonImageFilesFailInDecodeWithTheirName) {
  ScratchDir dir;
  write_folder(dir.path());
  const std::string fake = (dir.path() / "dog" / "1.jpg").string();
  testing::write_file(fake, bytes_of("this is text"));
  const Pipeline decoded =
      Pipeline::image_folder(dir.path().string()).map(decode_image(), {.name = "decode"});
  expect_contains(io_error_of([&] { decoded.collect(); }),
                  {"map(decode)", fake, "not a JPEG or PNG image"});
  const Pipeline skipping = Pipeline::image_folder(dir.path().string())
                                .map(decode_image(), {.on_error = OnError::skip, .name = "decode"});
  ElementIterator iterator = skipping.start();
  int count = 0;
  while (iterator.next())
    ++count;
  EXPECT_EQ(count, 3);
  EXPECT_NE(iterator.stats().skipped_summary().find(fake), std::string::npos);
}

}  // namespace
}  // namespace tandem::data
