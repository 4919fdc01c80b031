// Model::compile / fit / evaluate / predict end to end on small synthetic problems: accuracy
// reached, a functional residual model learning, callbacks (order, EarlyStopping,
// LearningRateScheduler, progress output), History's timing, and the errors misuse raises.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "ops/gradient_check.h"
#include "support/errors.h"
#include "tandem/data.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::expect_close;

using testing::error_of;

struct Problem {
  Tensor x;
  Tensor y;
};

// Three Gaussian blobs in the plane, well apart: a linearly separable 3-class problem.
Problem blobs(std::int64_t count, std::uint64_t seed) {
  Generator generator(seed);
  const std::vector<float> noise =
      random_normal({count, 2}, 0.0, 0.5, DType::f32, generator).to_vector<float>();
  const double centres[3][2] = {{2, 0}, {-2, 0}, {0, 3}};
  std::vector<float> features(static_cast<std::size_t>(2 * count));
  std::vector<std::int32_t> classes(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const auto k = static_cast<std::size_t>(i % 3);
    classes[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(k);
    for (std::size_t d = 0; d < 2; ++d) {
      features[static_cast<std::size_t>(2 * i) + d] =
          static_cast<float>(centres[k][d]) + noise[static_cast<std::size_t>(2 * i) + d];
    }
  }
  return {Tensor::from_vector(features, {count, 2}), Tensor::from_vector(classes, {count})};
}

nn::Model small_classifier() {
  manual_seed(11);
  nn::Sequential model({nn::Dense(16, "relu"), nn::Dense(3)});
  model.build({2});
  model.compile({.optimizer = train::Adam(0.05),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  model.set_verbose(0);
  return std::move(model);
}

TEST(Fit, SeparableProblemReachesHighAccuracy) {
  const Problem train_set = blobs(300, 1);
  const Problem test_set = blobs(150, 2);
  nn::Model model = small_classifier();
  const train::History history =
      model.fit(train_set.x, train_set.y, {.batch_size = 32, .epochs = 15});
  ASSERT_EQ(history.epochs().size(), 15u);
  const std::vector<double>& loss = history.history().at("loss");
  EXPECT_LT(loss.back(), 0.5 * loss.front());
  EXPECT_GT(history.history().at("accuracy").back(), 0.95);

  const train::Logs evaluation = model.evaluate(test_set.x, test_set.y);
  EXPECT_GT(evaluation.at("accuracy"), 0.95);
  EXPECT_LT(evaluation.at("loss"), 0.3);

  const Tensor predictions = model.predict(test_set.x, 32);
  EXPECT_EQ(predictions.shape(), (Shape{150, 3}));
  // Batched prediction equals one pass over everything.
  expect_close(predictions, model(test_set.x), 1e-6);
}

TEST(Fit, FunctionalResidualModelLearns) {
  manual_seed(3);
  // 6x6 images, brighter (class 1) or darker (class 0) than uniform noise on average.
  const std::int64_t count = 128;
  Generator generator(9);
  std::vector<float> pixels =
      random_uniform({count, 6, 6, 1}, 0.0, 1.0, DType::f32, generator).to_vector<float>();
  std::vector<std::int32_t> classes(count);
  for (std::int64_t i = 0; i < count; ++i) {
    classes[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 2);
    for (std::int64_t p = 0; p < 36; ++p) {
      pixels[static_cast<std::size_t>(i * 36 + p)] += i % 2 ? 0.3f : -0.3f;
    }
  }
  const Tensor x = Tensor::from_vector(pixels, {count, 6, 6, 1});
  const Tensor y = Tensor::from_vector(classes, {count});

  nn::Conv2DConfig same;
  same.padding = "same";
  const nn::SymbolicTensor inputs = nn::Input({6, 6, 1});
  const nn::SymbolicTensor stem = nn::Conv2D(4, 3, same)(inputs);
  const nn::SymbolicTensor branch =
      nn::BatchNormalization()(nn::Conv2D(4, 3, same)(nn::Activation("relu")(stem)));
  const nn::SymbolicTensor merged = nn::Activation("relu")(nn::Add()({branch, stem}));
  const nn::SymbolicTensor outputs = nn::Dense(2)(nn::GlobalAveragePooling2D()(merged));
  nn::Model model(inputs, outputs, "tiny_resnet");
  model.compile({.optimizer = train::Adam(0.02),
                 .loss = train::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
  const std::vector<Tensor> moving = model.non_trainable_weights();
  ASSERT_EQ(moving.size(), 2u);
  const Tensor moving_mean_before = moving[0].clone();

  const train::History history = model.fit(x, y, {.batch_size = 16, .epochs = 12, .verbose = 0});
  const std::vector<double>& loss = history.history().at("loss");
  EXPECT_LT(loss.back(), 0.7 * loss.front());
  EXPECT_GT(history.history().at("accuracy").back(), 0.85);
  // Training moved BatchNormalization's moving mean.
  EXPECT_GT(std::abs(moving[0].to_vector<float>()[0] - moving_mean_before.to_vector<float>()[0]),
            1e-4);
}

TEST(Fit, CallbacksRunInKerasOrder) {
  nn::Model model = small_classifier();
  const Problem data = blobs(4, 3);
  std::vector<std::string> events;
  auto recorder = std::make_shared<train::LambdaCallback>(train::LambdaCallback::Functions{
      .on_train_begin = [&](const train::Logs&) { events.push_back("train_begin"); },
      .on_train_end = [&](const train::Logs&) { events.push_back("train_end"); },
      .on_epoch_begin =
          [&](int e, const train::Logs&) { events.push_back("epoch_begin " + std::to_string(e)); },
      .on_epoch_end =
          [&](int e, const train::Logs& logs) {
            events.push_back("epoch_end " + std::to_string(e));
            EXPECT_TRUE(logs.contains("loss"));
            EXPECT_TRUE(logs.contains("accuracy"));
          },
      .on_train_batch_begin =
          [&](std::int64_t b, const train::Logs&) {
            events.push_back("batch_begin " + std::to_string(b));
          },
      .on_train_batch_end =
          [&](std::int64_t b, const train::Logs& logs) {
            events.push_back("batch_end " + std::to_string(b));
            EXPECT_TRUE(logs.contains("loss"));
          },
  });
  data::TensorDataset dataset(data.x, data.y);
  dataset.batch(2);
  model.fit(dataset, {.epochs = 2, .callbacks = {recorder}});
  const std::vector<std::string> expected{
      "train_begin",   "epoch_begin 0", "batch_begin 0", "batch_end 0",   "batch_begin 1",
      "batch_end 1",   "epoch_end 0",   "epoch_begin 1", "batch_begin 0", "batch_end 0",
      "batch_begin 1", "batch_end 1",   "epoch_end 1",   "train_end"};
  EXPECT_EQ(events, expected);
  EXPECT_EQ(recorder->params().epochs, 2);
  EXPECT_EQ(recorder->params().steps, 2);
}

TEST(Fit, ValidationAddsValEntries) {
  nn::Model model = small_classifier();
  const Problem data = blobs(120, 4);
  const train::History split =
      model.fit(data.x, data.y, {.batch_size = 16, .epochs = 2, .validation_split = 0.25});
  EXPECT_EQ(split.history().at("val_loss").size(), 2u);
  EXPECT_EQ(split.history().at("val_accuracy").size(), 2u);
  // 90 training examples in batches of 16: 6 steps per epoch.
  EXPECT_EQ(split.step_seconds()[0].size(), 6u);

  const Problem held_out = blobs(30, 5);
  data::TensorDataset validation(held_out.x, held_out.y);
  validation.batch(10);
  const train::History given =
      model.fit(data.x, data.y, {.batch_size = 16, .epochs = 1, .validation_data = &validation});
  EXPECT_NEAR(given.history().at("val_loss")[0], model.evaluate(held_out.x, held_out.y).at("loss"),
              1e-6);
}

TEST(History, ThroughputExcludesTheWarmUpSteps) {
  nn::Model model = small_classifier();
  const Problem data = blobs(64, 6);
  const train::History history =
      model.fit(data.x, data.y, {.batch_size = 8, .epochs = 3, .warmup_steps = 5});
  ASSERT_EQ(history.step_seconds().size(), 3u);
  EXPECT_EQ(history.epoch_seconds().size(), 3u);
  double all_seconds = 0;
  for (const auto& epoch : history.step_seconds()) {
    EXPECT_EQ(epoch.size(), 8u);
    for (double seconds : epoch) {
      EXPECT_GT(seconds, 0.0);
      all_seconds += seconds;
    }
  }
  double first_five = 0;
  for (int i = 0; i < 5; ++i)
    first_five += history.step_seconds()[0][static_cast<std::size_t>(i)];
  EXPECT_EQ(history.warmup_steps(), 5);
  EXPECT_EQ(history.timed_examples(), (24 - 5) * 8);
  EXPECT_NEAR(history.timed_seconds(), all_seconds - first_five, 1e-9);
  EXPECT_GT(history.samples_per_sec(), 0.0);
  EXPECT_NEAR(history.samples_per_sec(), (24 - 5) * 8 / history.timed_seconds(), 1e-6);
  for (double seconds : history.epoch_seconds())
    EXPECT_GT(seconds, 0.0);

  EXPECT_EQ(train::default_warmup_steps(1875 * 3), 10);
  EXPECT_EQ(train::default_warmup_steps(100), 5);
  EXPECT_EQ(train::default_warmup_steps(19), 0);
  // The default applies when none is given: 24 steps -> 1.
  EXPECT_EQ(model.fit(data.x, data.y, {.batch_size = 8, .epochs = 3}).warmup_steps(), 1);
}

TEST(EarlyStopping, StopsWhenTheMonitorStallsForPatienceEpochs) {
  nn::Model model = small_classifier();
  model.compile({.optimizer = train::SGD(0.0), .loss = train::SparseCategoricalCrossentropy(true)});
  const Problem data = blobs(30, 7);
  auto stopper = std::make_shared<train::EarlyStopping>("loss", /*min_delta=*/1e-6,
                                                        /*patience=*/2);
  const train::History history =
      model.fit(data.x, data.y, {.batch_size = 10, .epochs = 10, .callbacks = {stopper}});
  // Epoch 0 sets the best; epochs 1 and 2 do not improve; training stops after epoch 2.
  EXPECT_EQ(history.epochs().size(), 3u);
  EXPECT_EQ(stopper->stopped_epoch(), 2);
  EXPECT_EQ(stopper->best_epoch(), 0);
}

TEST(EarlyStopping, RestoresTheBestWeights) {
  nn::Model model = small_classifier();
  const Problem data = blobs(60, 8);
  std::vector<Tensor> after_first_epoch;
  auto snapshot = std::make_shared<train::LambdaCallback>(train::LambdaCallback::Functions{
      .on_epoch_end =
          [&](int epoch, const train::Logs&) {
            if (epoch != 0) return;
            for (const Tensor& weight : model.weights())
              after_first_epoch.push_back(weight.clone());
          },
  });
  // Maximising a falling loss: epoch 0 is the best, epoch 1 ends training and restores it.
  auto stopper = std::make_shared<train::EarlyStopping>("loss", 0.0, 1, "max", true);
  model.fit(data.x, data.y, {.batch_size = 10, .epochs = 5, .callbacks = {snapshot, stopper}});
  EXPECT_EQ(stopper->stopped_epoch(), 1);
  const std::vector<Tensor> weights = model.weights();
  ASSERT_EQ(weights.size(), after_first_epoch.size());
  for (std::size_t i = 0; i < weights.size(); ++i)
    expect_close(weights[i], after_first_epoch[i], 0.0);

  auto missing = std::make_shared<train::EarlyStopping>("val_loss");
  EXPECT_NE(error_of([&] {
              model.fit(data.x, data.y, {.batch_size = 10, .epochs = 2, .callbacks = {missing}});
            }).find("'val_loss' is not in the logs"),
            std::string::npos);
}

TEST(LearningRateScheduler, SetsTheRateEachEpoch) {
  nn::Model model = small_classifier();
  const Problem data = blobs(20, 9);
  std::vector<double> rates;
  auto scheduler = std::make_shared<train::LearningRateScheduler>(
      [](int epoch, double) { return 0.1 * (epoch + 1); });
  auto probe = std::make_shared<train::LambdaCallback>(train::LambdaCallback::Functions{
      .on_epoch_begin =
          [&](int, const train::Logs&) { rates.push_back(model.optimizer().learning_rate()); },
  });
  model.fit(data.x, data.y, {.batch_size = 10, .epochs = 3, .callbacks = {scheduler, probe}});
  ASSERT_EQ(rates.size(), 3u);
  EXPECT_DOUBLE_EQ(rates[0], 0.1);
  EXPECT_DOUBLE_EQ(rates[1], 0.2);
  EXPECT_NEAR(rates[2], 0.3, 1e-15);
}

TEST(ProgressBarCallback, PrintsKerasLinesPerEpoch) {
  nn::Model model = small_classifier();
  const Problem data = blobs(40, 10);
  std::ostringstream out;
  auto bar = std::make_shared<train::ProgressBar>(1, &out, /*interactive=*/false);
  model.fit(data.x, data.y,
            {.batch_size = 10, .epochs = 2, .callbacks = {bar}, .validation_split = 0.25});
  const std::string text = out.str();
  const std::regex line(
      "Epoch 1/2\n3/3 (━){20} \\d+s \\d+(us|ms|s)/step - accuracy: \\d\\.\\d{4} - loss: "
      "\\d\\.\\d{4} - val_accuracy: \\d\\.\\d{4} - val_loss: \\d\\.\\d{4}\nEpoch 2/2\n3/3 (━){20} "
      ".*\n");
  EXPECT_TRUE(std::regex_match(text, line)) << text;

  // A progress bar among the callbacks replaces the one verbose 1 would add on standard output.
  model.set_verbose(1);
  std::ostringstream again;
  ::testing::internal::CaptureStdout();
  model.fit(data.x, data.y,
            {.batch_size = 10,
             .epochs = 1,
             .callbacks = {std::make_shared<train::ProgressBar>(1, &again, false)}});
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_NE(again.str().find("4/4 "), std::string::npos);

  std::ostringstream terse;
  model.fit(data.x, data.y,
            {.batch_size = 10,
             .epochs = 1,
             .callbacks = {std::make_shared<train::ProgressBar>(2, &terse, false)}});
  EXPECT_TRUE(std::regex_match(terse.str(),
                               std::regex("Epoch 1/1\n4/4 - \\d+s - \\d+(us|ms|s)/step - accuracy: "
                                          "\\d\\.\\d{4} - loss: \\d\\.\\d{4}\n")))
      << terse.str();
}

TEST(Fit, StopTrainingFromABatchCallbackEndsTheEpochEarly) {
  nn::Model model = small_classifier();
  const Problem data = blobs(40, 14);
  auto stop_after_three = std::make_shared<train::LambdaCallback>(train::LambdaCallback::Functions{
      .on_train_batch_end =
          [&](std::int64_t batch, const train::Logs&) {
            if (batch == 2) model.set_stop_training(true);
          },
  });
  const train::History history =
      model.fit(data.x, data.y, {.batch_size = 4, .epochs = 5, .callbacks = {stop_after_three}});
  ASSERT_EQ(history.epochs().size(), 1u);
  EXPECT_EQ(history.step_seconds()[0].size(), 3u);
  EXPECT_EQ(model.optimizer().iterations(), 3);
}

TEST(Compile, SharedOptimizerStaysAccessibleAndNamesResolve) {
  nn::Model model = small_classifier();
  auto sgd = std::make_shared<train::SGD>(0.05, 0.9);
  model.compile({.optimizer = sgd,
                 .loss = "sparse_categorical_crossentropy",
                 .metrics = {"accuracy", train::SparseCategoricalAccuracy()}});
  EXPECT_EQ(&model.optimizer(), sgd.get());
  EXPECT_EQ(model.loss().name(), "sparse_categorical_crossentropy");
  ASSERT_EQ(model.metrics().size(), 2u);
  const Problem data = blobs(20, 15);
  // The loss resolved by name expects probabilities, so train on softmax outputs.
  nn::Sequential probabilities({nn::Dense(3, "softmax")});
  probabilities.compile(
      {.optimizer = "adam", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  const train::History history =
      probabilities.fit(data.x, data.y, {.batch_size = 5, .epochs = 2, .verbose = 0});
  EXPECT_TRUE(history.history().contains("accuracy"));
  model.fit(data.x, data.y, {.batch_size = 5, .epochs = 1, .verbose = 0});
  EXPECT_EQ(sgd->iterations(), 4);
  const train::Logs logs = model.evaluate(data.x, data.y);
  EXPECT_TRUE(logs.contains("sparse_categorical_accuracy"));
  EXPECT_DOUBLE_EQ(logs.at("accuracy"), logs.at("sparse_categorical_accuracy"));
}

TEST(Model, TrainAndTestOnBatch) {
  nn::Model model = small_classifier();
  const Problem data = blobs(30, 12);
  const train::Logs before = model.test_on_batch(data.x, data.y);
  for (int i = 0; i < 30; ++i)
    model.train_on_batch(data.x, data.y);
  const train::Logs after = model.test_on_batch(data.x, data.y);
  EXPECT_LT(after.at("loss"), before.at("loss"));
  EXPECT_TRUE(after.contains("accuracy"));
  EXPECT_EQ(model.optimizer().iterations(), 30);
}

TEST(FitErrors, MisuseGivesClearMessages) {
  const Problem data = blobs(20, 13);
  nn::Sequential uncompiled({nn::Dense(3)});
  EXPECT_FALSE(uncompiled.compiled());
  EXPECT_THROW(uncompiled.optimizer(), InvalidArgument);
  EXPECT_NE(
      error_of([&] { uncompiled.fit(data.x, data.y); }).find("not compiled; call model.compile"),
      std::string::npos);
  EXPECT_NE(error_of([&] { uncompiled.compile({.optimizer = "sgd"}); }).find("a loss is required"),
            std::string::npos);

  nn::Model model = small_classifier();
  const std::string shapes = error_of([&] { model.fit(Tensor::ones({20, 5}), data.y); });
  EXPECT_NE(shapes.find("expects inputs (None, 2) f32, got"), std::string::npos) << shapes;
  EXPECT_NE(error_of([&] {
              model.fit(data.x, Tensor::zeros({7}, DType::i32));
            }).find("has 20 examples but y"),
            std::string::npos);
  data::TensorDataset other(data.x, data.y);
  EXPECT_NE(
      error_of([&] {
        model.fit(
            data.x, data.y,
            {.batch_size = 4, .epochs = 1, .validation_split = 0.5, .validation_data = &other});
      }).find("not both"),
      std::string::npos);
  EXPECT_THROW(model.fit(data.x, data.y, {.batch_size = 0}), InvalidArgument);
  EXPECT_THROW(model.fit(data.x, data.y, {.batch_size = 4, .epochs = 0}), InvalidArgument);
  EXPECT_THROW(model.set_verbose(3), InvalidArgument);
  // Labels that do not fit the outputs: the loss names both shapes.
  const std::string labels = error_of([&] { model.fit(data.x, Tensor::zeros({20, 3})); });
  EXPECT_NE(labels.find("SparseCategoricalCrossentropy"), std::string::npos) << labels;
}

}  // namespace
}  // namespace tandem
