#include <gtest/gtest.h>

#include <array>
#include <filesystem>

#include "data/idx_files.h"
#include "tandem/data.h"

namespace tandem::data {
namespace {

using testing::concat;
using testing::idx_header;
using testing::ScratchDir;
using testing::write_file;
using testing::write_tiny_fashion_mnist;

std::string error_message(const std::function<void()>& body) {
  try {
    body();
  } catch (const IoError& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an IoError";
  return "";
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

TEST(FashionMnist, LoadsImagesAsUnitFloatsAndLabelsAsI32) {
  for (const std::string suffix : {".gz", ""}) {
    ScratchDir dir;
    write_tiny_fashion_mnist(dir.path(), 12, 5, 4, 3, suffix);
    const ImageClassificationData data = load_fashion_mnist(dir.path().string());
    EXPECT_EQ(data.num_classes, 10);
    EXPECT_EQ(data.train_images.shape(), (Shape{12, 4, 3, 1}));
    EXPECT_EQ(data.train_images.dtype(), DType::f32);
    EXPECT_EQ(data.train_labels.shape(), (Shape{12}));
    EXPECT_EQ(data.train_labels.dtype(), DType::i32);
    EXPECT_EQ(data.test_images.shape(), (Shape{5, 4, 3, 1}));
    const auto pixels = data.train_images.to_vector<float>();
    // Image 2, pixel 5 was written as (2 * 7 + 5 * 13) % 256 = 79.
    EXPECT_FLOAT_EQ(pixels[2 * 12 + 5], 79.0f / 255.0f);
    EXPECT_EQ(data.train_labels.to_vector<int>()[11], 1);
  }
}

TEST(FashionMnist, MissingDirectoryPointsAtThePackageAndTheOption) {
  const std::string message =
      error_message([] { load_fashion_mnist("/nonexistent/tandem/fashion-mnist"); });
  expect_contains(message, "/nonexistent/tandem/fashion-mnist");
  expect_contains(message, "dataset-fashion-mnist");
  expect_contains(message, "--data-dir");
}

TEST(FashionMnist, MissingFileIsNamed) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 4, 4);
  std::filesystem::remove(dir.file("t10k-labels-idx1-ubyte.gz"));
  const std::string message = error_message([&] { load_fashion_mnist(dir.path().string()); });
  expect_contains(message, "t10k-labels-idx1-ubyte");
  expect_contains(message, "--data-dir");
}

TEST(FashionMnist, LabelOutsideTheClassesNamesFileAndIndex) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 6, 2);
  write_file(dir.file("train-labels-idx1-ubyte.gz"),
             concat(idx_header(0x08, {6}), testing::Bytes{0, 1, 2, 10, 4, 5}));
  const std::string message = error_message([&] { load_fashion_mnist(dir.path().string()); });
  expect_contains(message, dir.file("train-labels-idx1-ubyte.gz"));
  expect_contains(message, "label 10 at index 3");
}

TEST(FashionMnist, CountMismatchIsAnError) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 6, 2);
  write_file(dir.file("t10k-labels-idx1-ubyte.gz"),
             concat(idx_header(0x08, {3}), testing::Bytes{0, 1, 2}));
  const std::string message = error_message([&] { load_fashion_mnist(dir.path().string()); });
  expect_contains(message, "2 images");
  expect_contains(message, "3 labels");
}

TEST(FashionMnist, ImagesMustBeU8WithThreeDimensions) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 2, 2);
  write_file(dir.file("train-images-idx3-ubyte.gz"),
             concat(idx_header(0x08, {2, 6}), testing::Bytes(12, 0)));
  const std::string message = error_message([&] { load_fashion_mnist(dir.path().string()); });
  expect_contains(message, "train-images-idx3-ubyte.gz");
  expect_contains(message, "(2, 6)");
}

TEST(FashionMnist, RealDatasetHasSixThousandImagesPerClass) {
  if (!std::filesystem::is_directory(kFashionMnistDefaultDir)) {
    GTEST_SKIP() << kFashionMnistDefaultDir
                 << " is absent: install dataset-fashion-mnist to run this test";
  }
  const ImageClassificationData data = load_fashion_mnist();
  EXPECT_EQ(data.train_images.shape(), (Shape{60000, 28, 28, 1}));
  EXPECT_EQ(data.test_images.shape(), (Shape{10000, 28, 28, 1}));
  std::array<int, 10> train_histogram{};
  for (int label : data.train_labels.to_vector<int>())
    ++train_histogram[static_cast<std::size_t>(label)];
  std::array<int, 10> test_histogram{};
  for (int label : data.test_labels.to_vector<int>())
    ++test_histogram[static_cast<std::size_t>(label)];
  for (int count : train_histogram)
    EXPECT_EQ(count, 6000);
  for (int count : test_histogram)
    EXPECT_EQ(count, 1000);
  const float* pixels = data.train_images.data<float>();
  const auto [low, high] = std::minmax_element(pixels, pixels + data.train_images.numel());
  EXPECT_EQ(*low, 0.0f);
  EXPECT_EQ(*high, 1.0f);
}

}  // namespace
}  // namespace tandem::data
