// The io parts of the `tandem` command, run as a user runs them on a small Fashion-MNIST-shaped
// data set: --deterministic gives bit-identical weights for any --threads; --checkpoint-dir,
// --resume and their mistakes; a real full file system (a small tmpfs in a user namespace) while
// checkpointing; --save-model, `tandem predict` on IDX, PNG, JPEG and PGM inputs; `tandem export`.
#include <gtest/gtest.h>

#include <fstream>

#include "cli/cli_runner.h"
#include "io/io_support.h"
#include "tandem/image.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::run_cli;
using testing::same_bits;
using testing::ScratchDir;
using testing::shell_quote;

// 256 training and 64 test images of 28x28, in the four files `tandem train` reads.
struct TinyData {
  TinyData() { testing::write_tiny_fashion_mnist(scratch.path(), 256, 64, 28, 28); }
  std::string dir() const { return scratch.path().string(); }
  ScratchDir scratch;
};

const TinyData& tiny_data() {
  static const TinyData data;
  return data;
}

std::vector<std::string> train_args(std::vector<std::string> extra) {
  std::vector<std::string> args{"train",    "--data-dir", tiny_data().dir(),
                                "--epochs", "2",          "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void expect_same_files(const std::string& a, const std::string& b) {
  const io::Safetensors left = io::load_safetensors(a);
  const io::Safetensors right = io::load_safetensors(b);
  ASSERT_EQ(left.tensors.size(), right.tensors.size());
  for (std::size_t i = 0; i < left.tensors.size(); ++i) {
    EXPECT_EQ(left.tensors[i].first, right.tensors[i].first);
    EXPECT_TRUE(same_bits(left.tensors[i].second, right.tensors[i].second))
        << left.tensors[i].first << " differs between " << a << " and " << b;
  }
}

TEST(CliDeterministic, WeightsAreBitIdenticalForAnyThreadCount) {
  ScratchDir scratch;
  for (const std::string model : {"cnn", "resnet_small"}) {
    SCOPED_TRACE(model);
    for (const std::string threads : {"1", "2", "3"}) {
      const CliResult run =
          run_cli(train_args({"--model", model, "--epochs", "1", "--deterministic", "--threads",
                              threads, "--save-model", scratch.file(model + threads)}));
      ASSERT_EQ(run.status, 0) << run.err;
    }
    expect_same_files(scratch.file(model + "1/model.safetensors"),
                      scratch.file(model + "2/model.safetensors"));
    expect_same_files(scratch.file(model + "1/model.safetensors"),
                      scratch.file(model + "3/model.safetensors"));
  }
}

TEST(CliCheckpoints, ResumingAFinishedRunTrainsNothingAndGivesItsModel) {
  ScratchDir scratch;
  const std::string checkpoints = scratch.file("run");
  const CliResult first =
      run_cli(train_args({"--model", "mlp", "--deterministic", "--checkpoint-dir", checkpoints,
                          "--checkpoint-every", "3", "--save-model", scratch.file("first")}));
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.out.find("checkpoints: "), std::string::npos) << first.out;
  const std::vector<io::CheckpointInfo> kept = io::list_checkpoints(checkpoints);
  ASSERT_EQ(kept.size(), 3u);  // --keep-checkpoints defaults to 3
  EXPECT_EQ(kept.back().position, (io::TrainingPosition{2, 0, 16}));
  // The run's settings by key, as run files spell them.
  EXPECT_EQ(kept.back().config.at("model"), "mlp");
  EXPECT_EQ(kept.back().config.at("deterministic"), "true");

  const CliResult again = run_cli(
      {"train", "--resume", checkpoints, "--save-model", scratch.file("again"), "--threads", "1"});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("resumed: "), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("step 16: epoch 3, 0 of 8 batches done"), std::string::npos)
      << again.out;
  expect_same_files(scratch.file("first/model.safetensors"),
                    scratch.file("again/model.safetensors"));

  // Resuming from the middle of the run (an older checkpoint) ends with the same weights too.
  const CliResult middle = run_cli(
      {"train", "--resume", kept.front().path, "--save-model", scratch.file("middle"), "--quiet"});
  ASSERT_EQ(middle.status, 0) << middle.err;
  expect_same_files(scratch.file("first/model.safetensors"),
                    scratch.file("middle/model.safetensors"));
}

