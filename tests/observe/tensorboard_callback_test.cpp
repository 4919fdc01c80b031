// The TensorBoard callback on a real Model::fit: Keras' run layout and tags, per-step and
// per-epoch scalars, histograms of weights and gradients, sample images, the configuration text
// and the hparams session, which ends in failure when fit is left by an exception.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "data/idx_files.h"
#include "observe/event_decoder.h"
#include "support/errors.h"
#include "tandem/nn.h"
#include "tandem/observe.h"
#include "tandem/random.h"

namespace tandem::testing {
namespace {

struct SmallRun {
  Tensor images;  // (48, 8, 8, 1)
  Tensor labels;  // (48,)
  nn::Model model;
};

SmallRun small_cnn() {
  manual_seed(5);
  Tensor images = random_uniform({48, 8, 8, 1}, 0.0, 1.0);
  std::vector<std::int32_t> labels(48);
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int32_t>(i % 3);
  nn::Sequential layers({nn::Conv2D(4, 3, "relu"), nn::Flatten(), nn::Dense(3)}, "small");
  layers.build({8, 8, 1});
  nn::Model model(std::move(layers));
  model.compile({.optimizer = train::Adam(0.01),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  return {images, Tensor::from_vector(labels, {48}), std::move(model)};
}

std::set<std::string> tags_of(const std::vector<SummaryValue>& values) {
  std::set<std::string> tags;
  for (const SummaryValue& value : values)
    tags.insert(value.tag);
  return tags;
}

TEST(TensorBoardCallback, LogsAFitRunInKerasLayout) {
  ScratchDir dir;
  SmallRun run = small_cnn();
  data::TensorDataset all(run.images, run.labels);
  auto [training, validation] = all.split(0.25);  // 36 training, 12 validation examples
  training->batch(8);                             // 5 steps: 8, 8, 8, 8, 4 examples
  validation->batch(8);
  observe::TensorBoardOptions options;
  options.log_dir = dir.path().string();
  options.update_freq = 2;
  options.histogram_freq = 2;
  options.sample_batch = data::Batch{run.images, run.labels};
  options.max_images = 2;
  options.hparams = {{"learning_rate", 0.01}, {"model", std::string("small")}};
  options.config_text = "started by the test";
  auto board = std::make_shared<observe::TensorBoard>(options);
  const train::History history = run.model.fit(
      *training,
      {.epochs = 3, .verbose = 0, .callbacks = {board}, .validation_data = validation.get()});

  // Layer names are unique in the process ("conv2d", "conv2d_1", ...).
  const std::vector<Tensor> weights = run.model.weights();  // conv kernel, bias; dense kernel, bias
  const std::string conv_kernel = weights.at(0).name();
  const std::string dense_kernel = weights.at(2).name();
  const std::string dense_bias = weights.at(3).name();
  const auto train_values = read_summaries(dir.path() / "train");
  const std::set<std::string> train_tags = tags_of(train_values);
  for (const char* tag :
       {"epoch_loss", "epoch_accuracy", "epoch_learning_rate", "epoch_samples_per_sec",
        "epoch_input_wait_share", "batch_loss", "batch_accuracy", "batch_learning_rate",
        "batch_samples_per_sec", "batch_input_wait_share", "inputs/image/0", "inputs/image/1"}) {
    EXPECT_TRUE(train_tags.contains(tag)) << tag << " in " << ::testing::PrintToString(train_tags);
  }
  EXPECT_TRUE(train_tags.contains("weights/" + dense_bias));
  EXPECT_FALSE(train_tags.contains("inputs/image/2"));
  EXPECT_FALSE(train_tags.contains("epoch_val_loss"));

  // Per epoch, at the epoch's step, with the values fit returned.
  const auto losses = with_tag(train_values, "epoch_loss");
  ASSERT_EQ(losses.size(), 3u);
  for (int epoch = 0; epoch < 3; ++epoch) {
    EXPECT_EQ(losses[epoch].step, epoch);
    EXPECT_FLOAT_EQ(losses[epoch].value.float_value(tb::kSimpleValue),
                    static_cast<float>(history.history().at("loss")[epoch]));
  }
  // Every second step of the 15: steps 1, 3, ..., 13.
  const auto batch_losses = with_tag(train_values, "batch_loss");
  ASSERT_EQ(batch_losses.size(), 7u);
  EXPECT_EQ(batch_losses.front().step, 1);
  EXPECT_EQ(batch_losses.back().step, 13);
  EXPECT_FLOAT_EQ(
      with_tag(train_values, "epoch_learning_rate")[0].value.float_value(tb::kSimpleValue), 0.01f);
  for (const SummaryValue& share : with_tag(train_values, "epoch_input_wait_share")) {
    EXPECT_GE(share.value.float_value(tb::kSimpleValue), 0.0f);
    EXPECT_LT(share.value.float_value(tb::kSimpleValue), 1.0f);
  }
  EXPECT_GT(with_tag(train_values, "epoch_samples_per_sec")[0].value.float_value(tb::kSimpleValue),
            0.0f);

  // Histograms at epochs 0 and 2, weights and gradients (the sample batch has 48 examples).
  const auto kernels = with_tag(train_values, "weights/" + conv_kernel);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].step, 0);
  EXPECT_EQ(kernels[1].step, 2);
  EXPECT_EQ(kernels[0].value.message(tb::kHisto).double_value(tb::kNum), 3 * 3 * 1 * 4);
  const auto gradients = with_tag(train_values, "gradients/" + dense_kernel);
  ASSERT_EQ(gradients.size(), 2u);
  EXPECT_GT(gradients[0].value.message(tb::kHisto).double_value(tb::kSumSquares), 0.0);

  // Validation metrics in their own run, under the same tags.
  const auto validation_values = read_summaries(dir.path() / "validation");
  const auto val_losses = with_tag(validation_values, "epoch_loss");
  ASSERT_EQ(val_losses.size(), 3u);
  EXPECT_FLOAT_EQ(val_losses[2].value.float_value(tb::kSimpleValue),
                  static_cast<float>(history.history().at("val_loss")[2]));
  EXPECT_EQ(with_tag(validation_values, "epoch_accuracy").size(), 3u);

  // The run itself: configuration and model text, and a finished hparams session.
  const auto run_values = read_summaries(dir.path());
  const auto config = with_tag(run_values, "config");
  ASSERT_EQ(config.size(), 1u);
  const std::string config_text = config[0].value.message(tb::kTensor).string(tb::kStringVal);
  EXPECT_NE(config_text.find("| learning_rate | 0.01 |"), std::string::npos) << config_text;
  EXPECT_NE(config_text.find("| model | small |"), std::string::npos) << config_text;
  EXPECT_NE(config_text.find("started by the test"), std::string::npos) << config_text;
  const auto model_text = with_tag(run_values, "model");
  ASSERT_EQ(model_text.size(), 1u);
  EXPECT_NE(model_text[0].value.message(tb::kTensor).string(tb::kStringVal).find("Conv2D"),
            std::string::npos);
  ASSERT_EQ(with_tag(run_values, "_hparams_/session_start_info").size(), 1u);
  const auto end = with_tag(run_values, "_hparams_/session_end_info");
  ASSERT_EQ(end.size(), 1u);
  const Message end_plugin(
      end[0].value.message(tb::kMetadata).message(tb::kPluginData).string(tb::kPluginContent));
  EXPECT_EQ(end_plugin.message(tb::kSessionEndInfo).varint_value(tb::kStatus),
            static_cast<std::uint64_t>(tb::kStatusSuccess));
}

TEST(TensorBoardCallback, PerEpochOnlyByDefaultAndNoHistogramsWithoutASampleBatch) {
  ScratchDir dir;
  SmallRun run = small_cnn();
  observe::TensorBoardOptions options;
  options.log_dir = dir.path().string();
  auto board = std::make_shared<observe::TensorBoard>(options);
  run.model.fit(run.images, run.labels,
                {.batch_size = 16, .epochs = 2, .verbose = 0, .callbacks = {board}, .seed = 1});
  board.reset();
  const std::set<std::string> tags = tags_of(read_summaries(dir.path() / "train"));
  EXPECT_TRUE(tags.contains("epoch_loss"));
  EXPECT_FALSE(tags.contains("batch_loss"));
  const std::string kernel = run.model.weights().at(0).name();  // e.g. "conv2d_1/kernel"
  EXPECT_TRUE(tags.contains("weights/" + kernel)) << kernel;
  EXPECT_FALSE(tags.contains("gradients/" + kernel));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "validation"));
  // No hparams given: no session.
  EXPECT_TRUE(with_tag(read_summaries(dir.path()), "_hparams_/session_start_info").empty());
}

