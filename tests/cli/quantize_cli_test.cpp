// `tandem train --quantize int8`: post-training quantisation and quantisation-aware training from
// the command line; the report holds the fp32 and int8 figures and each layer's calibration, the
// saved model loads quantised, predicts (timed with --timing) and exports to QDQ ONNX (not to a
// SavedModel), and the options' mistakes are one-line errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "tandem/io.h"
#include "tandem/runtime.h"

namespace tandem::testing {
namespace {

TEST(QuantizeCli, QuantisesAfterTrainingAndSavesTheQuantisedModel) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 256, 64, 28, 28);
  const std::string report = dir.file("report.json");
  const CliResult result = run_cli({"train",
                                    "--model",
                                    "cnn",
                                    "--epochs",
                                    "1",
                                    "--batch-size",
                                    "32",
                                    "--quantize",
                                    "int8",
                                    "--calibrator",
                                    "percentile",
                                    "--calibration-examples",
                                    "64",
                                    "--qat-epochs",
                                    "1",
                                    "--data-dir",
                                    dir.path().string(),
                                    "--report",
                                    report,
                                    "--save-model",
                                    dir.file("model")});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.out, "test accuracy (fp32, before quantising): ");
  expect_contains(result.out,
                  "quantisation: int8, 4 layers calibrated (percentile) on 64 training examples: "
                  "conv2d uint8 [0, ");
  expect_contains(result.out, "quantisation-aware training: 1 epoch, Adam lr 1e-04");
  const nlohmann::json json = nlohmann::json::parse(slurp(report));
  const nlohmann::json& quantized = json.at("quantization");
  EXPECT_EQ(quantized.at("calibrator"), "percentile");
  EXPECT_EQ(quantized.at("qat_epochs"), 1);
  EXPECT_TRUE(quantized.at("fp32_test_accuracy").is_number());
  EXPECT_EQ(quantized.at("layers").size(), 4u);
  EXPECT_EQ(quantized.at("layers").at("dense_1").at("input"), "uint8");

  nn::Model saved = io::load_model(dir.file("model"));
  EXPECT_EQ(quantization::quantized_inputs(saved).size(), 4u);
  const CliResult exported = run_cli({"export", "--model", dir.file("model"), "--format", "onnx",
                                      "--output", dir.file("int8.onnx")});
  ASSERT_EQ(exported.status, 0) << exported.err;
  expect_contains(exported.out, "ONNX opset 13, int8 in QDQ form");
  expect_error({"export", "--model", dir.file("model"), "--format", "savedmodel", "--output",
                dir.file("sm")},
               1, {"is quantised to int8, and SavedModel export writes float graphs"});
  const CliResult predicted =
      run_cli({"predict", "--model", dir.file("model"), "--timing", "--batch-size", "16",
               dir.file("t10k-images-idx3-ubyte.gz")});
  EXPECT_EQ(predicted.status, 0) << predicted.err;
  expect_contains(predicted.out,
                  std::string("(int8); ") +
                      (cpu_kernels().int8 ? "int8 kernels (oneDNN)"
                                          : "int8 grid in f32 kernels (this CPU has no VNNI)") +
                      ", batch norms folded, compiled");
  expect_contains(predicted.out, "timing: batch 1, 64 images: latency p50 ");
  expect_contains(predicted.out, "timing: batch 16, 64 images: ");
}

TEST(QuantizeCli, MistakesAreOneLineErrors) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 64, 32, 28, 28);
  expect_error({"train", "--quantize", "int4"}, 2, {"--quantize"});
  expect_error({"train", "--calibrator", "entropy"}, 2, {"add --quantize int8"});
  expect_error({"train", "--quantize", "int8", "--calibrator", "kl"}, 2, {"kl"});
  expect_error({"train", "--quantize", "int8", "--qat-epochs", "0"}, 2, {"--qat-epochs"});
  expect_error({"train", "--model", "mlp", "--quantize", "int8", "--quantize-layers", "flatten",
                "--data-dir", dir.path().string()},
               1, {"layer 'flatten' (Flatten) has no kernel to quantise"});
}

}  // namespace
}  // namespace tandem::testing
