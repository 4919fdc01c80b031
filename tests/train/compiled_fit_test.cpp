// Compiled training steps (CompileOptions::jit_compile) against eager ones: every zoo model, in
// f32 and mixed bf16, 20 steps of fit from the same seed give the same per-step losses and the
// same weights, bit for bit (a compiled step runs the eager kernels on the same values, in the
// same order, dropout masks and BatchNorm statistics included); and the cache's behaviour.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "support/errors.h"
#include "tandem/data.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::error_of;

constexpr std::int64_t kSteps = 20;

struct ZooCase {
  std::string name;
  std::function<nn::Model()> build;
  Shape example;  // one example's shape
  std::int64_t classes;
  bool tokens;  // integer inputs (a transformer's token ids)
};

std::vector<ZooCase> zoo_cases() {
  nn::zoo::TransformerEncoderConfig tiny;
  tiny.vocabulary_size = 40;
  tiny.max_sequence_length = 8;
  tiny.hidden_size = 16;
  tiny.layers = 1;
  tiny.heads = 2;
  tiny.intermediate_size = 32;
  tiny.dropout = 0.1;
  return {
      {"mlp",
       [] {
         return nn::zoo::build("mlp", {8, 8, 1}, 5);
       },
       {8, 8, 1},
       5,
       false},
      {"cnn",
       [] {
         return nn::zoo::build("cnn", {14, 14, 1}, 5);
       },
       {14, 14, 1},
       5,
       false},
      {"resnet_small",
       [] {
         return nn::zoo::build("resnet_small", {12, 12, 3}, 4);
       },
       {12, 12, 3},
       4,
       false},
      {"resnet50",
       [] {
         return nn::zoo::build("resnet50", {32, 32, 3}, 3);
       },
       {32, 32, 3},
       3,
       false},
      {"transformer", [tiny] { return nn::zoo::transformer_encoder(tiny, 8, 3); }, {8}, 3, true},
  };
}

// Integers in [0, high), i32.
Tensor random_integers(const Shape& shape, std::int64_t high, Generator& generator) {
  std::vector<std::int32_t> values;
  for (float u : random_uniform(shape, 0.0, 1.0, DType::f32, generator).to_vector<float>())
    values.push_back(std::min(static_cast<std::int32_t>(u * static_cast<float>(high)),
                              static_cast<std::int32_t>(high - 1)));
  return Tensor::from_vector(values, shape);
}

data::TensorDataset training_data(const ZooCase& c, std::int64_t batch) {
  Generator generator(11);
  Shape shape{batch * kSteps};
  shape.insert(shape.end(), c.example.begin(), c.example.end());
  const Tensor x = c.tokens ? random_integers(shape, 40, generator)
                            : random_uniform(shape, -1.0, 1.0, DType::f32, generator);
  const Tensor labels = random_integers({batch * kSteps}, c.classes, generator);
  data::TensorDataset dataset(x, labels);
  dataset.batch(batch);
  return dataset;
}

struct TrainingRun {
  std::vector<double> losses;  // the running loss after every step
  std::vector<Tensor> weights;
  bool jit = false;
};

TrainingRun train(const ZooCase& c, bool jit, std::int64_t batch) {
  manual_seed(5);
  nn::Model model = c.build();
  model.compile({.optimizer = train::Adam(train::LearningRate(train::CosineDecay(3e-3, kSteps))),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"},
                 .jit_compile = jit});
  TrainingRun run;
  run.jit = model.jit_compiled();
  train::FitOptions options;
  options.verbose = 0;
  options.callbacks.push_back(
      std::make_shared<train::LambdaCallback>(train::LambdaCallback::Functions{
          .on_train_batch_end = [&](std::int64_t, const train::Logs& logs) {
            run.losses.push_back(logs.at("loss"));
          }}));
  const data::TensorDataset dataset = training_data(c, batch);
  model.fit(dataset, options);
  for (const Tensor& weight : model.weights())
    run.weights.push_back(weight.clone());
  return run;
}

void expect_same_runs(const TrainingRun& compiled, const TrainingRun& eager,
                      const std::string& label) {
  EXPECT_TRUE(compiled.jit) << label;
  EXPECT_FALSE(eager.jit) << label;
  ASSERT_EQ(compiled.losses.size(), static_cast<std::size_t>(kSteps)) << label;
  EXPECT_EQ(compiled.losses, eager.losses) << label;
  ASSERT_EQ(compiled.weights.size(), eager.weights.size()) << label;
  for (std::size_t i = 0; i < compiled.weights.size(); ++i) {
    const Tensor& a = compiled.weights[i];
    const Tensor& b = eager.weights[i];
    ASSERT_EQ(a.shape(), b.shape()) << label;
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0)
        << label << ": weight " << i << " '" << a.name() << "' differs";
  }
}