TEST(CliCheckpoints, MistakesAreUsageErrorsNamingTheOption) {
  ScratchDir scratch;
  const std::string checkpoints = scratch.file("run");
  ASSERT_EQ(
      run_cli(train_args({"--model", "mlp", "--epochs", "1", "--checkpoint-dir", checkpoints}))
          .status,
      0);
  const CliResult clash = run_cli(train_args({"--model", "mlp", "--checkpoint-dir", checkpoints}));
  EXPECT_EQ(clash.status, 2);
  EXPECT_NE(clash.err.find("holds checkpoints of another run"), std::string::npos) << clash.err;

  const CliResult other_model = run_cli({"train", "--resume", checkpoints, "--model", "cnn"});
  EXPECT_EQ(other_model.status, 2);
  EXPECT_NE(other_model.err.find("--model cnn differs from the run being resumed (--model mlp"),
            std::string::npos)
      << other_model.err;
  // Other data, named with another option than the run's: the message names both.
  ScratchDir other;
  testing::write_tiny_fashion_mnist(other.path(), 64, 16, 28, 28);
  const CliResult other_data =
      run_cli({"train", "--resume", checkpoints, "--data", other.path().string(), "--quiet"});
  EXPECT_EQ(other_data.status, 1);
  EXPECT_NE(
      other_data.err.find("the run read its training data from --data-dir " + tiny_data().dir() +
                          ", this one from --data " + other.path().string()),
      std::string::npos)
      << other_data.err;
  // The same value, spelt differently, is no change.
  const CliResult same_lr = run_cli({"train", "--resume", checkpoints, "--lr", "1e-3", "--quiet"});
  EXPECT_EQ(same_lr.status, 0) << same_lr.err;

  const CliResult no_dir = run_cli(train_args({"--checkpoint-every", "5"}));
  EXPECT_EQ(no_dir.status, 2);
  EXPECT_NE(no_dir.err.find("need --checkpoint-dir"), std::string::npos) << no_dir.err;
  const CliResult bad_log =
      run_cli(train_args({"--checkpoint-dir", scratch.file("x"), "--keep-best", "speed"}));
  EXPECT_EQ(bad_log.status, 2);
  EXPECT_NE(bad_log.err.find("--keep-best speed"), std::string::npos) << bad_log.err;

  const CliResult nothing = run_cli({"train", "--resume", scratch.file("absent")});
  EXPECT_EQ(nothing.status, 1);
  EXPECT_NE(nothing.err.find("does not exist"), std::string::npos) << nothing.err;

  // Damage in the newest checkpoint is named, and the intact older one offered.
  const std::vector<io::CheckpointInfo> kept = io::list_checkpoints(checkpoints);
  ASSERT_FALSE(kept.empty());
  testing::flip_byte(kept.back().path + "/optimizer.safetensors", 200);
  const CliResult damaged = run_cli({"train", "--resume", checkpoints});
  EXPECT_EQ(damaged.status, 1);
  EXPECT_NE(damaged.err.find("optimizer.safetensors"), std::string::npos) << damaged.err;
  EXPECT_NE(damaged.err.find("corrupt"), std::string::npos) << damaged.err;
}

TEST(CliCheckpoints, AFullFileSystemStopsTheRunAndKeepsTheEarlierCheckpoints) {
  // A real full disk: a 4 MiB tmpfs mounted in a private user and mount namespace (util-linux's
  // unshare), which holds the first cnn checkpoints (2.7 MB each, the older one deleted after the
  // newer is complete) but not a third beside two. Skipped where user namespaces are off.
  ScratchDir scratch;
  const std::string mount = scratch.file("small_disk");
  const std::string copy = scratch.file("after");
  fs::create_directories(mount);
  const std::string probe = "unshare --map-root-user --mount sh -c " +
                            shell_quote("mount -t tmpfs -o size=64k none " + shell_quote(mount)) +
                            " >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    GTEST_SKIP() << "SKIPPED: cannot mount a tmpfs in a user namespace here (unshare "
                    "--map-root-user --mount failed); the fault-injection tests in "
                    "checkpoint_test.cpp cover a full disk instead";
  }
  std::string train = shell_quote(TANDEM_CLI_PATH);
  for (const std::string& arg :
       train_args({"--model", "cnn", "--epochs", "3", "--checkpoint-dir", mount + "/run",
                   "--checkpoint-every", "2", "--keep-checkpoints", "2"})) {
    train += " " + shell_quote(arg);
  }
  const std::string script = "mount -t tmpfs -o size=4m none " + shell_quote(mount) + " && " +
                             train + " >" + shell_quote(scratch.file("out")) + " 2>" +
                             shell_quote(scratch.file("err")) + "; echo $? >" +
                             shell_quote(scratch.file("status")) + "; cp -a " +
                             shell_quote(mount + "/run") + " " + shell_quote(copy);
  ASSERT_EQ(std::system(("unshare --map-root-user --mount sh -c " + shell_quote(script)).c_str()),
            0);
  const std::string err = testing::slurp(scratch.file("err"));
  EXPECT_EQ(testing::slurp(scratch.file("status")), "1\n") << err;
  EXPECT_NE(err.find("ENOSPC"), std::string::npos) << err;
  EXPECT_NE(err.find("the earlier checkpoints in"), std::string::npos) << err;
  const std::vector<io::CheckpointInfo> left = io::list_checkpoints(copy);
  ASSERT_FALSE(left.empty()) << "no checkpoint survived";
  for (const io::CheckpointInfo& info : left)
    EXPECT_NO_THROW(io::verify_checkpoint(info.path)) << info.path;
  EXPECT_TRUE(testing::hidden_entries(copy).empty()) << "a half-written checkpoint was left";
}

