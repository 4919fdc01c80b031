// The inference path (tandem/inference.h): a float model folded and compiled predicts what the
// model predicts, a last partial batch included, and leaves the model as it was; a quantised one
// runs on the integer kernels; the size a deployment stores.
#include <gtest/gtest.h>

#include "io/io_support.h"
#include "tandem/inference.h"
#include "tandem/nn.h"
#include "tandem/quantization.h"
#include "tandem/runtime.h"

namespace tandem {
namespace {

TEST(InferenceModel, PredictsWhatTheModelDoesInBatchesWithAPartialLastOne) {
  nn::Model model = testing::small_model();  // Conv2D, BN, ReLU, MaxPool, Flatten, Dense, Dense
  model.fit(*testing::small_dataset(), {.epochs = 1});
  const std::vector<float> weights_before = model.weights()[0].to_vector<float>();
  InferenceModel inference(model);
  EXPECT_FALSE(inference.quantized());
  EXPECT_EQ(inference.description(), "f32, batch norms folded, compiled");
  for (const nn::Layer& layer : inference.model().layers())
    EXPECT_NE(std::string_view(layer.impl().class_name()), "BatchNormalization");
  const Tensor x = testing::image_problem(11, 4).x;
  const Tensor expected = model.predict(x);
  const Tensor batched = inference.predict(x, 4);  // 4, 4, then 3 padded to 4
  ASSERT_EQ(batched.shape(), expected.shape());
  EXPECT_LE(reduce_max(abs(batched - expected)).item(), 1e-5);
  EXPECT_LE(reduce_max(abs(inference.predict(x, 32) - expected)).item(), 1e-5);
  EXPECT_EQ(model.weights()[0].to_vector<float>(), weights_before);
  std::size_t f32_bytes = 0;
  for (const Tensor& weight : model.weights())
    f32_bytes += weight.nbytes();
  EXPECT_EQ(inference_model_bytes(model), f32_bytes);
}

// A residual network at batch 1 whose last two stages have 4x4 and 2x2 positions: their
// convolutions run on the streamed filter loops (backend/cpu/conv_streamed_filter.h, on AVX-512
// CPUs), the last of each block written over its residual, and it predicts what the model does.
TEST(InferenceModel, AResidualNetworkPredictsWhatTheModelDoesAtBatchOne) {
  nn::clear_session();
  manual_seed(5);
  nn::Model model = nn::zoo::build("resnet_small", {8, 8, 3}, 4);
  // Statistics other than the initial zeros and ones, so that folding changes the filters.
  for (const nn::Layer& layer : model.layers()) {
    if (std::string_view(layer.impl().class_name()) != "BatchNormalization") continue;
    std::vector<Tensor> values;
    for (const Tensor& weight : layer.weights())
      values.push_back(random_uniform(weight.shape(), 0.5, 1.5, DType::f32));
    layer.set_weights(values);
  }
  InferenceModel inference(model);
  const Tensor x = random_uniform({3, 8, 8, 3}, 0.0, 1.0, DType::f32);
  const Tensor expected = model.predict(x);
  const Tensor one_at_a_time = inference.predict(x, 1);
  ASSERT_EQ(one_at_a_time.shape(), expected.shape());
  EXPECT_LE(reduce_max(abs(one_at_a_time - expected)).item(), 1e-5);
}

TEST(InferenceModel, AQuantisedModelRunsOnTheIntegerKernels) {
  nn::Model model = testing::small_model();
  model.fit(*testing::small_dataset(), {.epochs = 1});
  (void)quantization::quantize_model(model, *testing::small_dataset());
  InferenceModel inference(model);
  EXPECT_TRUE(inference.quantized());
  // oneDNN's int8 kernels where the CPU has VNNI; the int8 grid in f32 kernels where not.
  EXPECT_EQ(
      inference.description().rfind(cpu_kernels().int8 ? "int8 kernels" : "int8 grid in f32", 0),
      0u)
      << inference.description();
  const Tensor x = testing::image_problem(9, 5).x;
  const Tensor integer = quantization::integer_model(model).predict(x);
  EXPECT_LE(reduce_max(abs(inference.predict(x, 4) - integer)).item(), 1e-5);
  EXPECT_EQ(inference_model_bytes(model), quantization::int8_weight_bytes(model).size());
}

}  // namespace
}  // namespace tandem
