// `tandem data inspect` and `tandem data convert` end to end on files the test writes: what
// they print, the TFRecord files convert writes (read back by inspect and by the library), and
// the one-line errors with their exit statuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cli/cli_runner.h"
#include "tandem/image.h"
#include "tandem/tfrecord.h"

namespace tandem::testing {
namespace {

void save(const std::filesystem::path& path, const Tensor& bytes) {
  const auto* data = static_cast<const std::uint8_t*>(bytes.raw_data());
  write_file(path.string(), Bytes(data, data + bytes.numel()));
}

TEST(DataCommand, InspectsAFashionMnistFolderAndItsFiles) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 30, 10);
  const CliResult folder = run_cli({"data", "inspect", dir.path().string()});
  ASSERT_EQ(folder.status, 0) << folder.err;
  expect_contains(folder.out, "train: 30 images (4, 3, 1)");
  expect_contains(folder.out, "t10k: 10 images (4, 3, 1)");
  expect_contains(folder.out, "label histogram (10 classes):");
  expect_contains(folder.out, "  0  3  10.0%");
  const CliResult labels = run_cli({"data", "inspect", dir.file("train-labels-idx1-ubyte.gz")});
  ASSERT_EQ(labels.status, 0) << labels.err;
  expect_contains(labels.out, "IDX file (gzip-compressed), u8 (30,)");
  expect_contains(labels.out, "  9  3  10.0%");
}

TEST(DataCommand, ConvertsIdxToTfRecordsThatInspectAndTheLibraryRead) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 12, 2, 4, 3, "");
  const std::string output = dir.file("train.tfrecord.gz");
  const CliResult convert = run_cli({"data", "convert", dir.file("train-images-idx3-ubyte"), output,
                                     "--labels", dir.file("train-labels-idx1-ubyte"), "--gzip"});
  ASSERT_EQ(convert.status, 0) << convert.err;
  expect_contains(convert.out, "wrote 12 records to " + output + " (gzip)");
  const CliResult inspect = run_cli({"data", "inspect", output});
  ASSERT_EQ(inspect.status, 0) << inspect.err;
  expect_contains(inspect.out, "TFRecord file (gzip-compressed), CRC-32C checked");
  expect_contains(inspect.out, "records: 12");
  expect_contains(inspect.out, "image: bytes (12,)");
  expect_contains(inspect.out, "label: int64 (1,)");
  expect_contains(inspect.out, "label histogram (10 classes):");
  const data::ExampleSpec spec{{"image", data::FeatureSpec::bytes({4, 3, 1})},
                               {"label", data::FeatureSpec::int64({}, DType::i32)}};
  const std::vector<data::Element> examples =
      data::Pipeline::tfrecord({output}).map(data::parse_examples(spec)).collect();
  const std::vector<data::Element> originals =
      data::Pipeline::idx(dir.file("train-images-idx3-ubyte"), dir.file("train-labels-idx1-ubyte"))
          .collect();
  ASSERT_EQ(examples.size(), originals.size());
  for (std::size_t i = 0; i < examples.size(); ++i) {
    EXPECT_EQ(examples[i].at("image").to_vector<int>(), originals[i].at("image").to_vector<int>());
    EXPECT_EQ(examples[i].at("label").item(), originals[i].at("label").item());
  }
}

