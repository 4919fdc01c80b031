// Runs on data as users name it (RunConfig::data), in process: an image folder with its
// train/val/test splits and without, TFRecord files (written by `tandem data convert`'s library
// path and holding raw pixels), CIFAR-10 batches; augmentations; the class names a saved model
// keeps. Each trains to the accuracy a working pipeline reaches on data this easy. (The CLI's own
// part, one-line errors and exit statuses, is tests/cli/train_data_test.cpp; TensorFlow's own
// TFRecords are read there too.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "data/idx_files.h"
#include "data/image_folders.h"
#include "support/crash_at.h"
#include "tandem/image.h"
#include "tandem/io.h"
#include "tandem/run.h"
#include "tandem/tfrecord.h"

namespace tandem::run {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;
using testing::write_class_folders;
using testing::write_tiny_fashion_mnist;

// A quiet run of the MLP whose log is kept.
struct DataRun {
  RunConfig config;
  std::ostringstream log;

  DataRun() {
    config.model = "mlp";
    config.epochs = 4;
    config.batch_size = 8;
    config.threads = 1;
  }
  Report run() {
    run::Run run(config, {.log = &log, .out = nullptr});
    return run.run();
  }
};

void expect_logged(const DataRun& run, const std::string& part) {
  EXPECT_NE(run.log.str().find(part), std::string::npos) << "not in the log: " << part << "\n"
                                                         << run.log.str();
}

TEST(Data, AnImageFolderWithTrainValAndTestSplits) {
  ScratchDir dir;
  write_class_folders(dir.path() / "photos" / "train", 24, 1);
  write_class_folders(dir.path() / "photos" / "val", 6, 100);
  write_class_folders(dir.path() / "photos" / "test", 10, 200);
  DataRun run;
  run.config.data.images.training = dir.file("photos");
  run.config.data.augment = {"flip", "translate"};
  run.config.checkpoints.save_model = dir.file("model");
  const Report report = run.run();
  expect_logged(run, "data: image folder " + dir.file("photos") +
                         "/train, 2 classes: 48 training, 12 validation, 20 test images "
                         "(12, 10, 3), augmented: flip, translate");
  EXPECT_EQ(report.num_classes, 2);
  // Light above against light below: any working pipeline separates them.
  ASSERT_TRUE(report.test_accuracy);
  EXPECT_GE(*report.test_accuracy, 0.9) << run.log.str();
  EXPECT_EQ(report.history.at("val_accuracy").size(), 4u);
  // The saved model knows the class folders' names.
  std::ifstream config(dir.file("model") + "/model.json");
  const std::string saved((std::istreambuf_iterator<char>(config)), {});
  EXPECT_NE(saved.find("\"bottom\""), std::string::npos) << saved;
  EXPECT_NE(saved.find("\"top\""), std::string::npos) << saved;
}

// A class folder whose name is not UTF-8 is refused before training, naming it printably: the
// name would be saved with the model, the logs and the report (all UTF-8), and the run used to
// fail at its end, losing the trained model.
TEST(Data, AClassFolderNameThatIsNotUtf8IsRefusedBeforeTraining) {
  ScratchDir dir;
  write_class_folders(dir.path() / "photos", 4, 1);
  fs::rename(dir.path() / "photos" / "top", dir.path() / "photos" / "t\xf6p");
  DataRun run;
  run.config.data.images.training = dir.file("photos");
  try {
    run.run();
    ADD_FAILURE() << "it trained";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("the class folder 't\\xF6p' has a name that is not "
                        "UTF-8; rename it"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(run.log.str().find("Epoch 1"), std::string::npos) << run.log.str();
}

// A stray label makes a model of that many outputs: warned about when most classes would have no
// example, refused past a million classes (what a run may allocate up front).
TEST(Data, AStrayLabelIsWarnedAboutOrRefused) {
  ScratchDir dir;
  write_class_folders(dir.path() / "photos", 4, 1);
  const auto with_first_label = [&](std::int64_t label, const std::string& file) {
    auto first = std::make_shared<bool>(true);
    data::write_tfrecord(
        data::Pipeline::image_folder(dir.file("photos")).map([first, label](data::Element element) {
          if (*first) element.set("label", Tensor::scalar(label, DType::i64));
          *first = false;
          return element;
        }),
        file);
  };
  with_first_label(40, dir.file("stray.tfrecord"));
  DataRun warned;
  warned.config.epochs = 1;
  warned.config.data.images.training = dir.file("stray.tfrecord");
  ::testing::internal::CaptureStderr();
  const Report report = warned.run();
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(report.num_classes, 41);
  EXPECT_NE(warnings.find("only 3 of 41 classes (labels 0 .. 40) have a training example; the "
                          "largest label, 40, decides the model's outputs"),
            std::string::npos)
      << warnings;
  with_first_label(2'000'000, dir.file("huge.tfrecord"));
  DataRun refused;
  refused.config.data.images.training = dir.file("huge.tfrecord");
  try {
    refused.run();
    ADD_FAILURE() << "a model of 2,000,001 outputs was made";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what())
                  .find("the largest label is 2000000, which makes 2000001 "
                        "classes, more than the 1000000 a run may have"),
              std::string::npos)
        << error.what();
  }
}

// A failure after the last step (here a test image that does not decode, found only when the test
// set is evaluated) no longer loses the trained model: it is saved where asked before the error
// goes on.
TEST(Data, AFailureAfterTrainingStillSavesTheModel) {
  ScratchDir dir;
  write_class_folders(dir.path() / "train", 8, 1);
  write_class_folders(dir.path() / "test", 4, 2);
  auto count = std::make_shared<int>(0);
  data::write_tfrecord(
      data::Pipeline::image_folder(dir.file("test")).map([count](data::Element element) {
        if ((*count)++ == 5) {  // not the first: that one is looked at early
          element.set("image", Tensor::from_vector(
                                   std::vector<std::uint8_t>{0x89, 'P', 'N', 'G', 1, 2, 3}, {7}));
        }
        return element;
      }),
      dir.file("test.tfrecord"));
  DataRun run;
  run.config.epochs = 1;
  run.config.data.images.training = dir.file("train");
  run.config.data.images.test = dir.file("test.tfrecord");
  run.config.checkpoints.save_model = dir.file("model");
  ::testing::internal::CaptureStderr();
  EXPECT_THROW(run.run(), IoError);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("the run failed after training ("), std::string::npos) << said;
  EXPECT_TRUE(fs::exists(dir.file("model") + "/model.safetensors")) << said;
}

