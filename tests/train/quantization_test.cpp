// Int8 quantisation (tandem/quantization.h): a quantised Dense computes what an independent
// int8 reference computes (a signed input: int8); inputs never negative go to uint8; each
// calibrator's threshold on data with an outlier; quantisation-aware training trains, compiled
// as eagerly, and quantising a model whose float step was compiled retraces it; strip restores
// the float model; a quantised model saves and loads quantised; the int8 weight layout's size; and
// refusals that name the layer or option; and the integer model (integer kernels, batch norms
// folded) predicts what the simulation does.
#include <gtest/gtest.h>

#include <cmath>

#include "io/io_support.h"
#include "support/errors.h"
#include "tandem/compile.h"
#include "tandem/quantization.h"

namespace tandem::quantization {
namespace {

using testing::error_of;

// x (N, 4) to Dense(3) without an activation.
nn::Model dense_model() {
  nn::clear_session();
  manual_seed(4);
  nn::Sequential model({nn::Dense(3)}, "dense");
  model.build({4});
  return nn::Model(std::move(model));
}

data::TensorDataset dataset_of(const Tensor& x, std::int64_t batch) {
  data::TensorDataset set(x, Tensor::zeros({x.dim(0)}, DType::i32));
  set.batch(batch);
  return set;
}

float round_even(float value) {
  return std::nearbyint(value);
}

// The int8 computation written out: x to int8 with the calibrated scale (ties to even, clamped
// to [-128, 127]), each kernel column to int8 with max |w| / 127, integer products summed, then
// scaled back and the bias added.
std::vector<float> int8_reference(const std::vector<float>& x, const std::vector<float>& kernel,
                                  const std::vector<float>& bias, float input_scale,
                                  std::int64_t rows) {
  std::vector<float> column_scale(3, 0.0f);
  for (std::size_t i = 0; i < kernel.size(); ++i)
    column_scale[i % 3] = std::max(column_scale[i % 3], std::fabs(kernel[i]));
  for (float& scale : column_scale)
    scale /= 127.0f;
  std::vector<float> y;
  for (std::int64_t n = 0; n < rows; ++n) {
    for (std::size_t o = 0; o < 3; ++o) {
      double accumulated = 0;
      for (std::size_t i = 0; i < 4; ++i) {
        const float q_x = std::clamp(round_even(x[n * 4 + i] / input_scale), -128.0f, 127.0f);
        const float q_w = round_even(kernel[i * 3 + o] / column_scale[o]);
        accumulated += static_cast<double>(q_x) * q_w;
      }
      y.push_back(static_cast<float>(accumulated * input_scale * column_scale[o]) + bias[o]);
    }
  }
  return y;
}

TEST(Quantization, AQuantisedDenseComputesWhatTheInt8ReferenceDoes) {
  nn::Model model = dense_model();
  nn::Layer dense = model.layers().front();
  dense.set_weights(
      {Tensor::from_vector<float>(
           {0.5f, -0.25f, 0.1f, 0.3f, 0.7f, -0.9f, -0.2f, 0.05f, 0.6f, 0.8f, -0.4f, 0.33f}, {4, 3}),
       Tensor::from_vector<float>({0.1f, -0.2f, 0.3f}, {3})});
  Generator generator(5);
  const Tensor calibration_x = random_uniform({64, 4}, -2.0, 2.0, DType::f32, generator);
  const auto quantization = quantize_model(model, dataset_of(calibration_x, 16));
  ASSERT_EQ(quantization->inputs().size(), 1u);
  const InputQuantization& input = quantization->inputs().front();
  EXPECT_FALSE(input.is_unsigned);
  EXPECT_DOUBLE_EQ(input.threshold, input.observed_max);
  EXPECT_DOUBLE_EQ(input.scale, input.threshold / 127);
  EXPECT_DOUBLE_EQ(input.observed_max, reduce_max(abs(calibration_x)).item());

  // Inputs past the calibrated range clamp, as the integer kernel's do.
  const Tensor x = random_uniform({9, 4}, -2.5, 2.5, DType::f32, generator);
  const std::vector<float> expected =
      int8_reference(x.to_vector<float>(), dense.weights()[0].to_vector<float>(),
                     dense.weights()[1].to_vector<float>(), static_cast<float>(input.scale), 9);
  const std::vector<float> got = model.predict(x).to_vector<float>();
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
  // The integer kernels compute it too.
  const std::vector<float> integer = integer_model(model).predict(x).to_vector<float>();
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(integer[i], expected[i], 1e-5) << i;

  const Tensor float_prediction = [&] {
    quantization->strip();
    return model.predict(x);
  }();
  EXPECT_TRUE(quantization->stripped());
  EXPECT_NE(float_prediction.to_vector<float>(), got);
  EXPECT_EQ(float_prediction.to_vector<float>(),
            (matmul(x, dense.weights()[0]) + dense.weights()[1]).to_vector<float>());
}

TEST(Quantization, InputsThatAreNeverNegativeGoToUint8) {
  nn::Model model = testing::small_model();  // Conv2D, BN, ReLU, MaxPool, Flatten, Dense, Dense
  const auto quantization = quantize_model(model, *testing::small_dataset());
  std::vector<std::string> layers;
  std::vector<bool> is_unsigned;
  for (const InputQuantization& input : quantization->inputs()) {
    layers.push_back(input.layer);
    is_unsigned.push_back(input.is_unsigned);
    EXPECT_GT(input.scale, 0.0) << input.layer;
  }
  // The images are non-negative, and so is what follows the ReLUs.
  EXPECT_EQ(layers.size(), 3u);
  EXPECT_EQ(is_unsigned, (std::vector<bool>{true, true, true}));
  EXPECT_DOUBLE_EQ(quantization->inputs()[0].scale, quantization->inputs()[0].threshold / 255);
}

// 4,000 values of N(0, 1) and two outliers, -30 and 30: the bulk spans about +-4.
Tensor outlier_data() {
  Generator generator(6);
  std::vector<float> values =
      random_normal({4000}, 0.0, 1.0, DType::f32, generator).to_vector<float>();
  values.push_back(-30.0f);
  values.push_back(30.0f);
  values.resize(4004, 0.0f);
  return Tensor::from_vector(values, {1001, 4});
}

TEST(Quantization, EachCalibratorPicksItsThreshold) {
  const auto threshold = [](QuantizeOptions options) {
    nn::Model model = dense_model();
    return quantize_model(model, dataset_of(outlier_data(), 77), std::move(options))
        ->inputs()
        .front()
        .threshold;
  };
  EXPECT_DOUBLE_EQ(threshold({.calibrator = Calibrator::min_max}), 30.0);
  // 99% of |x| lies below 2.58 (N(0, 1)); the threshold is the upper edge of its bin.
  const double percentile = threshold({.calibrator = Calibrator::percentile, .percentile = 99.0});
  EXPECT_GT(percentile, 2.3);
  EXPECT_LT(percentile, 2.9);
  EXPECT_DOUBLE_EQ(threshold({.calibrator = Calibrator::percentile, .percentile = 100.0}), 30.0);
  // Entropy clips the outliers so that the int8 grid resolves the bulk.
  const double entropy = threshold({.calibrator = Calibrator::entropy});
  EXPECT_LT(entropy, 10.0);
  EXPECT_GT(entropy, 2.0);
}

// A ReLU's output: half exact zeros, the rest |N(0, 1)| (99% below 2.58), one value at 6. The
// zeros quantise exactly with any scale; counted, their spike pulls the entropy threshold down to
// about 1.5, clipping the bulk.
TEST(Quantization, ExactZerosDoNotPullTheEntropyThresholdDown) {
  Generator generator(9);
  std::vector<float> values =
      abs(random_normal({4000}, 0.0, 1.0, DType::f32, generator)).to_vector<float>();
  values.resize(8000, 0.0f);
  values.push_back(6.0f);
  values.resize(8004, 0.0f);
  nn::Model model = dense_model();
  const auto quantization =
      quantize_model(model, dataset_of(Tensor::from_vector(values, {2001, 4}), 87),
                     {.calibrator = Calibrator::entropy});
  const InputQuantization& input = quantization->inputs().front();
  EXPECT_TRUE(input.is_unsigned);
  EXPECT_GT(input.threshold, 2.3);
  EXPECT_LT(input.threshold, 6.0);
}

// The model of io_support (Conv2D, BN, Dense) quantised, then trained one epoch.
std::vector<Tensor> quantization_aware_training(bool jit) {
  nn::Model model = testing::small_model();
  model.compile({.optimizer = train::Adam(0.01),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"},
                 .jit_compile = jit});
  model.set_verbose(0);
  // A float step first: the quantised step must not reuse its compiled graph.
  model.fit(*testing::small_dataset(), {.epochs = 1});
  const auto quantization = quantize_model(model, *testing::small_dataset());
  const double before = model.evaluate(*testing::small_dataset()).at("loss");
  model.fit(*testing::small_dataset(), {.epochs = 2});
  EXPECT_LT(model.evaluate(*testing::small_dataset()).at("loss"), before);
  return model.weights();
}

TEST(Quantization, QuantisationAwareTrainingTrainsTheSameCompiledAsEagerly) {
  const std::vector<Tensor> eager = quantization_aware_training(false);
  const std::vector<Tensor> compiled = quantization_aware_training(true);
  ASSERT_EQ(eager.size(), compiled.size());
  for (std::size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(testing::same_bits(eager[i], compiled[i])) << eager[i].name();
}

TEST(Quantization, TheInt8LayoutStoresKernelsInABytePerWeight) {
  nn::Model model = testing::small_model();
  const auto quantization = quantize_model(model, *testing::small_dataset());
  std::size_t expected = 0;
  for (const nn::Layer& layer : model.layers()) {
    for (const Tensor& weight : layer.weights()) {
      const bool kernel = weight.name() == layer.name() + "/kernel";
      expected += kernel ? static_cast<std::size_t>(weight.numel()) + 4 * weight.shape().back()
                         : 4 * static_cast<std::size_t>(weight.numel());
    }
  }
  EXPECT_EQ(int8_weight_bytes(model).size(), expected);
}

TEST(Quantization, AQuantisedModelSavesAndLoadsQuantised) {
  testing::ScratchDir scratch;
  nn::Model model = testing::small_model();
  const auto quantization =
      quantize_model(model, *testing::small_dataset(), {.calibrator = Calibrator::percentile});
  model.save(scratch.file("int8"));
  nn::Model loaded = io::load_model(scratch.file("int8"));
  const std::vector<InputQuantization> restored = quantized_inputs(loaded);
  ASSERT_EQ(restored.size(), quantization->inputs().size());
  for (std::size_t i = 0; i < restored.size(); ++i) {
    EXPECT_EQ(restored[i].layer, quantization->inputs()[i].layer);
    EXPECT_EQ(restored[i].is_unsigned, quantization->inputs()[i].is_unsigned);
    EXPECT_EQ(restored[i].scale, quantization->inputs()[i].scale);
    EXPECT_EQ(restored[i].threshold, quantization->inputs()[i].threshold);
  }
  const Tensor x = testing::image_problem(10, 3).x;
  EXPECT_TRUE(testing::same_bits(loaded.predict(x), model.predict(x)));

  quantization->strip();
  EXPECT_TRUE(quantized_inputs(model).empty());
  model.save(scratch.file("float"));
  EXPECT_TRUE(quantized_inputs(io::load_model(scratch.file("float"))).empty());
}

// The integer model folds the batch norm into the convolution before it; its convolution and
// Dense layers run quantized_conv2d and quantized_matmul. Folding rounds differently in f32, so
// an activation near a grid line's middle can land one step away in the next layer's input: the
// outputs agree closely, not bit for bit. Compiled (ReLUs fused as post-ops) equals eager.
TEST(Quantization, TheIntegerModelPredictsWhatTheSimulationDoes) {
  nn::Model model = testing::small_model();  // Conv2D, BN, ReLU, MaxPool, Flatten, Dense, Dense
  model.fit(*testing::small_dataset(), {.epochs = 2});
  const auto quantization = quantize_model(model, *testing::small_dataset());
  nn::Model integer = integer_model(model);
  EXPECT_EQ(quantized_inputs(integer).size(), quantization->inputs().size());
  for (const nn::Layer& layer : integer.layers())
    EXPECT_NE(std::string_view(layer.impl().class_name()), "BatchNormalization");
  const Tensor x = testing::image_problem(32, 3).x;
  const Tensor simulated = model.predict(x);
  const Tensor computed = integer.predict(x);
  EXPECT_LE(reduce_max(abs(computed - simulated)).item(), 0.02);
  EXPECT_EQ(argmax(computed, -1).to_vector<std::int64_t>(),
            argmax(simulated, -1).to_vector<std::int64_t>());
  tandem::Function compiled("integer", [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{integer(in[0], /*training=*/false)};
  });
  const NoGradGuard no_grad;
  EXPECT_LE(reduce_max(abs(compiled({x})[0] - computed)).item(), 1e-6);
  EXPECT_NE(error_of([&] { integer_model(testing::small_model()); }).find("has no quantised layer"),
            std::string::npos);
}

TEST(Quantization, MistakesAreNamed) {
  nn::Model model = testing::small_model();
  const data::TensorDataset& calibration = *testing::small_dataset();
  EXPECT_NE(error_of([&] {
              quantize_model(model, calibration, {.layers = {"batch_normalization"}});
            }).find("layer 'batch_normalization' (BatchNormalization) has no kernel to quantise"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              quantize_model(model, calibration, {.layers = {"dense_9"}});
            }).find("the model has no layer 'dense_9'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              quantize_model(model, calibration, {.percentile = 0});
            }).find("percentile must be in (0, 100]"),
            std::string::npos);
  const std::string wrong_shape = error_of([&] {
    quantize_model(model, dataset_of(Tensor::zeros({8, 5, 5, 1}), 4));
  });
  EXPECT_NE(wrong_shape.find("the calibration set does not fit model 'small'"), std::string::npos)
      << wrong_shape;
  EXPECT_NE(error_of([&] {
              quantize_model(model, dataset_of(Tensor::zeros({0, 6, 6, 1}), 4));
            }).find("the calibration set is empty"),
            std::string::npos);
  // A refused calibration leaves the model in floating point.
  for (const nn::Layer& layer : model.layers())
    EXPECT_EQ(layer.impl().quantizer(), nullptr) << layer.name();
  nn::Sequential unbuilt({nn::Dense(2)});
  nn::Model unbuilt_model(std::move(unbuilt));
  EXPECT_NE(error_of([&] { quantize_model(unbuilt_model, calibration); }).find("is not built"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_calibrator("kl"); }).find("use minmax, percentile or entropy"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              restore_quantization(model, {{.layer = "conv2d", .scale = 0.0}});
            }).find("layer 'conv2d' has the scale 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              restore_quantization(model, {{.layer = "flatten", .scale = 0.1}});
            }).find("layer 'flatten' (Flatten) has no kernel to quantise"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::quantization
