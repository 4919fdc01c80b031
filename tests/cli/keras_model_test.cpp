// `tandem train --model FILE` with Keras models that TensorFlow 2.15 wrote and trained
// (tests/cli/keras_models.py): a Sequential CNN from model.to_json() and a Functional model with a
// residual branch from a .keras file train in Tandem with Keras' weight counts and reach Keras'
// test accuracy within 1.5 points after the same epochs; a saved Tandem model trains on from its
// weights; mistakes name the file. Skipped, with the reason, where TensorFlow cannot be installed.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "support/python_env.h"

namespace tandem::testing {
namespace {

constexpr int kEpochs = 2;

TEST(KerasModelCli, KerasModelsTrainToKerasAccuracy) {
  TANDEM_REQUIRE_PYTHON_ENV(env, "tfrecord");
  ScratchDir dir;
  ASSERT_EQ(run_shell(shell_quote(env.python) + " " +
                      shell_quote(std::string(TANDEM_SOURCE_DIR) + "/tests/cli/keras_models.py") +
                      " " + shell_quote(dir.path().string()) + " " + std::to_string(kEpochs)),
            0);
  const nlohmann::json keras = nlohmann::json::parse(slurp(dir.file("keras_results.json")));
  for (const auto& [name, file] :
       {std::pair{"cnn", "cnn.json"}, std::pair{"residual", "residual.keras"}}) {
    SCOPED_TRACE(name);
    const std::string report = dir.file(std::string(name) + "-report.json");
    // As Keras trained it: Adam from 1e-3 decayed along a cosine, batch 32, the full training
    // set.
    const CliResult result = run_cli({"train", "--model", dir.file(file), "--epochs",
                                      std::to_string(kEpochs), "--batch-size", "32", "--lr",
                                      "0.001", "--lr-schedule", "cosine", "--report", report});
    ASSERT_EQ(result.status, 0) << result.err;
    expect_contains(result.out, "training Keras ");
    const nlohmann::json tandem = nlohmann::json::parse(slurp(report));
    EXPECT_EQ(tandem.at("weights"), keras.at(name).at("params"));
    const double keras_accuracy = keras.at(name).at("test_accuracy").get<double>();
    const double tandem_accuracy = tandem.at("test_accuracy").get<double>();
    std::cout << name << ": test accuracy Keras " << keras_accuracy << ", Tandem "
              << tandem_accuracy << "\n";
    EXPECT_LE(std::abs(tandem_accuracy - keras_accuracy), 0.015) << result.out;
  }
}

TEST(KerasModelCli, ASavedModelTrainsOnAndMistakesNameTheFile) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 64, 32, 28, 28);
  const std::string saved = dir.file("model");
  ASSERT_EQ(run_cli({"train", "--model", "mlp", "--epochs", "1", "--data-dir", dir.path().string(),
                     "--save-model", saved})
                .status,
            0);
  const CliResult resumed =
      run_cli({"train", "--model", saved, "--epochs", "1", "--data-dir", dir.path().string()});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  expect_contains(resumed.out, "training saved model 'mlp' from " + saved + " (with its weights)");

  expect_error({"train", "--model", dir.file("nothing.json")}, 2,
               {"unknown model", "nothing.json", "cnn, mlp"});
  std::ofstream(dir.file("bad.json")) << R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 28, 28, 1]}},
      {"class_name": "LSTM", "config": {"name": "lstm", "units": 4}}]}})";
  expect_error({"train", "--model", dir.file("bad.json"), "--data-dir", dir.path().string()}, 1,
               {dir.file("bad.json"), "layer 'lstm' (LSTM)", "not one Tandem has"});
  // The model's input must be the data's images.
  std::ofstream(dir.file("small.json")) << R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 8, 8, 1]}},
      {"class_name": "Flatten", "config": {"name": "flatten"}},
      {"class_name": "Dense", "config": {"name": "dense", "units": 10}}]}})";
  expect_error({"train", "--model", dir.file("small.json"), "--data-dir", dir.path().string()}, 2,
               {"takes inputs (-1, 8, 8, 1)", "(-1, 28, 28, 1)"});
}

}  // namespace
}  // namespace tandem::testing