TEST(Data, AFlatImageFolderSplitsAtRandomAndHasNoTestSet) {
  ScratchDir dir;
  write_class_folders(dir.path() / "flat", 20, 3);
  DataRun run;
  run.config.epochs = 3;
  run.config.data.images.training = dir.file("flat");
  run.config.data.images.image_height = 8;
  run.config.data.images.image_width = 6;
  run.config.data.images.channels = 1;
  run.config.data.validation_split = 0.25;
  run.config.data.augment = {"resized-crop"};
  const Report report = run.run();
  expect_logged(run, "30 training, 10 validation, no test images (8, 6, 1)");
  EXPECT_FALSE(report.test_accuracy);
  // Drawn at random, the held-out quarter has both classes (the last quarter of a sorted
  // folder would be all 'top'): validation accuracy is not that of one class by chance.
  EXPECT_GE(report.history.at("val_accuracy").back(), 0.9) << run.log.str();
}

TEST(Data, TfRecordsOfEncodedImagesAndOfRawPixels) {
  ScratchDir dir;
  write_class_folders(dir.path() / "train", 16, 5);
  write_class_folders(dir.path() / "test", 8, 50);
  // As `tandem data convert` writes them: the encoded image and its label.
  const auto convert = [](const fs::path& folder, const std::string& file) {
    data::write_tfrecord(data::Pipeline::image_folder(folder.string()), file);
  };
  convert(dir.path() / "train", dir.file("train.tfrecord"));
  convert(dir.path() / "test", dir.file("test.tfrecord"));
  DataRun encoded;
  encoded.config.data.images.training = dir.file("train.tfrecord");
  encoded.config.data.images.test = dir.file("test.tfrecord");
  const Report report = encoded.run();
  expect_logged(encoded, "TFRecord " + dir.file("train.tfrecord") +
                             " (image 'image', label 'label'), 2 classes: 32 training");
  ASSERT_TRUE(report.test_accuracy);
  EXPECT_GE(*report.test_accuracy, 0.9) << encoded.log.str();
}

