// The zoo's accelerator workloads: ResNet-50 v1.5 and the BERT-base-sized transformer encoder.
// They are checked by structure (weights, shapes) and by a training step at a small input size;
// full-size training is the benchmark's job (bench/).
#include <gtest/gtest.h>

#include "tandem/tandem.h"

namespace tandem {
namespace {

TEST(Zoo, ListsTheAcceleratorWorkloads) {
  const std::vector<std::string> names = nn::zoo::names();
  for (const char* name : {"resnet50", "bert_base"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

// torchvision's resnet50 has 25,557,032 parameters; its BatchNorm running statistics are
// buffers, here non-trainable weights (2 x 26,560).
TEST(Zoo, ResNet50HasTheReferenceParameterCount) {
  nn::Model model = nn::zoo::build("resnet50", {224, 224, 3}, 1000);
  std::int64_t trainable = 0;
  for (const Tensor& weight : model.trainable_weights())
    trainable += weight.numel();
  std::int64_t frozen = 0;
  for (const Tensor& weight : model.non_trainable_weights())
    frozen += weight.numel();
  EXPECT_EQ(trainable, 25'557'032);
  EXPECT_EQ(frozen, 2 * 26'560);
  EXPECT_EQ(model.output_shape(), (Shape{-1, 1000}));
  // 53 convolutions (49 in the blocks, 4 projections... plus the stem) and 53 batch norms.
  int convolutions = 0;
  for (const nn::Layer& layer : model.layers()) {
    if (std::string(layer.impl().class_name()) == "Conv2D") ++convolutions;
  }
  EXPECT_EQ(convolutions, 53);
}

TEST(Zoo, ResNet50TrainsAStepOnSmallImages) {
  manual_seed(3);
  nn::Model model = nn::zoo::build("resnet50", {32, 32, 3}, 10);
  model.compile({.optimizer = train::SGD(0.01, 0.9),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
  const Tensor images = random_uniform({2, 32, 32, 3}, 0, 1);
  const Tensor labels = Tensor::from_vector<std::int32_t>({1, 7}, {2});
  const std::vector<Tensor> before = model.trainable_weights();
  const Tensor first = before[0].clone();
  const train::Logs logs = model.train_on_batch(images, labels);
  EXPECT_TRUE(std::isfinite(logs.at("loss")));
  EXPECT_GT(reduce_max(abs(model.trainable_weights()[0] - first)).item(), 0.0);
  EXPECT_EQ(model.predict(images).shape(), (Shape{2, 10}));
  EXPECT_THROW(nn::zoo::build("resnet50", {32, 3}, 10), InvalidArgument);
}

// BERT-base: 12 layers of 7,087,872 weights, token and position embeddings, the embeddings'
// layer norm and the classifier.
TEST(Zoo, BertBaseIsBertSized) {
  const nn::zoo::TransformerEncoderConfig bert;
  const std::int64_t per_layer =
      4 * (768 * 768 + 768) + 2 * 768 + (768 * 3072 + 3072) + (3072 * 768 + 768) + 2 * 768;
  EXPECT_EQ(per_layer, 7'087'872);
  EXPECT_EQ(bert.vocabulary_size, 30522);
  EXPECT_EQ(bert.hidden_size, 768);
  EXPECT_EQ(bert.layers, 12);
  EXPECT_EQ(bert.heads, 12);
  EXPECT_EQ(bert.intermediate_size, 3072);
  EXPECT_EQ(bert.max_sequence_length, 512);
  EXPECT_THROW(nn::zoo::build("bert_base", {28, 28, 1}, 10), InvalidArgument);
  EXPECT_THROW(nn::zoo::build("bert_base", {513}, 2), InvalidArgument);
}

// The same builder at a small size: the weight count follows the formula, and training on a
// toy task (the class is whether token 1 occurs) lowers the loss.
TEST(Zoo, TransformerEncoderLearnsAToyTask) {
  manual_seed(11);
  const nn::zoo::TransformerEncoderConfig config{.vocabulary_size = 8,
                                                 .max_sequence_length = 16,
                                                 .hidden_size = 16,
                                                 .layers = 2,
                                                 .heads = 2,
                                                 .intermediate_size = 32,
                                                 .dropout = 0.0,
                                                 .layer_norm_epsilon = 1e-6};
  nn::Model model = nn::zoo::transformer_encoder(config, 6, 2);
  const std::int64_t h = 16;
  const std::int64_t expected =
      8 * h + 16 * h + 2 * h +
      2 * (4 * (h * h + h) + 2 * h + (h * 32 + 32) + (32 * h + h) + 2 * h) + (h * 2 + 2);
  EXPECT_EQ(model.count_params(), expected);
  EXPECT_EQ(model.input_shape(), (Shape{-1, 6}));

  Generator generator(5);
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> labels;
  for (int example = 0; example < 64; ++example) {
    bool has_one = false;
    for (int position = 0; position < 6; ++position) {
      const auto id = static_cast<std::int32_t>(
          2 + philox_word(generator.seed(), 0, example * 6 + position) % 6);
      const bool one = position == example % 6 && example % 2 == 0;
      ids.push_back(one ? 1 : id);
      has_one |= one;
    }
    labels.push_back(has_one ? 1 : 0);
  }
  const Tensor x = Tensor::from_vector(ids, {64, 6});
  const Tensor y = Tensor::from_vector(labels, {64});
  model.compile({.optimizer = train::Adam(3e-3),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  const double before = model.evaluate(x, y, 64).at("loss");
  model.fit(x, y, {.batch_size = 16, .epochs = 30, .verbose = 0, .seed = 1});
  const train::Logs after = model.evaluate(x, y, 64);
  EXPECT_LT(after.at("loss"), 0.5 * before);
  EXPECT_GE(after.at("accuracy"), 0.9);
}

}  // namespace
}  // namespace tandem
