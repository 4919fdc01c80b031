// `tandem train --prune`: magnitude pruning from the command line; the report and the saved model
// hold the zeros, TensorBoard gets each layer's sparsity, 2:4 prunes half, and the options'
// mistakes are one-line errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "tandem/io.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

double zero_share(const Tensor& weight) {
  std::int64_t zeros = 0;
  for (const float value : weight.to_vector<float>())
    zeros += value == 0.0f ? 1 : 0;
  return static_cast<double>(zeros) / static_cast<double>(weight.numel());
}

bool file_mentions(const fs::path& folder, const std::string& text) {
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(folder)) {
    if (entry.is_regular_file() && slurp(entry.path().string()).find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(PruneCli, TrainsToTheSparsityAndSavesTheZeros) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 256, 64, 28, 28);
  const std::string report = dir.file("report.json");
  const CliResult result =
      run_cli({"train", "--model", "mlp", "--epochs", "2", "--batch-size", "16", "--prune", "0.75",
               "--prune-schedule", "constant", "--data-dir", dir.path().string(), "--logdir",
               dir.file("logs"), "--report", report, "--save-model", dir.file("model")});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out,
                  "pruning: unstructured magnitude pruning of 2 kernels to sparsity 0.75");
  expect_contains(result.out,
                  "pruning: 75.0% of the pruned kernels are zero: dense 75.0% dense_1 75.0%");
  const nlohmann::json json = nlohmann::json::parse(slurp(report));
  EXPECT_DOUBLE_EQ(json.at("pruning").at("sparsity").get<double>(), 0.75);
  EXPECT_EQ(json.at("config").at("prune"), "0.75");
  nn::Model saved = io::load_model(dir.file("model"));
  EXPECT_NEAR(zero_share(saved.get_layer("dense").weights().front()), 0.75, 1e-4);
  EXPECT_TRUE(file_mentions(dir.path() / "logs" / "train", "pruning/dense/sparsity"));

  const CliResult structured =
      run_cli({"train", "--model", "mlp", "--epochs", "1", "--prune-pattern", "2:4", "--data-dir",
               dir.path().string(), "--report", report});
  ASSERT_EQ(structured.status, 0) << structured.err;
  expect_contains(structured.out, "pruning: 2:4 magnitude pruning of 2 kernels to sparsity 0.5");
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(slurp(report)).at("pruning").at("sparsity").get<double>(),
                   0.5);
}

TEST(PruneCli, MistakesAreOneLineErrors) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 64, 32, 28, 28);
  expect_error({"train", "--prune", "1.5"}, 2, {"--prune"});
  expect_error({"train", "--prune", "0"}, 2, {"--prune takes a sparsity above 0 and below 1"});
  expect_error({"train", "--prune-layers", "dense"}, 2, {"add --prune"});
  expect_error({"train", "--prune-pattern", "2:4", "--prune", "0.8"}, 2,
               {"2:4 prunes exactly half"});
  expect_error({"train", "--model", "mlp", "--prune", "0.5", "--prune-layers", "flatten",
                "--data-dir", dir.path().string()},
               1, {"layer 'flatten' (Flatten) has no kernel to prune"});
}

}  // namespace
}  // namespace tandem::testing