// predict's inference path (batch norms folded, the model compiled, the last batch padded)
// gives the probabilities the model itself does, to the 4 decimals printed.
TEST(CliPredict, TheFoldedCompiledPathGivesTheModelsProbabilities) {
  ScratchDir scratch;
  const std::string model = scratch.file("model");
  ASSERT_EQ(run_cli(train_args({"--model", "resnet_small", "--epochs", "1", "--save-model", model}))
                .status,
            0);
  const std::string idx = tiny_data().dir() + "/t10k-images-idx3-ubyte.gz";
  const CliResult result =
      run_cli({"predict", "--model", model, "--top", "1", "--batch-size", "24", idx});
  ASSERT_EQ(result.status, 0) << result.err;
  nn::Model loaded = io::load_model(model);
  const Tensor images = data::read_idx(idx);  // (64, 28, 28) u8
  const std::vector<float> expected =
      reduce_max(
          softmax(loaded.predict(reshape(cast(images, DType::f32) / 255.0, {64, 28, 28, 1})), -1),
          {-1})
          .to_vector<float>();
  std::istringstream lines(result.out);
  std::string line;
  for (std::size_t i = 0; std::getline(lines, line); ++i) {
    ASSERT_LT(i, expected.size()) << result.out;
    const double printed = std::stod(line.substr(line.rfind(' ') + 1));
    EXPECT_NEAR(printed, expected[i], 1.5e-4) << line;
  }
}

TEST(CliPredict, PrintsTheTopClassesOfIdxPngJpegAndPgmImages) {
  ScratchDir scratch;
  const std::string model = scratch.file("model");
  ASSERT_EQ(run_cli(train_args({"--model", "mlp", "--epochs", "1", "--save-model", model})).status,
            0);
  // One image in every format: a bright square on black, 28x28 grey (PGM 16-bit 56x56: resized).
  Tensor image = Tensor::zeros({28, 28, 1}, DType::u8);
  for (int y = 8; y < 20; ++y) {
    for (int x = 8; x < 20; ++x)
      image.data<std::uint8_t>()[y * 28 + x] = 200;
  }
  auto save = [&](const std::string& name, const Tensor& bytes) {
    std::ofstream(scratch.file(name), std::ios::binary)
        .write(static_cast<const char*>(bytes.raw_data()),
               static_cast<std::streamsize>(bytes.nbytes()));
  };
  save("square.png", image::encode_png(image));
  save("square.jpg", image::encode_jpeg(image, 95));
  {
    std::ofstream pgm(scratch.file("square.pgm"), std::ios::binary);
    pgm << "P5\n# a comment\n56 56\n65535\n";
    for (int y = 0; y < 56; ++y) {
      for (int x = 0; x < 56; ++x) {
        const bool inside = y >= 16 && y < 40 && x >= 16 && x < 40;
        pgm.put(static_cast<char>(inside ? 0xC8 : 0)).put(0);
      }
    }
  }
  {
    std::ofstream ascii(scratch.file("ascii.pgm"));
    ascii << "P2 28 28 255\n";
    for (int i = 0; i < 28 * 28; ++i)
      ascii << (i % 28 > 10 ? 200 : 0) << " ";
  }
  const std::string idx = tiny_data().dir() + "/t10k-images-idx3-ubyte.gz";
  const CliResult result =
      run_cli({"predict", "--model", model, "--top", "2", idx, scratch.file("square.png"),
               scratch.file("square.jpg"), scratch.file("square.pgm"), scratch.file("ascii.pgm")});
  ASSERT_EQ(result.status, 0) << result.err;
  std::istringstream lines(result.out);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    // "<input>: <class> <p>, <class> <p>" with Fashion-MNIST's class names.
    EXPECT_NE(line.find(": "), std::string::npos) << line;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 1) << line;
  }
  EXPECT_EQ(count, 64 + 4) << result.out;
  EXPECT_NE(result.out.find(idx + "[63]: "), std::string::npos);
  EXPECT_NE(result.err.find("square.pgm is 56x56, resized to the model's 28x28"), std::string::npos)
      << result.err;
  bool named = false;
  for (const char* name : {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                           "Sneaker", "Bag", "Ankle boot"}) {
    named |= result.out.find(name) != std::string::npos;
  }
  EXPECT_TRUE(named) << result.out;

  save("notes.txt", Tensor::from_vector<std::uint8_t>({'h', 'i'}, {2}));
  const CliResult foreign = run_cli({"predict", "--model", model, scratch.file("notes.txt")});
  EXPECT_EQ(foreign.status, 1);
  EXPECT_NE(foreign.err.find("is not an input tandem predict reads"), std::string::npos);
  const CliResult no_input = run_cli({"predict", "--model", model});
  EXPECT_EQ(no_input.status, 2);
  EXPECT_NE(no_input.err.find("needs INPUT..."), std::string::npos) << no_input.err;
  testing::flip_byte(model + "/model.safetensors", 300);
  const CliResult damaged = run_cli({"predict", "--model", model, idx});
  EXPECT_EQ(damaged.status, 1);
  EXPECT_NE(damaged.err.find("model.safetensors"), std::string::npos) << damaged.err;
}