class CompiledFit : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(CompiledFit, EqualsEagerBitForBit) {
  const ZooCase c = zoo_cases()[static_cast<std::size_t>(std::get<0>(GetParam()))];
  const std::string policy = std::get<1>(GetParam());
  mixed_precision::set_global_policy(policy);
  const std::int64_t batch = c.name == "resnet50" ? 2 : 8;
  const TrainingRun compiled = train(c, true, batch);
  const TrainingRun eager = train(c, false, batch);
  mixed_precision::set_global_policy("float32");
  expect_same_runs(compiled, eager, c.name + " " + policy);
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, CompiledFit,
    ::testing::Combine(::testing::Range(0, 5), ::testing::Values("float32", "mixed_bfloat16")),
    [](const ::testing::TestParamInfo<std::tuple<int, std::string>>& info) {
      return zoo_cases()[static_cast<std::size_t>(std::get<0>(info.param))].name + "_" +
             std::get<1>(info.param);
    });

// Dynamic loss scaling under mixed_float16 runs inside the compiled step: a scale too large at
// first makes the first steps overflow and be skipped (the scale halves each time), it doubles
// after every 40 clean steps, and the cosine schedule follows the applied updates only. 150
// steps, beyond two of the windows of learning rates the host passes ahead: compiled and eager
// give the same losses, weights, scale and counts, bit for bit.
TEST(CompiledFitLossScaling, EqualsEagerAcrossSkippedStepsAndScheduleWindows) {
  mixed_precision::set_global_policy("mixed_float16");
  constexpr std::int64_t kLongSteps = 150;
  struct Run {
    std::vector<double> losses;
    std::vector<Tensor> weights;
    std::int64_t iterations = 0, skipped = 0;
    double scale = 0;
    bool jit = false;
  };
  const auto run = [&](bool jit) {
    manual_seed(7);
    nn::Model model = nn::zoo::build("mlp", {8, 8, 1}, 5);
    auto scaler = std::make_shared<mixed_precision::LossScaleOptimizer>(
        std::make_shared<train::Adam>(train::LearningRate(train::CosineDecay(3e-3, kLongSteps))),
        /*initial_scale=*/std::ldexp(1.0, 40), /*growth_steps=*/40);
    model.compile({.optimizer = scaler,
                   .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                   .jit_compile = jit});
    Run result;
    result.jit = model.jit_compiled();
    Generator generator(12);
    const Tensor x = random_uniform({4 * kLongSteps, 8, 8, 1}, -1.0, 1.0, DType::f32, generator);
    const Tensor y = random_integers({4 * kLongSteps}, 5, generator);
    train::FitOptions options;
    options.verbose = 0;
    options.callbacks.push_back(
        std::make_shared<train::LambdaCallback>(train::LambdaCallback::Functions{
            .on_train_batch_end = [&](std::int64_t, const train::Logs& logs) {
              result.losses.push_back(logs.at("loss"));
            }}));
    options.batch_size = 4;
    options.shuffle = false;
    model.fit(x, y, options);
    for (const Tensor& weight : model.weights())
      result.weights.push_back(weight.clone());
    result.iterations = scaler->iterations();
    result.skipped = scaler->skipped_steps();
    result.scale = scaler->scale();
    return result;
  };
  const Run compiled = run(true);
  const Run eager = run(false);
  mixed_precision::clear_global_policy();
  EXPECT_TRUE(compiled.jit);
  EXPECT_FALSE(eager.jit);
  EXPECT_GT(eager.skipped, 0) << "the test needs overflowing steps";
  EXPECT_EQ(eager.iterations + eager.skipped, kLongSteps);
  EXPECT_EQ(compiled.skipped, eager.skipped);
  EXPECT_EQ(compiled.iterations, eager.iterations);
  EXPECT_EQ(compiled.scale, eager.scale);
  EXPECT_EQ(compiled.losses, eager.losses);
  ASSERT_EQ(compiled.weights.size(), eager.weights.size());
  for (std::size_t i = 0; i < compiled.weights.size(); ++i) {
    EXPECT_EQ(std::memcmp(compiled.weights[i].raw_data(), eager.weights[i].raw_data(),
                          compiled.weights[i].nbytes()),
              0)
        << "weight " << i << " '" << compiled.weights[i].name() << "' differs";
  }
}