// CIFAR-10's binary batches in `folder`/cifar-10-batches-bin: 40 training and 20 test images of
// three classes, each bright in its own colour (a record: a label byte, then the red, green and
// blue planes of 32x32), with some texture.
void write_cifar10(const fs::path& folder) {
  testing::Bytes train;
  testing::Bytes test;
  for (int i = 0; i < 60; ++i) {
    testing::Bytes& batch = i < 40 ? train : test;
    const int label = i % 3;
    batch.push_back(static_cast<std::uint8_t>(label));
    for (int channel = 0; channel < 3; ++channel) {
      for (int pixel = 0; pixel < 1024; ++pixel) {
        const int texture = (i * 7 + pixel * 13) % 40;
        batch.push_back(static_cast<std::uint8_t>((channel == label ? 200 : 40) + texture));
      }
    }
  }
  fs::create_directories(folder / "cifar-10-batches-bin");
  testing::write_file((folder / "cifar-10-batches-bin/data_batch_1.bin").string(), train);
  testing::write_file((folder / "cifar-10-batches-bin/test_batch.bin").string(), test);
}

TEST(Data, Cifar10Batches) {
  ScratchDir dir;
  write_cifar10(dir.path());
  DataRun run;
  run.config.data.images.training = dir.path().string();
  const Report report = run.run();
  expect_logged(run, "CIFAR-10 " + dir.file("cifar-10-batches-bin/data_batch_1.bin") +
                         ", 10 classes: 40 training, 20 test images (32, 32, 3)");
  EXPECT_EQ(report.num_classes, 10);
  ASSERT_TRUE(report.test_accuracy);
  EXPECT_GE(*report.test_accuracy, 0.9) << run.log.str();
}

// A run on any reader's data resumes from its checkpoint: with the data it carries, and with the
// data given again (the CLI's --data repeated). Runs that named their data used to be
// unresumable: the checkpoint carried the default Fashion-MNIST folder beside the spec, and the
// two clashed.
TEST(Data, ARunOnEveryReadersDataResumes) {
  ScratchDir dir;
  fs::create_directories(dir.path() / "fashion");
  write_tiny_fashion_mnist(dir.path() / "fashion", 64, 16, 28, 28);
  write_class_folders(dir.path() / "photos", 16, 9);
  write_cifar10(dir.path() / "cifar");
  data::write_tfrecord(data::Pipeline::image_folder(dir.file("photos")),
                       dir.file("photos.tfrecord"));
  struct Reader {
    std::string name;
    std::function<void(RunConfig&)> names_data;
  };
  const std::vector<Reader> readers{
      {"fashion-mnist",
       [&](RunConfig& c) { c.data.images.fashion_mnist_dir = dir.file("fashion"); }},
      {"idx",
       [&](RunConfig& c) {
         c.data.images.training = dir.file("fashion/train-images-idx3-ubyte.gz") + "," +
                                  dir.file("fashion/train-labels-idx1-ubyte.gz");
       }},
      {"cifar10", [&](RunConfig& c) { c.data.images.training = dir.file("cifar"); }},
      {"images", [&](RunConfig& c) { c.data.images.training = dir.file("photos"); }},
      {"tfrecord", [&](RunConfig& c) { c.data.images.training = dir.file("photos.tfrecord"); }},
  };
  for (const Reader& reader : readers) {
    SCOPED_TRACE(reader.name);
    RunConfig config;
    config.model = "mlp";
    config.epochs = 2;
    config.batch_size = 8;
    config.threads = 1;
    config.verbosity = 0;
    reader.names_data(config);
    config.checkpoints.directory = dir.file(reader.name + "-checkpoints");
    config.checkpoints.every_steps = 2;
    {
      run::Run crashing(
          config,
          {.log = nullptr, .out = nullptr, .callbacks = {std::make_shared<testing::CrashAt>(3)}});
      EXPECT_THROW(crashing.run(), IoError);
    }
    const std::string copy = dir.file(reader.name + "-copy");
    fs::copy(config.checkpoints.directory, copy, fs::copy_options::recursive);
    // As the checkpoint carries it.
    RunConfig carried = resumed_config(config.checkpoints.directory);
    carried.threads = 1;
    carried.verbosity = 0;
    EXPECT_EQ(carried.data.images.training, config.data.images.training);
    EXPECT_EQ(run::Run(carried, {.log = nullptr, .out = nullptr}).run().history.at("loss").size(),
              2u);
    // Given again: the data options the caller sets replace the carried ones.
    RunConfig given = resumed_config(copy, {reader.name == "fashion-mnist" ? "data-dir" : "data"});
    reader.names_data(given);
    given.threads = 1;
    given.verbosity = 0;
    EXPECT_EQ(run::Run(given, {.log = nullptr, .out = nullptr}).run().history.at("loss").size(),
              2u);
  }
}

}  // namespace
}  // namespace tandem::run
