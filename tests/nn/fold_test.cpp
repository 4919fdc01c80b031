// fold_batch_norms: trained batch norms fold into the convolution or Dense before them, the
// folded model predicts what the original does, and a batch norm that cannot fold (its input
// also read elsewhere, or not a kernel layer's) stays.
#include <gtest/gtest.h>

#include "io/io_support.h"
#include "support/errors.h"

namespace tandem::nn {
namespace {

std::vector<std::string> kinds(const Model& model) {
  std::vector<std::string> names;
  for (const Layer& layer : model.layers())
    names.emplace_back(layer.impl().class_name());
  return names;
}

int count(const std::vector<std::string>& kinds, const std::string& kind) {
  return static_cast<int>(std::count(kinds.begin(), kinds.end(), kind));
}

void expect_same_predictions(Model& original, Model& folded, const Shape& example) {
  Shape shape{6};
  shape.insert(shape.end(), example.begin(), example.end());
  const Tensor x = random_uniform(shape, 0.0, 1.0, DType::f32);
  const double difference = reduce_max(abs(original.predict(x) - folded.predict(x))).item();
  EXPECT_LE(difference, 1e-5);
}

TEST(FoldBatchNorms, TrainedStatisticsFoldIntoTheConvolutionBefore) {
  Model trained = testing::small_model();  // Conv2D without bias, BN, ReLU, pool, Dense, Dense
  trained.fit(*testing::small_dataset(), {.epochs = 2});
  Model folded = fold_batch_norms(trained);
  EXPECT_EQ(kinds(folded), (std::vector<std::string>{"Conv2D", "Activation", "MaxPooling2D",
                                                     "Flatten", "Dense", "Dense"}));
  EXPECT_EQ(folded.layers().front().weights().size(), 2u) << "the convolution gained a bias";
  expect_same_predictions(trained, folded, {6, 6, 1});
}

TEST(FoldBatchNorms, TheFoldedModelsWeightsAreConstantCopies) {
  Model model = testing::small_model();
  Model folded = fold_batch_norms(model);
  for (const Tensor& weight : folded.weights())
    EXPECT_TRUE(weight.is_constant()) << weight.name();
  for (const Tensor& weight : model.weights())
    EXPECT_FALSE(weight.is_constant()) << weight.name();
  const Layer dense = folded.layers().back();
  EXPECT_NE(testing::error_of([&] {
              dense.set_weights(dense.weights());
            }).find("is a constant (an inference model's weight); make the model again"),
            std::string::npos);
}

TEST(FoldBatchNorms, EveryResidualBlocksBatchNormsFold) {
  clear_session();
  manual_seed(5);
  Model model = zoo::build("resnet_small", {16, 16, 3}, 4);
  // Statistics other than the initial zeros and ones.
  for (const Layer& layer : model.layers()) {
    if (std::string_view(layer.impl().class_name()) != "BatchNormalization") continue;
    std::vector<Tensor> values;
    for (const Tensor& weight : layer.weights())
      values.push_back(random_uniform(weight.shape(), 0.5, 1.5, DType::f32));
    layer.set_weights(values);
  }
  Model folded = fold_batch_norms(model);
  EXPECT_EQ(count(kinds(folded), "BatchNormalization"), 0);
  EXPECT_EQ(count(kinds(folded), "Conv2D"), count(kinds(model), "Conv2D"));
  expect_same_predictions(model, folded, {16, 16, 3});
}

TEST(FoldBatchNorms, ABatchNormWhoseInputIsReadElsewhereStays) {
  clear_session();
  const SymbolicTensor inputs = Input({4});
  const SymbolicTensor hidden = Dense(3)(inputs);
  const SymbolicTensor outputs = Add()({BatchNormalization()(hidden), hidden});
  Model model(inputs, outputs, "shared");
  Model folded = fold_batch_norms(model);
  EXPECT_EQ(count(kinds(folded), "BatchNormalization"), 1);
  expect_same_predictions(model, folded, {4});
  Sequential unbuilt({Dense(2)});
  EXPECT_NE(testing::error_of([&] { fold_batch_norms(unbuilt); }).find("is not built"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::nn