// A Fashion-MNIST folder converts as inspect reads it: one split (train by default, or
// --split test), the same records as the split's IDX files give.
TEST(DataCommand, ConvertsASplitOfAFashionMnistFolder) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 12, 5);
  for (const std::string split : {"", "test"}) {
    const std::string output = dir.file("out" + split + ".tfrecord");
    std::vector<std::string> args{"data", "convert", dir.path().string(), output};
    if (!split.empty()) args.insert(args.end(), {"--split", split});
    const CliResult convert = run_cli(args);
    ASSERT_EQ(convert.status, 0) << convert.err;
    const std::string files = split.empty() ? "train" : "t10k";
    expect_contains(convert.out, "converting the " +
                                     (split.empty() ? std::string("train") : split) +
                                     " split: " + dir.file(files + "-images-idx3-ubyte.gz"));
    expect_contains(convert.out,
                    "wrote " + std::to_string(split.empty() ? 12 : 5) + " records to " + output);
    const std::vector<data::Element> examples =
        data::Pipeline::tfrecord({output})
            .map(data::parse_examples({{"image", data::FeatureSpec::bytes({4, 3, 1})},
                                       {"label", data::FeatureSpec::int64({}, DType::i32)}}))
            .collect();
    const std::vector<data::Element> originals =
        data::Pipeline::idx(dir.file(files + "-images-idx3-ubyte.gz"),
                            dir.file(files + "-labels-idx1-ubyte.gz"))
            .collect();
    ASSERT_EQ(examples.size(), originals.size());
    for (std::size_t i = 0; i < examples.size(); ++i) {
      EXPECT_EQ(examples[i].at("image").to_vector<int>(),
                originals[i].at("image").to_vector<int>());
      EXPECT_EQ(examples[i].at("label").item(), originals[i].at("label").item());
    }
  }
  expect_error({"data", "convert", dir.path().string(), dir.file("x.tfrecord"), "--labels",
                dir.file("train-labels-idx1-ubyte.gz")},
               2, {"a Fashion-MNIST folder has its labels", "--split train|test"});
  expect_error({"data", "convert", dir.file("train-images-idx3-ubyte.gz"), dir.file("x.tfrecord"),
                "--split", "test"},
               2, {"--split picks a split of a Fashion-MNIST folder"});
  expect_error({"data", "convert", dir.path().string(), dir.file("x.tfrecord"), "--split", "dev"},
               2, {"unknown split 'dev' for --split"});
}

TEST(DataCommand, ConvertsAndInspectsAnImageFolder) {
  ScratchDir dir;
  const std::filesystem::path root = dir.path() / "photos";
  for (const char* name : {"cats", "dogs"})
    std::filesystem::create_directories(root / name);
  std::vector<std::uint8_t> pixels(6 * 8 * 3, 120);
  const Tensor image = Tensor::from_vector(pixels, {6, 8, 3});
  save(root / "cats" / "a.jpg", image::encode_jpeg(image));
  save(root / "cats" / "b.png", image::encode_png(image));
  save(root / "dogs" / "c.jpg", image::encode_jpeg(image));
  const CliResult inspect = run_cli({"data", "inspect", root.string()});
  ASSERT_EQ(inspect.status, 0) << inspect.err;
  expect_contains(inspect.out, "image folder, 2 classes, 3 images (2 JPEG, 1 PNG)");
  expect_contains(inspect.out, "image shapes: (6, 8, 3)");
  expect_contains(inspect.out, "  0 cats  2  66.7%");
  expect_contains(inspect.out, "  1 dogs  1  33.3%");
  const std::string output = dir.file("photos.tfrecord");
  const CliResult convert = run_cli({"data", "convert", root.string(), output});
  ASSERT_EQ(convert.status, 0) << convert.err;
  expect_contains(convert.out, "wrote 3 records to " + output);
  const std::vector<data::Element> examples =
      data::Pipeline::tfrecord({output}).map(data::parse_examples()).collect();
  ASSERT_EQ(examples.size(), 3u);
  EXPECT_EQ(examples[2].string("class"), "dogs");
  EXPECT_EQ(examples[1].string("format"), "png");
  EXPECT_EQ(image::decode(examples[0].at("image")).shape(), (Shape{6, 8, 3}));
}

