// Importing PyTorch state dicts (safetensors): PyTorch's layouts and names, written here from a
// Tandem model's own weights, load back to the same predictions (Conv2d, Linear after a Flatten
// of NCHW features, BatchNorm with its running statistics); explicit module mapping; and one
// error line per tensor that does not fit. (tests/io/interop_test.cpp loads files PyTorch wrote.)
#include <gtest/gtest.h>

#include "io/io_support.h"
#include "support/errors.h"

namespace tandem {
namespace {

using testing::error_of;
using testing::same_bits;
using testing::ScratchDir;

// small_model's weights as PyTorch holds them for the same network written in PyTorch:
// features.0 (Conv2d, no bias), features.1 (BatchNorm2d), classifier.0 / classifier.2 (Linear).
io::NamedTensors as_pytorch_state_dict(const nn::Model& model) {
  const std::vector<Tensor> w = model.weights();
  // w: conv kernel (3,3,1,4); bn gamma, beta, mean, var (4); dense kernel (36,8), bias (8);
  // dense_1 kernel (8,3), bias (3).
  // Tandem flattens (H, W, C) = (3, 3, 4); PyTorch flattens (C, H, W).
  const Tensor dense = w[5];  // (36, 8): rows (h, w, c)
  const Tensor torch_dense =
      reshape(transpose(reshape(transpose(dense, {1, 0}), {8, 3, 3, 4}), {0, 3, 1, 2}), {8, 36});
  return {{"classifier.0.bias", w[6]},
          {"classifier.0.weight", torch_dense},
          {"classifier.2.bias", w[8]},
          {"classifier.2.weight", transpose(w[7], {1, 0})},
          {"features.0.weight", transpose(w[0], {3, 2, 0, 1})},
          {"features.1.bias", w[2]},
          {"features.1.num_batches_tracked", Tensor::from_vector<std::int64_t>({37}, {})},
          {"features.1.running_mean", w[3]},
          {"features.1.running_var", w[4]},
          {"features.1.weight", w[1]}};
}

TEST(TorchImport, PyTorchLayoutsLoadToTheSamePredictions) {
  ScratchDir scratch;
  nn::Model source = testing::small_model(4);
  source.fit(*testing::small_dataset(), {.epochs = 1});  // moving statistics that are not 0 and 1
  io::save_safetensors(scratch.file("torch.safetensors"), as_pytorch_state_dict(source),
                       {{"format", "pt"}});
  nn::Model target = testing::small_model(9);
  io::import_torch_weights(target, scratch.file("torch.safetensors"));
  testing::expect_same_weights(source, target);
  const testing::ImageProblem problem = testing::image_problem(6, 2);
  EXPECT_TRUE(same_bits(target.predict(problem.x), source.predict(problem.x)));
}

TEST(TorchImport, ModulesCanBePairedWithLayersByName) {
  ScratchDir scratch;
  nn::Model source = testing::small_model(4);
  io::NamedTensors renamed;
  for (auto [name, tensor] : as_pytorch_state_dict(source)) {
    // Names that sort against the model's order: "head" before "stem", "out" before "hidden".
    if (name.starts_with("classifier.0")) name.replace(0, 12, "head.z_hidden");
    if (name.starts_with("classifier.2")) name.replace(0, 12, "head.a_out");
    if (name.starts_with("features.0")) name.replace(0, 10, "stem.conv");
    if (name.starts_with("features.1")) name.replace(0, 10, "stem.bn");
    renamed.emplace_back(name, tensor);
  }
  io::save_safetensors(scratch.file("torch.safetensors"), renamed);
  nn::Model target = testing::small_model(9);
  EXPECT_THROW(io::import_torch_weights(target, scratch.file("torch.safetensors")),
               InvalidArgument);
  io::import_torch_weights(target, scratch.file("torch.safetensors"),
                           {.modules = {{"stem.conv", "conv2d"},
                                        {"stem.bn", "batch_normalization"},
                                        {"head.z_hidden", "dense"},
                                        {"head.a_out", "dense_1"}}});
  testing::expect_same_weights(source, target);
}

TEST(TorchImport, EachMismatchedTensorIsNamed) {
  ScratchDir scratch;
  nn::Model source = testing::small_model(4);
  io::NamedTensors state = as_pytorch_state_dict(source);
  state.erase(state.begin() + 2);                              // classifier.2.bias
  state[1].second = Tensor::zeros({8, 35});                    // classifier.0.weight
  state.emplace_back("features.1.extra", Tensor::zeros({4}));  // unexpected
  io::save_safetensors(scratch.file("torch.safetensors"), state);
  nn::Model target = testing::small_model(9);
  const Tensor before = target.weights().front().clone();
  const std::string message =
      error_of([&] { io::import_torch_weights(target, scratch.file("torch.safetensors")); });
  EXPECT_NE(message.find("'classifier.0.weight' is (8, 35) but Dense 'dense'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("needs 'classifier.2.bias' (3,), which the file lacks"), std::string::npos)
      << message;
  EXPECT_NE(message.find("'features.1.extra' (4,) has no counterpart"), std::string::npos)
      << message;
  EXPECT_NE(message.find("(3 problems)"), std::string::npos) << message;
  EXPECT_NE(message.find("torch.safetensors"), std::string::npos) << message;
  EXPECT_TRUE(same_bits(before, target.weights().front())) << "a refused import changed weights";
}

TEST(TorchImport, AModuleOfAnotherKindOrCountIsReported) {
  ScratchDir scratch;
  io::save_safetensors(scratch.file("linear_only.safetensors"),
                       {{"fc.weight", Tensor::zeros({3, 36})}, {"fc.bias", Tensor::zeros({3})}});
  nn::Model target = testing::small_model();
  const std::string message =
      error_of([&] { io::import_torch_weights(target, scratch.file("linear_only.safetensors")); });
  EXPECT_NE(message.find("'fc.weight' is (3, 36) but Dense 'dense'"), std::string::npos) << message;
  EXPECT_NE(message.find("Conv2D 'conv2d' has no Conv2d module in the file"), std::string::npos)
      << message;
  EXPECT_NE(message.find("Dense 'dense_1' has no Linear module in the file"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace tandem
