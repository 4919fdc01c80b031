// The inference path (tandem/inference.h): a float model folded and compiled predicts what the
// model predicts, a last partial batch included, and leaves the model as it was; a quantised one
// runs on the integer kernels; the size a deployment stores.
#include <gtest/gtest.h>

#include "io/io_support.h"
#include "tandem/inference.h"
#include "tandem/quantization.h"
#include "tandem/runtime.h"

namespace tandem {
namespace {

TEST(InferenceModel, PredictsWhatTheModelDoesInBatchesWithAPartialLastOne) {
  nn::Model model = testing::small_model();  // Conv2D, BN, ReLU, MaxPool, Flatten, Dense, Dense
  model.fit(*testing::small_dataset(), 1);
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

TEST(InferenceModel, AQuantisedModelRunsOnTheIntegerKernels) {
  nn::Model model = testing::small_model();
  model.fit(*testing::small_dataset(), 1);
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