// Batches that take 30 ms each to arrive: training on them mostly waits for input.
class SlowDataset final : public data::Dataset {
 public:
  SlowDataset(Tensor features, Tensor labels) : features_(features), labels_(labels) {}
  std::unique_ptr<data::BatchIterator> iterate(std::int64_t) const override {
    struct Slow final : data::BatchIterator {
      const SlowDataset* dataset;
      int served = 0;
      std::optional<data::Batch> next() override {
        if (served++ == dataset->num_batches()) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        return data::Batch{dataset->features_, dataset->labels_};
      }
    };
    auto iterator = std::make_unique<Slow>();
    iterator->dataset = this;
    return iterator;
  }
  std::int64_t num_examples() const override { return 4 * features_.dim(0); }
  std::int64_t num_batches() const override { return 4; }
  std::int64_t batch_size() const override { return features_.dim(0); }

 private:
  Tensor features_;
  Tensor labels_;
};

TEST(TensorBoardCallback, TheInputWaitShareShowsAnInputBoundRun) {
  ScratchDir dir;
  SmallRun run = small_cnn();
  const SlowDataset slow(run.images, run.labels);
  auto board = std::make_shared<observe::TensorBoard>(
      observe::TensorBoardOptions{.log_dir = dir.path().string(), .update_freq = 1});
  const train::History history =
      run.model.fit(slow, {.epochs = 1, .verbose = 0, .callbacks = {board}});
  board.reset();
  const auto values = read_summaries(dir.path() / "train");
  const auto share = with_tag(values, "epoch_input_wait_share");
  ASSERT_EQ(share.size(), 1u);
  const double logged = share[0].value.float_value(tb::kSimpleValue);
  // The share fit's History measured for itself, and the waits it must contain: 4 x 30 ms.
  EXPECT_NEAR(logged, history.input_wait_share(), 0.05);
  double step_seconds = 0.0;
  for (double seconds : history.step_seconds().at(0))
    step_seconds += seconds;
  EXPECT_GE(logged * step_seconds, 4 * 0.03 * 0.95);
  EXPECT_LE(logged, 1.0);
  // 4 steps of 48 examples, each at least 30 ms apart: under 1600 examples/s.
  const auto rate = with_tag(values, "epoch_samples_per_sec");
  EXPECT_LT(rate.at(0).value.float_value(tb::kSimpleValue), 48 / 0.03);
  EXPECT_EQ(with_tag(values, "batch_input_wait_share").size(), 4u);
}

