// Interop with the real TensorBoard (pip `tensorboard`, pinned in
// scripts/requirements-tensorboard.txt): a run written by Tandem is loaded by TensorBoard's own
// EventMultiplexer and hparams plugin (tests/observe/tensorboard_interop.py): the scalars,
// histograms, images and text must come back with the values written, and two runs must be two
// rows of the HParams table with their values and metrics. Skipped, with the reason, where the
// package index cannot be reached to install TensorBoard.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/idx_files.h"
#include "support/python_env.h"
#include "tandem/image.h"
#include "tandem/observe.h"

namespace tandem::testing {
namespace {

std::string base64(const Tensor& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* data = static_cast<const unsigned char*>(bytes.raw_data());
  const auto size = static_cast<std::size_t>(bytes.numel());
  std::string text;
  for (std::size_t i = 0; i < size; i += 3) {
    const std::uint32_t chunk =
        (data[i] << 16) | (i + 1 < size ? data[i + 1] << 8 : 0) | (i + 2 < size ? data[i + 2] : 0);
    text += alphabet[(chunk >> 18) & 63];
    text += alphabet[(chunk >> 12) & 63];
    text += i + 1 < size ? alphabet[(chunk >> 6) & 63] : '=';
    text += i + 2 < size ? alphabet[chunk & 63] : '=';
  }
  return text;
}

TEST(TensorBoardInterop, TensorBoardReadsBackWhatTandemWrote) {
  TANDEM_REQUIRE_PYTHON_ENV(env, "tensorboard");
  const std::string source = TANDEM_SOURCE_DIR;

  ScratchDir dir;
  const std::string logdir = dir.file("logs");
  std::vector<std::uint8_t> pixels(4 * 5 * 3);
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<std::uint8_t>(i * 4);
  const Tensor image = Tensor::from_vector(pixels, {4, 5, 3});  // (H, W, C) u8
  // Two runs, as two `tandem train --logdir logs/<run>` would leave them: a and b.
  {
    observe::SummaryWriter root(logdir + "/a");
    root.add_hparams_session_start(
        {{"learning_rate", 0.001}, {"optimizer", std::string("adam")}, {"augment", true}});
    root.add_text("config", "**bold** settings", 0);
    observe::SummaryWriter train(logdir + "/a/train");
    for (int step = 0; step < 3; ++step)
      train.add_scalar("epoch_loss", 0.5 / (1 << step), step, 1.7e9 + step);
    train.add_histogram("weights", Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4}), 1, 2);
    train.add_image("sample", image, 2);
    root.add_hparams_session_end(observe::SessionStatus::success);
  }
  {
    observe::SummaryWriter root(logdir + "/b");
    root.add_hparams_session_start(
        {{"learning_rate", 0.01}, {"optimizer", std::string("sgd")}, {"augment", false}});
    observe::SummaryWriter train(logdir + "/b/train");
    train.add_scalar("epoch_loss", 0.75, 0);
    root.add_hparams_session_end(observe::SessionStatus::failure);
  }

  const std::string output = dir.file("tensorboard.json");
  const std::string script = source + "/tests/observe/tensorboard_interop.py";
  ASSERT_EQ(run_shell(shell_quote(env.python) + " " + shell_quote(script) + " " +
                      shell_quote(logdir) + " >" + shell_quote(output)),
            0)
      << "TensorBoard could not load the run; see the Python traceback above";
  const nlohmann::json loaded = nlohmann::json::parse(slurp(output));

  const nlohmann::json& train = loaded["runs"]["a/train"];
  const nlohmann::json& losses = train["scalars"]["epoch_loss"];
  ASSERT_EQ(losses.size(), 3u) << loaded.dump(1);
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(losses[step][0], step);
    EXPECT_EQ(losses[step][1].get<double>(), 0.5 / (1 << step));
    EXPECT_EQ(losses[step][2].get<double>(), 1.7e9 + step);
  }

  // Two buckets over [1, 4]: [1, 2.5) holds 1 and 2, [2.5, 4] holds 3 and 4.
  const nlohmann::json& histogram = train["histograms"]["weights"];
  ASSERT_EQ(histogram.size(), 1u) << loaded.dump(1);
  EXPECT_EQ(histogram[0][0], 1);
  const nlohmann::json expected_buckets = nlohmann::json::parse("[[1, 2.5, 2], [2.5, 4, 2]]");
  EXPECT_EQ(histogram[0][1], expected_buckets);

  const nlohmann::json& images = train["images"]["sample"];
  ASSERT_EQ(images.size(), 1u) << loaded.dump(1);
  EXPECT_EQ(images[0][0], 2);
  EXPECT_EQ(images[0][1], 5);  // width
  EXPECT_EQ(images[0][2], 4);  // height
  EXPECT_EQ(images[0][3], base64(image::encode_png(image)));

  const nlohmann::json& text = loaded["runs"]["a"]["text"]["config"];
  ASSERT_EQ(text.size(), 1u) << loaded.dump(1);
  EXPECT_EQ(text[0][1], "**bold** settings");

  // The HParams table: a row per run with its values, its last epoch_loss and its status.
  const nlohmann::json& groups = loaded["session_groups"];
  ASSERT_EQ(groups.size(), 2u) << loaded.dump(1);
  const nlohmann::json& a = groups["a"];
  EXPECT_EQ(a["hparams"]["learning_rate"], 0.001) << loaded.dump(1);
  EXPECT_EQ(a["hparams"]["optimizer"], "adam");
  EXPECT_EQ(a["hparams"]["augment"], true);
  EXPECT_EQ(a["metrics"]["train/epoch_loss"], 0.125);
  EXPECT_EQ(a["statuses"], nlohmann::json::parse("[1]"));  // STATUS_SUCCESS
  const nlohmann::json& b = groups["b"];
  EXPECT_EQ(b["hparams"]["learning_rate"], 0.01) << loaded.dump(1);
  EXPECT_EQ(b["hparams"]["optimizer"], "sgd");
  EXPECT_EQ(b["hparams"]["augment"], false);
  EXPECT_EQ(b["metrics"]["train/epoch_loss"], 0.75);
  EXPECT_EQ(b["statuses"], nlohmann::json::parse("[2]"));  // STATUS_FAILURE
}

}  // namespace
}  // namespace tandem::testing
