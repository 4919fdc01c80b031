// fit reads the steps' losses and metrics from their device (a host sync on a GPU) only when a
// callback reads the logs, at the end of each epoch and at least every kMaxUnreadSteps steps;
// the logs it then gives are those of reading every step.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "tandem/tandem.h"

namespace tandem {
namespace {

// The logs of every batch end it reads, by step.
class LogRecorder final : public train::Callback {
 public:
  explicit LogRecorder(std::int64_t every) : every_(every) {}
  bool reads_weights_at_batch_end() const override { return false; }
  bool reads_logs_at_batch_end(std::int64_t batch) const override {
    return (batch + 1) % every_ == 0;
  }
  void on_train_batch_end(std::int64_t batch, const train::Logs& logs) override {
    if (reads_logs_at_batch_end(batch))
      seen[step_++] = logs;
    else
      ++step_;
  }
  std::map<std::int64_t, train::Logs> seen;  // by step across epochs

 private:
  std::int64_t every_;
  std::int64_t step_ = 0;
};

struct TrainedRun {
  train::History history;
  std::map<std::int64_t, train::Logs> seen;
};

// The CNN-sized MLP on `examples` random images in batches of 8, 2 epochs.
TrainedRun train_with(std::vector<std::shared_ptr<train::Callback>> callbacks,
                      std::int64_t examples, std::shared_ptr<LogRecorder> recorder = nullptr) {
  manual_seed(21);
  Generator generator(22);
  const Tensor x = random_uniform({examples, 6, 6, 1}, -1.0, 1.0, DType::f32, generator);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(examples));
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int32_t>(i % 3);
  data::TensorDataset dataset(x, Tensor::from_vector(labels, {examples}));
  dataset.batch(8);
  nn::Model model = nn::zoo::build("mlp", {6, 6, 1}, 3);
  model.compile({.optimizer = train::Adam(1e-2),
                 .loss = train::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
  if (recorder) callbacks.push_back(recorder);
  const train::History history =
      model.fit(dataset, {.epochs = 2, .verbose = 0, .callbacks = callbacks});
  return {history, recorder ? recorder->seen : std::map<std::int64_t, train::Logs>{}};
}

TEST(FitLogReads, NoReaderMeansOneReadPerEpoch) {
  const TrainedRun run = train_with({}, 40);  // 5 steps an epoch
  EXPECT_EQ(run.history.log_reads(), 2);
  EXPECT_EQ(run.history.steps_read(), 10);
}

TEST(FitLogReads, UnreadStepsAreReadAtLeastEveryMaxUnreadSteps) {
  const std::int64_t steps = train::kMaxUnreadSteps + 6;
  const TrainedRun run = train_with({}, 8 * steps);
  EXPECT_EQ(run.history.log_reads(), 4);  // per epoch: after kMaxUnreadSteps, then at its end
  EXPECT_EQ(run.history.steps_read(), 2 * steps);
}

// A reader every 3 steps sees, at those steps, the logs a reader of every step sees, and both
// runs end with the same epoch logs.
TEST(FitLogReads, LogsReadLessOftenHoldTheSameValues) {
  const auto every_step = std::make_shared<LogRecorder>(1);
  const TrainedRun each = train_with({}, 40, every_step);
  EXPECT_EQ(each.history.log_reads(), 10);
  const auto every_third = std::make_shared<LogRecorder>(3);
  const TrainedRun sparse = train_with({}, 40, every_third);
  // Reads after steps 3 of each epoch (1-based), and at each epoch's end.
  EXPECT_EQ(sparse.history.log_reads(), 4);
  ASSERT_EQ(sparse.seen.size(), 2u);
  for (const auto& [step, logs] : sparse.seen) {
    ASSERT_TRUE(each.seen.count(step)) << step;
    EXPECT_EQ(logs, each.seen.at(step)) << "step " << step;
  }
  EXPECT_EQ(sparse.history.history(), each.history.history());
}

// A callback written before reads_logs_at_batch_end existed reads every step, as before.
TEST(FitLogReads, ACallbackThatDoesNotSayReadsEveryStep) {
  std::vector<double> losses;
  auto lambda = std::make_shared<train::LambdaCallback>(train::LambdaCallback::Functions{
      .on_train_batch_end = [&](std::int64_t, const train::Logs& logs) {
        losses.push_back(logs.at("loss"));
      }});
  const TrainedRun run = train_with({lambda}, 40);
  EXPECT_EQ(run.history.log_reads(), 10);
  ASSERT_EQ(losses.size(), 10u);
  EXPECT_NE(losses[0], losses[1]);  // a fresh running mean at every step
}

}  // namespace
}  // namespace tandem
