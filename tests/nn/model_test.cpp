// Models: Sequential (lazy and explicit build), the functional API with a residual block,
// shared layers, summary, the zoo, and the errors a wrong graph or input raises.
#include <gtest/gtest.h>

#include "ops/gradient_check.h"
#include "support/errors.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::expect_close;

using testing::error_of;

TEST(Sequential, BuildsLazilyFromTheFirstBatch) {
  nn::Sequential model({nn::Flatten(), nn::Dense(5, "relu")});
  model.add(nn::Dense(3));
  EXPECT_FALSE(model.built());
  EXPECT_EQ(model.layers().size(), 3u);
  const Tensor y = model(Tensor::ones({4, 2, 3}));
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  EXPECT_TRUE(model.built());
  EXPECT_EQ(model.input_shape(), (Shape{-1, 2, 3}));
  EXPECT_EQ(model.output_shape(), (Shape{-1, 3}));
  EXPECT_EQ(model.count_params(), 6 * 5 + 5 + 5 * 3 + 3);
  EXPECT_EQ(model.trainable_weights().size(), 4u);
  // Adding to a built model extends the graph at once.
  model.add(nn::Dense(2));
  EXPECT_EQ(model(Tensor::ones({1, 2, 3})).shape(), (Shape{1, 2}));
}

TEST(Sequential, ChainsLayersInOrder) {
  nn::Dense first(2, "linear", false);
  nn::Dense second(1, "linear", false);
  nn::Sequential model({first, second});
  model.build({2});
  first.set_weights({Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2})});
  second.set_weights({Tensor::from_vector<float>({1, -1}, {2, 1})});
  // [1, 1] -> [4, 6] -> -2
  expect_close(model(Tensor::ones({1, 2})), Tensor::from_vector<double>({-2}, {1, 1}), 1e-6);
}

