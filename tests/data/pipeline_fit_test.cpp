// model.fit on a Pipeline: it trains, History carries the input-wait share, an input-bound run
// ends with the warning and the pipeline's most likely fix, and skipped elements are reported
// at the end of their epoch.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tandem/tandem.h"

namespace tandem {
namespace {

using data::Element;
using data::Pipeline;

// Two separable classes in the plane: x < 0 is class 0, x > 0 class 1.
Element two_classes(std::int64_t count) {
  std::vector<float> points;
  std::vector<std::int32_t> labels;
  for (std::int64_t i = 0; i < count; ++i) {
    const float side = i % 2 == 0 ? -1.0f : 1.0f;
    points.push_back(side * (1.0f + static_cast<float>(i % 7) * 0.1f));
    points.push_back(static_cast<float>(i % 5) * 0.2f);
    labels.push_back(i % 2 == 0 ? 0 : 1);
  }
  return {{"image", Tensor::from_vector(points, {count, 2})},
          {"label", Tensor::from_vector(labels, {count})}};
}

nn::Model classifier() {
  manual_seed(3);
  nn::Sequential model({nn::Dense(8, "relu"), nn::Dense(2)});
  model.build({2});
  model.compile({.optimizer = train::Adam(0.05),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  return std::move(model);
}

TEST(PipelineFit, TrainsAndRecordsTheInputWait) {
  const Pipeline training = Pipeline::from_tensor_slices(two_classes(200))
                                .shuffle(200, 1)
                                .batch(20)
                                .prefetch(data::kAutotune);
  nn::Model model = classifier();
  testing::internal::CaptureStdout();
  const train::History history = model.fit(training, {.epochs = 8, .verbose = 0});
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_GT(history.history().at("accuracy").back(), 0.95);
  ASSERT_EQ(history.step_input_wait_seconds().size(), 8u);
  EXPECT_EQ(history.step_input_wait_seconds()[3].size(), 10u);
  EXPECT_GE(history.input_wait_share(), 0.0);
  EXPECT_LE(history.input_wait_share(), 1.0);
  EXPECT_EQ(history.skipped_elements(), std::vector<std::int64_t>(8, 0));
  const train::Logs results =
      model.evaluate(Pipeline::from_tensor_slices(two_classes(60)).batch(30));
  EXPECT_GT(results.at("accuracy"), 0.95);
}

TEST(PipelineFit, AnInputBoundRunEndsWithTheWarningAndTheMostLikelyFix) {
  // Each batch takes 20 ms to make on one thread; the model needs far less.
  const Pipeline slow = Pipeline::from_tensor_slices(two_classes(240))
                            .batch(20)
                            .map(
                                [](Element batch) {
                                  std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                  return batch;
                                },
                                {.name = "slow"})
                            .prefetch(1);
  nn::Model model = classifier();
  std::ostringstream bar;
  testing::internal::CaptureStdout();
  const train::History history =
      model.fit(slow, {.epochs = 2,
                       .callbacks = {std::make_shared<train::ProgressBar>(1, &bar, false)},
                       .warmup_steps = 2});
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_GT(history.input_wait_share(), 0.5);
  EXPECT_NE(out.find("WARNING: training waited for input"), std::string::npos) << out;
  EXPECT_NE(out.find("(above 10%): the input pipeline is the bottleneck"), std::string::npos)
      << out;
  EXPECT_NE(out.find("give map(slow) more threads"), std::string::npos) << out;
  EXPECT_NE(history.input_advice().find("map(slow)"), std::string::npos);
  // No warning when the steps take far longer than the input (here a callback that sleeps
  // 10 ms per step, while the prefetch thread has the next batch ready in well under that).
  nn::Model quiet = classifier();
  auto slow_step = std::make_shared<train::LambdaCallback>(
      train::LambdaCallback::Functions{.on_train_batch_end = [](std::int64_t, const train::Logs&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }});
  testing::internal::CaptureStdout();
  const train::History quiet_history =
      quiet.fit(Pipeline::from_tensor_slices(two_classes(240)).batch(20).prefetch(4),
                {.epochs = 2,
                 .callbacks = {slow_step, std::make_shared<train::ProgressBar>(1, &bar, false)},
                 .warmup_steps = 2});
  EXPECT_EQ(testing::internal::GetCapturedStdout().find("WARNING"), std::string::npos);
  EXPECT_LT(quiet_history.input_wait_share(), 0.10);
}

TEST(PipelineFit, SkippedElementsAreReportedAtTheEndOfTheirEpoch) {
  const Pipeline lossy = Pipeline::from_tensor_slices(two_classes(100))
                             .map(
                                 [](Element element) {
                                   if (element.origin().index % 25 == 3) {
                                     throw IoError("unreadable");
                                   }
                                   return element;
                                 },
                                 {.on_error = data::OnError::skip, .name = "check"})
                             .batch(10);
  nn::Model model = classifier();
  std::ostringstream bar;
  testing::internal::CaptureStdout();
  const train::History history = model.fit(
      lossy, {.epochs = 2, .callbacks = {std::make_shared<train::ProgressBar>(1, &bar, false)}});
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(history.skipped_elements(), (std::vector<std::int64_t>{4, 4}));
  EXPECT_NE(out.find("Epoch 1: 4 bad elements skipped; 4 in map(check), e.g. map(check): "
                     "tensor_slices"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("unreadable"), std::string::npos);
  EXPECT_EQ(history.step_seconds()[0].size(), 10u);  // 96 examples: ten batches, the last short
}

}  // namespace
}  // namespace tandem