TEST(CliExport, WritesOnnxSavedModelAndKerasAndRefusesMistakes) {
  ScratchDir scratch;
  const std::string model = scratch.file("model");
  ASSERT_EQ(run_cli(train_args({"--model", "cnn", "--epochs", "1", "--save-model", model})).status,
            0);
  const CliResult exported = run_cli({"export", "--model", model, "--format", "onnx", "--output",
                                      scratch.file("cnn.onnx"), "--opset", "15"});
  ASSERT_EQ(exported.status, 0) << exported.err;
  EXPECT_NE(exported.out.find("ONNX opset 15"), std::string::npos) << exported.out;
  EXPECT_GT(fs::file_size(scratch.file("cnn.onnx")), 100000u);
  const CliResult saved = run_cli({"export", "--model", model, "--format", "savedmodel", "--output",
                                   scratch.file("serving/cnn/1")});
  ASSERT_EQ(saved.status, 0) << saved.err;
  EXPECT_NE(saved.out.find("TensorFlow SavedModel, signature serving_default"), std::string::npos)
      << saved.out;
  EXPECT_GT(fs::file_size(scratch.file("serving/cnn/1/saved_model.pb")), 100000u);
  EXPECT_TRUE(fs::is_directory(scratch.file("serving/cnn/1/variables")));
  const CliResult keras = run_cli(
      {"export", "--model", model, "--format", "keras", "--output", scratch.file("cnn.keras")});
  ASSERT_EQ(keras.status, 0) << keras.err;
  EXPECT_NE(keras.out.find("Keras 2.15 .keras file"), std::string::npos) << keras.out;
  const CliResult from_keras = run_cli({"train", "--data-dir", tiny_data().dir(), "--model",
                                        scratch.file("cnn.keras"), "--epochs", "1"});
  ASSERT_EQ(from_keras.status, 0) << from_keras.err;
  EXPECT_NE(from_keras.out.find("cnn.keras (with its weights)"), std::string::npos)
      << from_keras.out;
  const CliResult over_model =
      run_cli({"export", "--model", model, "--format", "savedmodel", "--output", model});
  EXPECT_EQ(over_model.status, 1);
  EXPECT_NE(over_model.err.find("holds files that are not a SavedModel"), std::string::npos)
      << over_model.err;
  for (const auto& [args, expected] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"export", "--format", "onnx", "--output", "x"}, "needs --model"},
           {{"export", "--model", model, "--format", "tflite", "--output", "x"},
            "unknown format 'tflite'"},
           {{"export", "--model", model, "--format", "onnx"}, "needs --output"},
           {{"export", "--model", model, "--format", "onnx", "--output", "x", "--opset", "9"},
            "--opset must be 13 to 17"},
           {{"export", "--model", model, "--format", "savedmodel", "--output", "x", "--opset",
             "15"},
            "--opset applies to --format onnx only"},
           {{"export", "--model", model, "--format", "keras", "--output", "x", "--weights-dtype",
             "f16"},
            "--weights-dtype applies to --format onnx only"},
           {{"export", "--model", model, "--format", "onnx", "--output", "x", "--weights-dtype",
             "f8"},
            "f8"}}) {
    const CliResult mistake = run_cli(args);
    EXPECT_EQ(mistake.status, 2) << expected;
    EXPECT_NE(mistake.err.find(expected), std::string::npos) << mistake.err;
  }
}

}  // namespace
}  // namespace tandem
