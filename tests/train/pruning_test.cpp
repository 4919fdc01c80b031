// Magnitude pruning (tandem/pruning.h): TF-MOT's schedules step by step; training keeps the
// asked-for share of each kernel at zero, the smallest weights first, eagerly and with a compiled
// step; polynomial decay reaches its final sparsity; 2:4 leaves two of every four weights along the
// input channels; strip_pruning ends it; and what cannot be pruned is refused by name.
#include <gtest/gtest.h>

#include <cmath>

#include "io/io_support.h"
#include "support/errors.h"
#include "tandem/pruning.h"

namespace tandem::pruning {
namespace {

using testing::error_of;

TEST(PruningSchedule, ConstantSparsityUpdatesEveryFrequencyStepsBetweenBeginAndEnd) {
  const ConstantSparsity schedule{
      .target_sparsity = 0.6, .begin_step = 10, .end_step = 30, .frequency = 10};
  std::vector<std::int64_t> updates;
  for (std::int64_t step = 0; step < 50; ++step) {
    const ScheduleDecision decision = schedule_at(schedule, step);
    if (decision.update) updates.push_back(step);
    EXPECT_EQ(decision.sparsity, 0.6);
  }
  EXPECT_EQ(updates, (std::vector<std::int64_t>{10, 20, 30}));
  EXPECT_TRUE(schedule_at(ConstantSparsity{.frequency = 5}, 1000).update) << "no end step";
}

// TF-MOT's PolynomialDecay: final + (initial - final) * (1 - progress)^power.
TEST(PruningSchedule, PolynomialDecayFollowsTfmotsCurve) {
  const PolynomialDecay schedule{.initial_sparsity = 0.2,
                                 .final_sparsity = 0.8,
                                 .begin_step = 100,
                                 .end_step = 300,
                                 .power = 3,
                                 .frequency = 50};
  EXPECT_DOUBLE_EQ(schedule_at(schedule, 100).sparsity, 0.2);
  EXPECT_DOUBLE_EQ(schedule_at(schedule, 200).sparsity, 0.8 - 0.6 * 0.125);
  EXPECT_DOUBLE_EQ(schedule_at(schedule, 300).sparsity, 0.8);
  EXPECT_DOUBLE_EQ(schedule_at(schedule, 900).sparsity, 0.8);
  EXPECT_TRUE(schedule_at(schedule, 150).update);
  EXPECT_FALSE(schedule_at(schedule, 160).update);
  EXPECT_FALSE(schedule_at(schedule, 350).update);
}

// Conv2D(8) on one channel, Conv2D(8) on eight, Dense(16), Dense(3), compiled with Adam.
nn::Model prunable_model(bool jit) {
  nn::clear_session();
  manual_seed(9);
  nn::Sequential model({nn::Conv2D(8, 3, nn::Conv2DConfig{.padding = "same"}),
                        nn::Conv2D(8, 3, nn::Conv2DConfig{.padding = "same", .activation = "relu"}),
                        nn::Flatten(), nn::Dense(16, "relu"), nn::Dense(3)},
                       "prunable");
  model.build({6, 6, 1});
  model.compile({.optimizer = train::Adam(0.01),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"},
                 .jit_compile = jit});
  model.set_verbose(0);
  return nn::Model(std::move(model));
}

std::shared_ptr<data::TensorDataset> problem() {
  const testing::ImageProblem images = testing::image_problem(96, 3);
  auto dataset = std::make_shared<data::TensorDataset>(images.x, images.y);
  dataset->shuffle(5).batch(8);
  return dataset;
}

std::int64_t zeros(const Tensor& weight) {
  std::int64_t count = 0;
  for (const float value : weight.to_vector<float>())
    count += value == 0.0f ? 1 : 0;
  return count;
}

TEST(Pruning, TrainingKeepsTheSmallestWeightsAtZeroEagerAndCompiled) {
  std::vector<nn::Model> trained;
  for (const bool jit : {false, true}) {
    SCOPED_TRACE(jit ? "compiled" : "eager");
    nn::Model& model = trained.emplace_back(prunable_model(jit));
    const auto dataset = problem();
    auto pruning = prune_low_magnitude(
        model, {.schedule = ConstantSparsity{.target_sparsity = 0.5, .frequency = 1}});
    ASSERT_EQ(pruning->weights().size(), 4u);
    const train::History history = model.fit(*dataset, {.epochs = 3, .callbacks = {pruning}});
    EXPECT_EQ(pruning->step(), 36);
    for (const PrunedWeight& pruned : pruning->weights()) {
      SCOPED_TRACE(pruned.layer);
      EXPECT_EQ(zeros(pruned.weight),
                std::llround(0.5 * static_cast<double>(pruned.weight.numel())));
      // The zeros are the smallest magnitudes: every kept weight is at least as large as any
      // pruned one was when pruned (they are zero now, so: kept weights are non-zero).
      const std::vector<float> mask = pruned.mask.to_vector<float>();
      const std::vector<float> weight = pruned.weight.to_vector<float>();
      for (std::size_t i = 0; i < mask.size(); ++i)
        EXPECT_EQ(weight[i] == 0.0f, mask[i] == 0.0f) << i;
    }
    EXPECT_DOUBLE_EQ(pruning->sparsity("dense"), 0.5);
    EXPECT_TRUE(std::isfinite(history.history().at("loss").back()));
    // The model still learns the problem with half its weights.
    EXPECT_GT(history.history().at("accuracy").back(), 0.8);
  }
  // The compiled step reads the masked weights as the eager one does: the same bits.
  testing::expect_same_weights(trained[0], trained[1]);
}

TEST(Pruning, PolynomialDecayReachesItsFinalSparsity) {
  nn::Model model = prunable_model(true);
  const auto dataset = problem();
  auto pruning = prune_low_magnitude(
      model,
      {.schedule =
           PolynomialDecay{.final_sparsity = 0.8, .begin_step = 0, .end_step = 24, .frequency = 4},
       .layers = {"conv2d_1", "dense"}});
  ASSERT_EQ(pruning->weights().size(), 2u);
  model.fit(*dataset, {.epochs = 1, .callbacks = {pruning}});
  EXPECT_LT(pruning->target_sparsity(), 0.8) << "12 steps: half way";
  model.fit(*dataset, {.epochs = 2, .callbacks = {pruning}});
  EXPECT_DOUBLE_EQ(pruning->target_sparsity(), 0.8);
  EXPECT_NEAR(pruning->sparsity("conv2d_1"), 0.8, 0.002);
  EXPECT_NEAR(pruning->sparsity(), 0.8, 0.002);
  EXPECT_EQ(zeros(model.get_layer("dense_1").weights().front()), 0) << "not pruned";
}

TEST(Pruning, TwoOfFourLeavesTwoOfEveryFourInputChannels) {
  nn::Model model = prunable_model(false);
  const auto dataset = problem();
  auto pruning = prune_low_magnitude(
      model, {.schedule = ConstantSparsity{.frequency = 4}, .pattern = Pattern::two_of_four});
  // The first convolution reads one channel: left alone, and said so.
  ASSERT_EQ(pruning->skipped().size(), 1u);
  EXPECT_NE(pruning->skipped().front().find("conv2d: its 1 input channels do not come in fours"),
            std::string::npos);
  model.fit(*dataset, {.epochs = 2, .callbacks = {pruning}});
  for (const PrunedWeight& pruned : pruning->weights()) {
    SCOPED_TRACE(pruned.layer);
    const Shape& shape = pruned.weight.shape();
    const std::int64_t out = shape.back();
    const std::int64_t reduction = shape[shape.size() - 2];
    const std::int64_t outer = pruned.weight.numel() / (reduction * out);
    const std::vector<float> weight = pruned.weight.to_vector<float>();
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t group = 0; group < reduction; group += 4) {
        for (std::int64_t column = 0; column < out; ++column) {
          int kept = 0;
          for (std::int64_t k = 0; k < 4; ++k)
            kept +=
                weight[static_cast<std::size_t>((o * reduction + group + k) * out + column)] != 0.0f
                    ? 1
                    : 0;
          ASSERT_LE(kept, 2);
        }
      }
    }
  }
  EXPECT_NE(error_of([&] {
              prune_low_magnitude(model, {.pattern = Pattern::two_of_four, .layers = {"conv2d"}});
            }).find("layer conv2d: its 1 input channels do not come in fours"),
            std::string::npos);
}