// A destination that is one of the sources, however spelled, is refused before anything is
// written; and a convert that fails leaves an earlier output of that name as it was, with no
// partial file beside it.
TEST(DataCommand, ConvertNeverDestroysItsSourcesOrAGoodOutput) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 12, 2, 4, 3, "");
  const std::string images = dir.file("train-images-idx3-ubyte");
  const std::string labels = dir.file("train-labels-idx1-ubyte");
  const Bytes original = read_file(images);
  expect_error({"data", "convert", images, images, "--labels", labels}, 2,
               {"is the source", "choose another path"});
  expect_error({"data", "convert", images, dir.path().string() + "/./" + "train-labels-idx1-ubyte",
                "--labels", labels},
               2, {"is the labels file"});
  EXPECT_EQ(read_file(images), original);

  const std::filesystem::path root = dir.path() / "photos";
  std::filesystem::create_directories(root / "cats");
  std::vector<std::uint8_t> pixels(4 * 4 * 3, 90);
  save(root / "cats" / "a.png", image::encode_png(Tensor::from_vector(pixels, {4, 4, 3})));
  expect_error({"data", "convert", root.string(), (root / "cats" / "out.tfrecord").string()}, 2,
               {"inside the folder"});

  const std::string output = dir.file("good.tfrecord");
  ASSERT_EQ(run_cli({"data", "convert", images, output, "--labels", labels}).status, 0);
  const Bytes good = read_file(output);
  save(root / "cats" / "b.png", Tensor::from_vector(std::vector<std::uint8_t>{1, 2, 3}, {3}));
  const CliResult failed = run_cli({"data", "convert", root.string(), output});
  EXPECT_NE(failed.status, 0) << failed.out;
  EXPECT_EQ(read_file(output), good) << "a failed convert changed the earlier output";
  EXPECT_FALSE(std::filesystem::exists(output + ".partial"));
}

TEST(DataCommand, InspectsCifarBatchesAndSingleImages) {
  ScratchDir dir;
  Bytes batch;
  for (const int label : {3, 3, 7}) {
    batch.push_back(static_cast<std::uint8_t>(label));
    batch.insert(batch.end(), 3072, 9);
  }
  write_file(dir.file("data_batch_1.bin"), batch);
  const CliResult cifar = run_cli({"data", "inspect", dir.file("data_batch_1.bin")});
  ASSERT_EQ(cifar.status, 0) << cifar.err;
  expect_contains(cifar.out, "CIFAR-10 batch, 3 records");
  expect_contains(cifar.out, "  3  2  66.7%");
  std::vector<std::uint8_t> pixels(5 * 7, 50);
  save(dir.path() / "grey.png", image::encode_png(Tensor::from_vector(pixels, {5, 7, 1})));
  const CliResult png = run_cli({"data", "inspect", dir.file("grey.png")});
  ASSERT_EQ(png.status, 0) << png.err;
  expect_contains(png.out, "PNG image, 5x7, 1 channel");
}

TEST(DataCommand, MistakesAreOneLineErrors) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 4, 2);
  expect_error({"data"}, 2, {"'tandem data' needs inspect PATH, or convert SOURCE DEST"});
  expect_error({"data", "frobnicate", "x"}, 2,
               {"unknown action 'frobnicate'", "inspect or convert"});
  expect_error({"data", "inspect"}, 2, {"takes one PATH, got 0"});
  expect_error({"data", "inspect", dir.file("missing")}, 1, {dir.file("missing"), "no such file"});
  write_file(dir.file("notes.txt"), {'h', 'e', 'l', 'l', 'o', '!', '!', '!'});
  expect_error({"data", "inspect", dir.file("notes.txt")}, 1,
               {dir.file("notes.txt"), "not a data format Tandem reads"});
  expect_error({"data", "convert", dir.file("train-images-idx3-ubyte.gz"), dir.file("out")}, 2,
               {"need their labels: pass --labels FILE"});
  expect_error(
      {"data", "convert", dir.file("train-images-idx3-ubyte.gz"), dir.file("nowhere/out.tfrecord"),
       "--labels", dir.file("train-labels-idx1-ubyte.gz")},
      2, {"nowhere", "does not exist"});
  // A label file that does not belong to the images.
  expect_error({"data", "convert", dir.file("train-images-idx3-ubyte.gz"), dir.file("out"),
                "--labels", dir.file("t10k-labels-idx1-ubyte.gz")},
               1, {"holds 4 images", "holds 2 labels"});
}

}  // namespace
}  // namespace tandem::testing
