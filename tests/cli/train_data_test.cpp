// `tandem train --data SPEC` end to end: training from an image folder (the printed data line, the
// report, the saved model's class names in `tandem predict`), from TFRecord files written by
// `tandem data convert` and by TensorFlow; and the mistakes, each a one-line error naming the
// option or file and the fix. What the run does with each kind of data, in process, is
// tests/run/data_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "data/image_folders.h"
#include "support/python_env.h"
#include "tandem/image.h"
#include "tandem/random.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_report(const std::string& path) {
  return nlohmann::json::parse(slurp(path));
}

TEST(TrainData, TrainsFromAnImageFolderWithTrainValAndTestSplits) {
  ScratchDir dir;
  write_class_folders(dir.path() / "photos" / "train", 24, 1);
  write_class_folders(dir.path() / "photos" / "val", 6, 100);
  write_class_folders(dir.path() / "photos" / "test", 10, 200);
  const std::string report = dir.file("report.json");
  const std::string saved = dir.file("model");
  const CliResult result =
      run_cli({"train", "--data", dir.file("photos"), "--model", "mlp", "--epochs", "4",
               "--batch-size", "8", "--threads", "1", "--augment", "flip,translate", "--report",
               report, "--save-model", saved});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out, "data: image folder " + dir.file("photos") +
                                  "/train, 2 classes: 48 "
                                  "training, 12 "
                                  "validation, 20 test "
                                  "images (12, 10, 3)");
  expect_contains(result.out, "augmented: flip, translate");
  expect_contains(result.out, "val_accuracy");
  const nlohmann::json json = read_report(report);
  EXPECT_EQ(json.at("num_classes"), 2);
  // Light above against light below: any working pipeline separates them.
  EXPECT_GE(json.at("test_accuracy").get<double>(), 0.9) << result.out;
  EXPECT_EQ(json.at("history").at("val_accuracy").size(), 4u);
  EXPECT_EQ(json.at("config").at("augment"), "flip,translate");

  // The saved model knows the class folders' names.
  save(dir.path() / "query.png", image::encode_png(class_image(true, 12, 10, 7)));
  const CliResult predicted =
      run_cli({"predict", "--model", saved, "--top", "1", dir.file("query.png")});
  ASSERT_EQ(predicted.status, 0) << predicted.err;
  expect_contains(predicted.out, "top");
}

TEST(TrainData, TrainsFromTfRecordsThatConvertWrote) {
  ScratchDir dir;
  write_class_folders(dir.path() / "train", 16, 5);
  write_class_folders(dir.path() / "test", 8, 50);
  ASSERT_EQ(run_cli({"data", "convert", dir.file("train"), dir.file("train.tfrecord")}).status, 0);
  ASSERT_EQ(run_cli({"data", "convert", dir.file("test"), dir.file("test.tfrecord")}).status, 0);
  const std::string report = dir.file("report.json");
  const CliResult encoded = run_cli({"train", "--data", dir.file("train.tfrecord"), "--test-data",
                                     dir.file("test.tfrecord"), "--model", "mlp", "--epochs", "4",
                                     "--batch-size", "8", "--threads", "1", "--report", report});
  ASSERT_EQ(encoded.status, 0) << encoded.err;
  expect_contains(encoded.out, "TFRecord " + dir.file("train.tfrecord") +
                                   " (image 'image', label 'label'), 2 classes: 32 training");
  EXPECT_GE(read_report(report).at("test_accuracy").get<double>(), 0.9) << encoded.out;

  // Raw pixels with height, width and channels features: an IDX folder converted.
  fs::create_directories(dir.path() / "idx");
  write_tiny_fashion_mnist(dir.path() / "idx", 40, 20, 6, 5);
  ASSERT_EQ(run_cli({"data", "convert", dir.file("idx"), dir.file("raw.tfrecord")}).status, 0);
  const CliResult raw = run_cli({"train", "--data", "tfrecord:" + dir.file("raw*.tfrecord"),
                                 "--model", "mlp", "--epochs", "1", "--threads", "1"});
  ASSERT_EQ(raw.status, 0) << raw.err;
  expect_contains(raw.out,
                  "(image 'image' raw pixels, label 'label'), 10 classes: 40 training, "
                  "no test images (6, 5, 1)");

  // The same file named twice trains on it twice an epoch, which is said.
  const CliResult twice =
      run_cli({"train", "--data", dir.file("raw.tfrecord") + "," + dir.file("raw.tfrecord"),
               "--model", "mlp", "--epochs", "1", "--threads", "1", "--quiet"});
  ASSERT_EQ(twice.status, 0) << twice.err;
  expect_contains(twice.err, "warning: --data names " + dir.file("raw.tfrecord") +
                                 " more than once; its examples are read that many times");
}