TEST(Functional, ResidualBlockComputesConvPlusShortcut) {
  nn::clear_session();
  const nn::SymbolicTensor inputs = nn::Input({4, 4, 2});
  // Keras-like keyword arguments through designated initializers.
  nn::Conv2D conv(2, 3, {.padding = "same", .activation = "linear"});
  const nn::SymbolicTensor residual = conv(inputs);
  const nn::SymbolicTensor outputs = nn::Activation("relu")(nn::Add()({residual, inputs}));
  nn::Model model(inputs, outputs, "residual");
  EXPECT_EQ(model.output_shape(), (Shape{-1, 4, 4, 2}));
  EXPECT_EQ(model.layers().size(), 3u);

  const Tensor x = testing::random_tensor({3, 4, 4, 2}, -1, 1, 0.05, DType::f32);
  const Tensor expected = relu(add(conv(x), x));
  expect_close(model(x), expected, 1e-6);

  const std::string summary = model.summary_string();
  EXPECT_NE(summary.find("Model: \"residual\""), std::string::npos) << summary;
  EXPECT_NE(summary.find("Connected to"), std::string::npos) << summary;
  EXPECT_NE(summary.find("input_layer (InputLayer)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("conv2d[0][0], input_layer[0][0]"), std::string::npos) << summary;
  EXPECT_NE(summary.find("(None, 4, 4, 2)"), std::string::npos) << summary;
}

TEST(Functional, SharedLayerAppearsOnceWithOneSetOfWeights) {
  const nn::SymbolicTensor inputs = nn::Input({3});
  nn::Dense shared(3);
  const nn::SymbolicTensor outputs = shared(shared(inputs));
  nn::Model model(inputs, outputs);
  EXPECT_EQ(model.layers().size(), 1u);
  EXPECT_EQ(model.weights().size(), 2u);
  const Tensor x = Tensor::ones({2, 3});
  expect_close(model(x), shared(shared(x)), 1e-6);
}

TEST(Functional, GraphAndInputErrorsAreClear) {
  const nn::SymbolicTensor a = nn::Input({3}, DType::f32, "a");
  const nn::SymbolicTensor b = nn::Input({3}, DType::f32, "b");
  const nn::SymbolicTensor sum = nn::Add()({nn::Dense(3)(a), b});
  const std::string disconnected = error_of([&] { nn::Model(a, sum); });
  EXPECT_NE(disconnected.find("input 'b'"), std::string::npos) << disconnected;
  EXPECT_NE(error_of([&] { nn::Model(nn::Dense(2)(a), a); }).find("nn::Input"), std::string::npos);
  EXPECT_NE(error_of([] { nn::Input({0, 3}); }).find("positive"), std::string::npos);

  nn::Model model(a, nn::Dense(2)(a), "net");
  const std::string mismatch = error_of([&] { model(Tensor::ones({5, 4})); });
  EXPECT_NE(mismatch.find("Model 'net' expects inputs (None, 3) f32, got (5, 4) f32"),
            std::string::npos)
      << mismatch;
  EXPECT_NE(error_of([&] { model.get_layer("nope"); }).find("its layers:"), std::string::npos);
  EXPECT_NE(error_of([] { nn::Sequential().build({3}); }).find("no layers"), std::string::npos);
  EXPECT_NE(error_of([] { nn::Sequential().summary_string(); }).find("not built"),
            std::string::npos);
}

TEST(Summary, SequentialTableAndTotals) {
  nn::clear_session();
  nn::Model model = nn::zoo::build("cnn", {28, 28, 1}, 10);
  const std::string summary = model.summary_string();
  // conv 3*3*1*32 + 32 = 320; conv 3*3*32*64 + 64 = 18,496; dense 1600*64 + 64 = 102,464;
  // dense 64*10 + 10 = 650; total 121,930 f32 = 476.29 KB.
  for (const char* piece : {"Model: \"cnn\"",
                            "Layer (type)",
                            "Output Shape",
                            "Param #",
                            "conv2d (Conv2D)",
                            "(None, 26, 26, 32)",
                            "320",
                            "max_pooling2d (MaxPooling2D)",
                            "(None, 13, 13, 32)",
                            "18,496",
                            "(None, 5, 5, 64)",
                            "flatten (Flatten)",
                            "(None, 1600)",
                            "102,464",
                            "dense_1 (Dense)",
                            "(None, 10)",
                            "650",
                            " Total params: 121,930 (476.29 KB)",
                            " Trainable params: 121,930 (476.29 KB)",
                            " Non-trainable params: 0 (0.00 B)"}) {
    EXPECT_NE(summary.find(piece), std::string::npos) << piece << "\n" << summary;
  }
  EXPECT_EQ(summary.find("Connected to"), std::string::npos);
}

TEST(Zoo, BuildsEveryNamedModel) {
  EXPECT_EQ(nn::zoo::names(),
            (std::vector<std::string>{"cnn", "mlp", "resnet_small", "resnet50", "bert_base"}));
  for (const std::string& name : nn::zoo::names()) {
    if (name == "bert_base") continue;  // takes token ids: tests/nn/zoo_large_models_test.cpp
    nn::Model model = nn::zoo::build(name, {28, 28, 1}, 10);
    EXPECT_EQ(model.name(), name);
    EXPECT_EQ(model.output_shape(), (Shape{-1, 10}));
    EXPECT_EQ(model(Tensor::zeros({2, 28, 28, 1})).shape(), (Shape{2, 10}));
  }
  EXPECT_EQ(nn::zoo::build("mlp", {28, 28, 1}, 10).count_params(), 784 * 128 + 128 + 1290);
  nn::Model resnet = nn::zoo::build("resnet_small", {28, 28, 1}, 10);
  int adds = 0;
  int norms = 0;
  for (const nn::Layer& layer : resnet.layers()) {
    const std::string kind = layer.impl().class_name();
    adds += kind == "Add";
    norms += kind == "BatchNormalization";
  }
  EXPECT_EQ(adds, 3);
  EXPECT_GE(norms, 7);
  EXPECT_FALSE(resnet.non_trainable_weights().empty());
  EXPECT_EQ(resnet.get_layer(resnet.layers().back().name()).impl().class_name(),
            std::string("Dense"));
}

TEST(Zoo, UnknownNameListsTheModels) {
  const std::string message = error_of([] { nn::zoo::build("vgg", {28, 28, 1}, 10); });
  EXPECT_NE(message.find("'vgg'"), std::string::npos);
  EXPECT_NE(message.find("cnn, mlp, resnet_small"), std::string::npos) << message;
}

}  // namespace
}  // namespace tandem