// A callback that fails in the middle of training.
class FailAtStep final : public train::Callback {
 public:
  void on_train_batch_end(std::int64_t batch, const train::Logs&) override {
    if (batch == 2) throw Error("the test stops training here");
  }
};

TEST(TensorBoardCallback, ASessionLeftByAnExceptionEndsInFailure) {
  ScratchDir dir;
  {
    SmallRun run = small_cnn();
    observe::TensorBoardOptions options;
    options.log_dir = dir.path().string();
    options.hparams = {{"batch_size", 8.0}};
    auto board = std::make_shared<observe::TensorBoard>(options);
    EXPECT_THROW(run.model.fit(run.images, run.labels,
                               {.batch_size = 8,
                                .epochs = 1,
                                .verbose = 0,
                                .callbacks = {board, std::make_shared<FailAtStep>()},
                                .seed = 1}),
                 Error);
  }
  const auto end = with_tag(read_summaries(dir.path()), "_hparams_/session_end_info");
  ASSERT_EQ(end.size(), 1u);
  const Message end_plugin(
      end[0].value.message(tb::kMetadata).message(tb::kPluginData).string(tb::kPluginContent));
  EXPECT_EQ(end_plugin.message(tb::kSessionEndInfo).varint_value(tb::kStatus),
            static_cast<std::uint64_t>(tb::kStatusFailure));
}

TEST(TensorBoardCallback, BadOptionsAreClearErrors) {
  EXPECT_NE(error_of([] { observe::TensorBoard board({}); }).find("log_dir is empty"),
            std::string::npos);
  ScratchDir dir;
  EXPECT_NE(error_of([&] {
              observe::TensorBoard board({.log_dir = dir.path().string(), .update_freq = -1});
            }).find("update_freq must be >= 0"),
            std::string::npos);
}

TEST(HParamsMarkdown, IsATableOfSettings) {
  EXPECT_EQ(observe::hparams_markdown({{"lr", 0.001}, {"name", std::string("a|b")}, {"bn", true}}),
            "| setting | value |\n|---|---|\n| bn | true |\n| lr | 0.001 |\n| name | a\\|b |\n");
}

}  // namespace
}  // namespace tandem::testing
