// Learning-rate schedules at given steps.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "tandem/tandem.h"

namespace tandem {
namespace {

TEST(Schedules, Constant) {
  const train::ConstantSchedule constant(0.01);
  EXPECT_DOUBLE_EQ(constant(0), 0.01);
  EXPECT_DOUBLE_EQ(constant(100000), 0.01);
  EXPECT_DOUBLE_EQ(train::LearningRate(0.5).at(7), 0.5);
}

TEST(Schedules, StepDecayDropsEveryStepSize) {
  const train::StepDecay decay(0.1, 10, 0.5);
  EXPECT_DOUBLE_EQ(decay(0), 0.1);
  EXPECT_DOUBLE_EQ(decay(9), 0.1);
  EXPECT_DOUBLE_EQ(decay(10), 0.05);
  EXPECT_DOUBLE_EQ(decay(25), 0.025);
}

TEST(Schedules, CosineDecayFollowsHalfACosineToAlpha) {
  const train::CosineDecay cosine(1.0, 100, 0.1);
  EXPECT_DOUBLE_EQ(cosine(0), 1.0);
  // Half-way the cosine term is 0.5: 0.9 * 0.5 + 0.1.
  EXPECT_NEAR(cosine(50), 0.55, 1e-12);
  EXPECT_NEAR(cosine(25), 0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4)) + 0.1, 1e-12);
  EXPECT_NEAR(cosine(100), 0.1, 1e-12);
  EXPECT_NEAR(cosine(1000), 0.1, 1e-12);
}

TEST(Schedules, LinearWarmupRampsThenHandsOver) {
  const train::LinearWarmup warmup(train::CosineDecay(1.0, 100), 10);
  EXPECT_DOUBLE_EQ(warmup(0), 0.0);
  EXPECT_DOUBLE_EQ(warmup(5), 0.5);
  EXPECT_DOUBLE_EQ(warmup(10), 1.0);
  EXPECT_NEAR(warmup(60), 0.5, 1e-12);
  const train::LinearWarmup from_start(train::ConstantSchedule(0.1), 4, 0.02);
  EXPECT_DOUBLE_EQ(from_start(0), 0.02);
  EXPECT_NEAR(from_start(2), 0.06, 1e-15);
  EXPECT_DOUBLE_EQ(from_start(4), 0.1);
}

TEST(Schedules, InvalidArguments) {
  EXPECT_THROW(train::StepDecay(0.1, 0, 0.5), InvalidArgument);
  EXPECT_THROW(train::CosineDecay(0.1, 0), InvalidArgument);
  EXPECT_THROW(train::CosineDecay(0.1, 10, 2.0), InvalidArgument);
  EXPECT_THROW(train::LinearWarmup(train::ConstantSchedule(0.1), -1), InvalidArgument);
  EXPECT_THROW(train::ConstantSchedule(-1.0), InvalidArgument);
  EXPECT_THROW(train::LinearWarmup(std::shared_ptr<const train::LearningRateSchedule>(), 3),
               InvalidArgument);
}

}  // namespace
}  // namespace tandem