TEST(TrainData, TrainsFromTfRecordsThatTensorFlowWrote) {
  TANDEM_REQUIRE_PYTHON_ENV(env, "tfrecord");
  ScratchDir dir;
  ASSERT_EQ(
      run_shell(shell_quote(env.python) + " " +
                shell_quote(std::string(TANDEM_SOURCE_DIR) + "/tests/cli/tf_image_records.py") +
                " " + shell_quote(dir.path().string())),
      0);
  const std::string report = dir.file("report.json");
  const CliResult result =
      run_cli({"train", "--data", dir.file("train-*-of-00002"), "--test-data",
               dir.file("test-00000-of-00001"), "--model", "mlp", "--epochs", "4", "--batch-size",
               "8", "--threads", "1", "--report", report});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out,
                  "TFRecord 2 files (image 'image/encoded', label 'image/class/label'), "
                  "3 classes: 60 training, 30 test images (16, 16, 3)");
  EXPECT_GE(read_report(report).at("test_accuracy").get<double>(), 0.9) << result.out;
}

TEST(TrainData, MistakesAreOneLineErrors) {
  ScratchDir dir;
  write_class_folders(dir.path() / "photos", 4, 1);
  expect_error({"train", "--data", dir.file("missing")}, 2,
               {"--data", dir.file("missing"), "does not exist"});
  expect_error({"train", "--data", dir.file("*.tfrecord")}, 2, {"no file matches"});
  expect_error({"train", "--data", dir.file("photos"), "--data-dir", dir.path().string()}, 2,
               {"--data and --data-dir", "pass one"});
  expect_error({"train", "--data", dir.file("photos"), "--augment", "flip,spin"}, 2,
               {"--augment", "spin", "flip, translate or resized-crop"});
  expect_error({"train", "--data", dir.file("photos"), "--image-size", "0x5"}, 2, {"--image-size"});
  expect_error({"train", "--data", dir.file("photos"), "--validation-data", dir.file("photos"),
                "--validation-split", "0.1"},
               2, {"--validation-data and --validation-split"});
  fs::create_directories(dir.path() / "loose");
  save(dir.path() / "loose" / "a.png", image::encode_png(class_image(true, 4, 4, 1)));
  expect_error({"train", "--data", dir.file("loose")}, 2, {dir.file("loose"), "class folders"});
  save(dir.path() / "one" / "only" / "a.png", image::encode_png(class_image(true, 4, 4, 1)));
  expect_error({"train", "--data", dir.file("one")}, 2,
               {dir.file("one"), "1 class folder (only)", "two classes or more"});
  expect_error({"train", "--data", dir.file("photos"), "--checkpoint-dir", dir.file("checkpoints"),
                "--keep-best", "val_loss"},
               2, {"--keep-best val_loss", "no validation split"});
  // A TFRecord file without an image the reader can find: its features are listed.
  fs::create_directories(dir.path() / "idx");
  write_tiny_fashion_mnist(dir.path() / "idx", 10, 5, 3, 3);
  ASSERT_EQ(run_cli({"data", "convert", dir.file("idx"), dir.file("d.tfrecord")}).status, 0);
  expect_error({"train", "--data", dir.file("d.tfrecord"), "--image-feature", "pixels"}, 2,
               {"--image-feature pixels", "its features: channels (int64), height (int64)"});
  expect_error({"train", "--data", dir.file("d.tfrecord"), "--label-feature", "image"}, 2,
               {"--label-feature image", "no int64 feature of that name with one value"});
  // In a run file, the line of the path.
  std::ofstream(dir.file("run.toml")) << "epochs = 1\ndata = \"" << dir.file("nowhere") << "\"\n";
  expect_error({"train", "--config", dir.file("run.toml")}, 2, {"run.toml:2", "does not exist"});
  std::ofstream(dir.file("fashion.toml")) << "data-dir = \"" << dir.file("nowhere") << "\"\n";
  expect_error({"train", "--config", dir.file("fashion.toml")}, 2,
               {"fashion.toml:1", "key 'data-dir'", "no such folder"});
}

}  // namespace
}  // namespace tandem::testing
