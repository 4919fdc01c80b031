// Dtype policies, layers under them, and dynamic loss scaling.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tandem/tandem.h"

namespace tandem {
namespace {

// Sets a global policy for one test and forgets it afterwards.
class PolicyScope {
 public:
  explicit PolicyScope(const std::string& name) { mixed_precision::set_global_policy(name); }
  ~PolicyScope() { mixed_precision::clear_global_policy(); }
};

TEST(Policy, NamesComputeAndVariableDtypes) {
  const mixed_precision::Policy bf16("mixed_bfloat16");
  EXPECT_EQ(bf16.compute_dtype(), DType::bf16);
  EXPECT_EQ(bf16.variable_dtype(), DType::f32);
  EXPECT_FALSE(bf16.needs_loss_scaling());
  const mixed_precision::Policy f16("mixed_float16");
  EXPECT_EQ(f16.compute_dtype(), DType::f16);
  EXPECT_TRUE(f16.needs_loss_scaling());
  EXPECT_EQ(mixed_precision::Policy().name(), "float32");
  EXPECT_EQ(mixed_precision::Policy("float64").variable_dtype(), DType::f64);
  try {
    mixed_precision::Policy("mixed_fp8");
    FAIL() << "an unknown policy was accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("mixed_bfloat16"), std::string::npos) << error.what();
  }
}

TEST(Policy, LayersTakeTheGlobalPolicyWhenMade) {
  EXPECT_FALSE(mixed_precision::global_policy().has_value());
  nn::Dense before(3);
  {
    PolicyScope scope("mixed_bfloat16");
    nn::Dense dense(3);
    const Tensor y = dense(Tensor::ones({2, 4}));
    EXPECT_EQ(y.dtype(), DType::bf16);                  // computes in bfloat16
    EXPECT_EQ(dense.weights()[0].dtype(), DType::f32);  // keeps float32 variables
    EXPECT_EQ(dense.weights()[1].dtype(), DType::f32);
    // The gradients reach the float32 variables as float32, through the casts.
    GradientTape tape;
    const Tensor loss = sum(cast(dense(Tensor::ones({2, 4})), DType::f32));
    const std::vector<Tensor> grads = tape.gradient(loss, dense.trainable_weights());
    EXPECT_EQ(grads[0].dtype(), DType::f32);
    EXPECT_EQ(grads[1].dtype(), DType::f32);
    // A layer given float32 explicitly casts bf16 inputs up (the logits layer).
    const nn::Layer logits = nn::Dense(2).with_dtype_policy("float32");
    EXPECT_EQ(logits(y).dtype(), DType::f32);
    EXPECT_THROW(dense.with_dtype_policy("float32"), InvalidArgument);  // already built
  }
  // A layer made before any policy still follows its input's dtype.
  EXPECT_EQ(before(Tensor::ones({1, 2}, DType::f64)).dtype(), DType::f64);
}

TEST(Policy, ZooModelsKeepTheLogitsInFloat32) {
  PolicyScope scope("mixed_bfloat16");
  nn::Model model = nn::zoo::build("cnn", {28, 28, 1}, 10);
  const Tensor logits = model.predict(Tensor::zeros({2, 28, 28, 1}));
  EXPECT_EQ(logits.dtype(), DType::f32);
  for (const Tensor& weight : model.weights())
    EXPECT_EQ(weight.dtype(), DType::f32);
  // The hidden layers compute in bfloat16.
  const nn::Layer first = model.layers().front();
  EXPECT_EQ(first(Tensor::zeros({1, 28, 28, 1})).dtype(), DType::bf16);
}

TEST(Policy, LossesComputeInFloat32) {
  const Tensor logits = cast(Tensor::from_vector<float>({1, 2, 3, 1, 2, 3}, {2, 3}), DType::bf16);
  const Tensor labels = Tensor::from_vector<std::int32_t>({2, 0}, {2});
  const Tensor loss = train::SparseCategoricalCrossentropy(true)(labels, logits);
  EXPECT_EQ(loss.dtype(), DType::f32);
  EXPECT_NEAR(loss.item(), (0.40760596444438 + 2.40760596444438) / 2, 1e-2);
  EXPECT_EQ(train::MeanSquaredError()(Tensor::zeros({2, 3}), logits).dtype(), DType::f32);
}

// mixed_bfloat16 on the CPU (oneDNN's bf16 kernels) trains the tutorial CNN about as well as
// float32 on a small problem.
TEST(Policy, MixedBfloat16TrainsLikeFloat32) {
  manual_seed(21);
  // The class is which half of a noisy image is lit.
  const Tensor labels = cast(greater(random_uniform({256}, 0, 1), Tensor::scalar(0.5)), DType::i32);
  const Tensor lit_left = reshape(cast(labels, DType::f32), {256, 1, 1, 1});
  const Tensor left_half =
      pad(Tensor::ones({1, 12, 6, 1}), {{{0, 0}}, {{0, 0}}, {{0, 6}}, {{0, 0}}});
  const Tensor images = random_uniform({256, 12, 12, 1}, 0, 0.6) +
                        (lit_left * left_half + (1.0 - lit_left) * (1.0 - left_half)) * 0.4;
  double accuracy[2] = {};
  for (int run = 0; run < 2; ++run) {
    PolicyScope scope(run == 0 ? "float32" : "mixed_bfloat16");
    manual_seed(5);
    nn::Model model = nn::zoo::build("cnn", {12, 12, 1}, 2);
    model.compile({.optimizer = train::Adam(3e-3),
                   .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                   .metrics = {"accuracy"}});
    model.fit(images, labels, {.batch_size = 32, .epochs = 8, .verbose = 0, .seed = 2});
    accuracy[run] = model.evaluate(images, labels, 256).at("accuracy");
  }
  EXPECT_GE(accuracy[0], 0.9);
  EXPECT_GE(accuracy[1], 0.9);
  EXPECT_NEAR(accuracy[1], accuracy[0], 0.06);
}

TEST(LossScaleOptimizer, ScalesUnscalesAndSkipsOverflowingSteps) {
  auto inner = std::make_shared<train::SGD>(0.5);
  mixed_precision::LossScaleOptimizer optimizer(inner, /*initial_scale=*/8.0, /*growth_steps=*/2);
  EXPECT_EQ(optimizer.scale_loss(Tensor::scalar(3.0)).item(), 24.0);
  Tensor variable = Tensor::from_vector<float>({1, 2}, {2});
  variable.set_variable(true);
  // Gradients of the scaled loss: 8 x the true gradient [1, -1].
  optimizer.apply_gradients({Tensor::from_vector<float>({8, -8}, {2})}, {variable});
  EXPECT_EQ(variable.to_vector<float>(), (std::vector<float>{0.5f, 2.5f}));
  EXPECT_EQ(optimizer.iterations(), 1);
  EXPECT_EQ(optimizer.scale(), 8.0);
  // An overflow: the step is skipped and the scale halved.
  const float inf = std::numeric_limits<float>::infinity();
  optimizer.apply_gradients({Tensor::from_vector<float>({inf, 1}, {2})}, {variable});
  EXPECT_EQ(variable.to_vector<float>(), (std::vector<float>{0.5f, 2.5f}));
  EXPECT_EQ(optimizer.iterations(), 1);
  EXPECT_EQ(optimizer.scale(), 4.0);
  EXPECT_EQ(optimizer.skipped_steps(), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  optimizer.apply_gradients({Tensor::from_vector<float>({1, nan}, {2})}, {variable});
  EXPECT_EQ(optimizer.scale(), 2.0);
  // Two clean steps in a row double it again.
  optimizer.apply_gradients({Tensor::from_vector<float>({0, 0}, {2})}, {variable});
  EXPECT_EQ(optimizer.scale(), 2.0);
  optimizer.apply_gradients({Tensor::from_vector<float>({0, 0}, {2})}, {variable});
  EXPECT_EQ(optimizer.scale(), 4.0);
  EXPECT_EQ(optimizer.iterations(), 3);
  // Checkpoints keep the scale.
  const std::optional<train::LossScaleState> state = optimizer.loss_scale_state();
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->scale, 4.0);
  optimizer.set_loss_scale_state({64.0, 1});
  EXPECT_EQ(optimizer.scale(), 64.0);
  EXPECT_THROW(optimizer.set_loss_scale_state({0.5, 0}), InvalidArgument);
  EXPECT_THROW(mixed_precision::LossScaleOptimizer(nullptr), InvalidArgument);
  EXPECT_EQ(optimizer.slot_names(), inner->slot_names());
}

// The schedule follows applied updates only, on the device: after a skipped step the next
// update takes the rate of the update count, not of the call count; past the window of rates
// the host passes ahead (kScheduleRows) it reads the count back and goes on.
TEST(LossScaleOptimizer, TheScheduleCountsAppliedUpdatesOnly) {
  auto inner = std::make_shared<train::SGD>(train::LearningRate(train::StepDecay(1.0, 10, 0.5)));
  mixed_precision::LossScaleOptimizer optimizer(inner, /*initial_scale=*/4.0,
                                                /*growth_steps=*/1000);
  Tensor variable = Tensor::from_vector<float>({0}, {1});
  variable.set_variable(true);
  float expected = 0;
  std::int64_t applied = 0;
  const float inf = std::numeric_limits<float>::infinity();
  const std::int64_t calls = 2 * mixed_precision::LossScaleOptimizer::kScheduleRows + 7;
  for (std::int64_t call = 0; call < calls; ++call) {
    const bool overflow = call % 3 == 1;
    // The gradient of the scaled loss: the scale (halved by each skip so far, down to 1) times 1.
    const std::int64_t skips = (call + 1) / 3;
    const float scale = skips >= 2 ? 1.0f : static_cast<float>(4 >> skips);
    const float gradient = overflow ? inf : scale;
    optimizer.apply_gradients({Tensor::from_vector<float>({gradient}, {1})}, {variable});
    if (!overflow) {
      expected -= static_cast<float>(std::pow(0.5, static_cast<double>(applied / 10)));
      ++applied;
    }
  }
  EXPECT_EQ(optimizer.iterations(), applied);
  EXPECT_EQ(optimizer.skipped_steps(), calls - applied);
  EXPECT_EQ(optimizer.scale(), 1.0);
  EXPECT_EQ(variable.to_vector<float>()[0], expected);
}

TEST(LossScaleOptimizer, CompileWrapsTheOptimizerUnderMixedFloat16) {
  PolicyScope scope("mixed_float16");
  manual_seed(4);
  nn::Model model = nn::zoo::build("mlp", {4, 4, 1}, 3);
  model.compile({.optimizer = train::Adam(1e-2),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
  auto* scaler = dynamic_cast<mixed_precision::LossScaleOptimizer*>(&model.optimizer());
  ASSERT_NE(scaler, nullptr);
  EXPECT_EQ(scaler->inner_optimizer().name(), "Adam");
  const Tensor x = random_uniform({64, 4, 4, 1}, 0, 1);
  const Tensor y =
      cast(argmax(reshape(slice(x, {0, 0, 0, 0}, {64, 1, 3, 1}), {64, 3}), -1), DType::i32);
  const double before = model.evaluate(x, y, 64).at("loss");
  model.fit(x, y, {.batch_size = 16, .epochs = 20, .verbose = 0, .seed = 3});
  EXPECT_LT(model.evaluate(x, y, 64).at("loss"), before);
  for (const Tensor& weight : model.trainable_weights())
    EXPECT_EQ(weight.dtype(), DType::f32);
  EXPECT_EQ(scaler->iterations(), 20 * 4 - scaler->skipped_steps());
}

}  // namespace
}  // namespace tandem
