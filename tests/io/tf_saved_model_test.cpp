// SavedModel export without TensorFlow: the folder's shape (saved_model.pb, an empty variables/),
// the TensorFlow op names and signature in the graph's bytes, replacing an earlier export, and
// refusals that name the layer or folder and leave nothing behind. (tests/io/interop_test.cpp
// loads the exports in TensorFlow and compares predictions.)
#include <gtest/gtest.h>

#include <filesystem>

#include "core/files.h"
#include "io/io_support.h"
#include "support/errors.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::ScratchDir;

std::string graph_bytes(const std::string& directory) {
  const std::vector<std::uint8_t> bytes = read_whole_file(directory + "/saved_model.pb");
  return {bytes.begin(), bytes.end()};
}

// The folder's entries, hidden ones (staging) included.
std::vector<std::string> entries(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(TfSavedModel, TheZooModelsBecomeTensorFlowOpsWithAServingSignature) {
  ScratchDir scratch;
  const std::map<std::string, std::vector<std::string>> expected_ops{
      {"cnn", {"Conv2D", "BiasAdd", "Relu", "MaxPool", "Reshape", "MatMul"}},
      {"resnet_small", {"Conv2D", "FusedBatchNormV3", "AddV2", "Mean", "MatMul"}},
      {"mlp", {"Reshape", "MatMul", "BiasAdd", "Relu"}}};
  for (const auto& [name, ops] : expected_ops) {
    SCOPED_TRACE(name);
    const nn::Model model = nn::zoo::build(name, {28, 28, 1}, 10);
    const std::string directory = scratch.file(name);
    io::export_saved_model(model, directory);
    EXPECT_EQ(entries(directory), (std::vector<std::string>{"saved_model.pb", "variables"}));
    EXPECT_TRUE(fs::is_empty(directory + "/variables"));
    const std::string graph = graph_bytes(directory);
    for (const std::string& expected : {"serve", "serving_default", "tensorflow/serving/predict",
                                        "Placeholder", "input:0", "output:0", "Identity"}) {
      EXPECT_NE(graph.find(expected), std::string::npos) << expected;
    }
    for (const std::string& op : ops)
      EXPECT_NE(graph.find(op), std::string::npos) << op;
    // Every weight is in the graph, as constants.
    std::size_t weight_bytes = 0;
    for (const Tensor& weight : model.weights())
      weight_bytes += weight.nbytes();
    EXPECT_GT(graph.size(), weight_bytes);
  }
}

TEST(TfSavedModel, ReplacesAnEarlierExportAndRefusesOtherFolders) {
  ScratchDir scratch;
  nn::Sequential small({nn::Dense(2)});
  small.build({3});
  const std::string directory = scratch.file("exported");
  io::export_saved_model(small, directory);
  const std::string first = graph_bytes(directory);
  nn::Sequential wider({nn::Dense(5)});
  wider.build({3});
  io::export_saved_model(wider, directory);
  EXPECT_NE(graph_bytes(directory), first);
  EXPECT_EQ(entries(scratch.path().string()), (std::vector<std::string>{"exported"}));

  fs::create_directory(scratch.file("notes"));
  write_file_atomically(scratch.file("notes/todo.txt"), std::string_view("keep me"));
  EXPECT_NE(error_of<IoError>([&] {
              io::export_saved_model(small, scratch.file("notes"));
            }).find("holds files that are not a SavedModel"),
            std::string::npos);
  EXPECT_EQ(entries(scratch.file("notes")), (std::vector<std::string>{"todo.txt"}));
}

TEST(TfSavedModel, RefusesWhatItCannotWriteNamingItAndLeavesNothing) {
  ScratchDir scratch;
  nn::Sequential custom({nn::Dense(2), nn::Layer(std::make_shared<testing::CustomLayer>())});
  custom.build({3});
  EXPECT_NE(error_of([&] {
              io::export_saved_model(custom, scratch.file("custom"));
            }).find("(Custom) is a custom layer; SavedModel export covers the built-in layers"),
            std::string::npos);
  nn::Sequential embedding({nn::Embedding(10, 4)}, "tokens");
  embedding.build({6});
  const std::string refused =
      error_of([&] { io::export_saved_model(embedding, scratch.file("tokens")); });
  EXPECT_NE(refused.find("(Embedding) has no SavedModel translation yet"), std::string::npos)
      << refused;
  nn::Sequential unbuilt({nn::Dense(2)});
  EXPECT_NE(
      error_of([&] { io::export_saved_model(unbuilt, scratch.file("unbuilt")); }).find("not built"),
      std::string::npos);
  nn::Sequential half({nn::Dense(2).with_dtype_policy("bfloat16")});
  half.build({3});
  EXPECT_NE(error_of([&] {
              io::export_saved_model(half, scratch.file("half"));
            }).find("covers f32 and f64 models"),
            std::string::npos);
  EXPECT_TRUE(entries(scratch.path().string()).empty());
}

}  // namespace
}  // namespace tandem