TEST(CompiledFitCache, ALearningRateScheduleNeverRecompilesANewBatchShapeDoesOnce) {
  std::vector<std::string> messages;
  set_compile_log([&](const std::string& line) { messages.push_back(line); });
  const ZooCase c = zoo_cases()[0];
  manual_seed(5);
  nn::Model model = c.build();
  // A cosine schedule: the rate changes every step.
  model.compile({.optimizer = train::Adam(train::LearningRate(train::CosineDecay(1e-2, 50))),
                 .loss = train::SparseCategoricalCrossentropy(true),
                 .jit_compile = true});
  Generator generator(3);
  const Tensor x = random_uniform({60, 8, 8, 1}, -1.0, 1.0, DType::f32, generator);
  const Tensor y = Tensor::zeros({60}, DType::i32);
  // 60 examples in batches of 16: three full batches and a partial one of 12, twice.
  model.fit(x, y, {.batch_size = 16, .epochs = 2, .verbose = 0, .shuffle = false});
  set_compile_log(nullptr);
  ASSERT_EQ(messages.size(), 1u) << "expected one recompile, for the partial batch";
  EXPECT_NE(messages[0].find("input 0: (16, 8, 8, 1) f32 on cpu -> (12, 8, 8, 1) f32 on cpu"),
            std::string::npos)
      << messages[0];
  EXPECT_EQ(model.optimizer().iterations(), 8);
}

TEST(CompiledFitCache, AStepThatCannotBeCompiledSaysWhy) {
  nn::Model model = nn::zoo::build("mlp", {8, 8, 1}, 2);
  const std::string message = error_of([&] {
    model.compile(
        {.optimizer = train::Adam(1e-3, 0.9, 0.999, 1e-7,
                                  train::OptimizerOptions{.gradient_accumulation_steps = 2}),
         .loss = train::SparseCategoricalCrossentropy(true),
         .jit_compile = true});
  });
  EXPECT_NE(message.find("accumulates gradients over 2 steps"), std::string::npos) << message;
  EXPECT_NE(message.find("--jit off"), std::string::npos) << message;
  // Unset, the default falls back to the eager step.
  model.compile(
      {.optimizer = train::Adam(1e-3, 0.9, 0.999, 1e-7,
                                train::OptimizerOptions{.gradient_accumulation_steps = 2}),
       .loss = train::SparseCategoricalCrossentropy(true)});
  EXPECT_FALSE(model.jit_compiled());
}

// A loss with host control flow on a value (clipped when the batch's loss is large): it cannot
// be traced, since the graph would freeze one branch.
class HostClippedLoss final : public train::Loss {
 public:
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred) const override {
    const Tensor loss = train::SparseCategoricalCrossentropy(true)(y_true, y_pred);
    return loss.item() > 100.0 ? loss * 0.0 : loss;
  }
  std::string name() const override { return "host_clipped"; }
};

// Under the default, a step that cannot be traced trains eagerly, said once, with the eager
// step's results; asked for explicitly, it is an error naming the op and --jit off.
TEST(CompiledFitCache, ADefaultStepThatCannotBeTracedTrainsEagerlyAndSaysSo) {
  Generator generator(11);
  const Tensor x = random_uniform({48, 8, 8, 1}, -1.0, 1.0, DType::f32, generator);
  const Tensor y = Tensor::zeros({48}, DType::i32);
  const auto trained = [&](std::optional<bool> jit) {
    manual_seed(12);
    nn::Model model = nn::zoo::build("mlp", {8, 8, 1}, 2);
    model.compile({.optimizer = train::Adam(1e-2), .loss = HostClippedLoss(), .jit_compile = jit});
    EXPECT_EQ(model.jit_compiled(), jit.value_or(true));
    model.fit(x, y, {.batch_size = 16, .epochs = 2, .verbose = 0, .shuffle = false});
    std::vector<Tensor> weights;
    for (const Tensor& weight : model.weights())
      weights.push_back(weight.clone());
    return std::pair{weights, model.jit_compiled()};
  };
  std::vector<std::string> messages;
  set_compile_log([&](const std::string& line) { messages.push_back(line); });
  const auto [by_default, still_compiled] = trained(std::nullopt);
  set_compile_log(nullptr);
  EXPECT_FALSE(still_compiled);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_NE(messages[0].find("the training step runs eagerly: it could not be compiled"),
            std::string::npos)
      << messages[0];
  EXPECT_NE(messages[0].find("jit_compile = true (tandem train --jit on)"), std::string::npos)
      << messages[0];
  const auto [eager, unused] = trained(false);
  ASSERT_EQ(by_default.size(), eager.size());
  for (std::size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(std::memcmp(by_default[i].raw_data(), eager[i].raw_data(), eager[i].nbytes()), 0)
        << "weight " << i;
  }
  const std::string message = error_of<Error>([&] { trained(true); });
  EXPECT_NE(message.find("--jit off"), std::string::npos) << message;
}

}  // namespace
}  // namespace tandem