TEST(Pruning, StripPruningEndsItAndKeepsTheZeros) {
  nn::Model model = prunable_model(false);
  const auto dataset = problem();
  auto pruning = prune_low_magnitude(
      model,
      {.schedule = ConstantSparsity{.target_sparsity = 0.5, .frequency = 1}, .layers = {"dense"}});
  model.fit(*dataset, {.epochs = 1, .callbacks = {pruning}});
  const std::int64_t pruned = zeros(model.get_layer("dense").weights().front());
  strip_pruning(*pruning);
  EXPECT_TRUE(pruning->stripped());
  EXPECT_EQ(zeros(model.get_layer("dense").weights().front()), pruned) << "the zeros stay";
  model.fit(*dataset, {.epochs = 1, .callbacks = {pruning}});
  EXPECT_LT(zeros(model.get_layer("dense").weights().front()), pruned)
      << "after strip_pruning the optimizer moves every weight";
}

TEST(Pruning, WhatCannotBePrunedIsRefusedByName) {
  nn::Model model = testing::small_model();
  EXPECT_NE(error_of([&] {
              prune_low_magnitude(model, {.layers = {"batch_normalization"}});
            }).find("layer 'batch_normalization' (BatchNormalization) has no kernel to prune"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              prune_low_magnitude(model, {.layers = {"dens"}});
            }).find("the model has no layer 'dens'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              prune_low_magnitude(model, {.schedule = ConstantSparsity{.target_sparsity = 1.0}});
            }).find("target_sparsity must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              prune_low_magnitude(model,
                                  {.schedule = PolynomialDecay{.begin_step = 50, .end_step = 10}});
            }).find("begin_step <= end_step"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::pruning
