// The TensorBoard callback: a Model::fit run as TensorBoard event files, in Keras' layout (train
// and validation runs below the log folder, epoch_ and batch_ tags).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "tandem/autodiff.h"
#include "tandem/nn.h"
#include "tandem/observe.h"
#include "train/progress_bar.h"

namespace tandem::observe {
namespace {

constexpr const char* kValidationPrefix = "val_";

std::string format_value(const HParamValue& value) {
  if (const double* number = std::get_if<double>(&value)) {
    std::ostringstream out;
    out << std::setprecision(10) << *number;
    return out.str();
  }
  if (const bool* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  return std::get<std::string>(value);
}

// Markdown treats a bar as a cell border and leading spaces as code.
std::string markdown_cell(const std::string& text) {
  std::string cell;
  for (const char c : text) {
    if (c == '|')
      cell += "\\|";
    else if (c == '\n')
      cell += ' ';
    else
      cell += c;
  }
  return cell;
}

// Every line indented by four spaces: a code block, which keeps the summary's columns.
std::string markdown_code(const std::string& text) {
  std::string block = "    ";
  for (const char c : text) {
    block += c;
    if (c == '\n') block += "    ";
  }
  return block;
}

bool is_image_batch(const Tensor& features) {
  if (!features.defined() || features.rank() != 4) return false;
  const std::int64_t channels = features.dim(3);
  return channels == 1 || channels == 3 || channels == 4;
}

}  // namespace

std::string hparams_markdown(const HParams& hparams) {
  std::string table = "| setting | value |\n|---|---|\n";
  for (const auto& [name, value] : hparams) {
    table += "| " + markdown_cell(name) + " | " + markdown_cell(format_value(value)) + " |\n";
  }
  return table;
}

struct TensorBoard::State {
  TensorBoardOptions options;
  std::shared_ptr<SummaryWriter> run_writer;         // <log_dir>: text, hparams
  std::shared_ptr<SummaryWriter> train_writer;       // <log_dir>/train
  std::unique_ptr<SummaryWriter> validation_writer;  // <log_dir>/validation, once needed
  bool session_open = false;
  bool model_text_written = false;
  std::int64_t global_step = 0;

  // Step timing on the steady clock: a step runs from the end of the previous one (or the start
  // of the epoch), fetching its batch included, as History times it.
  double previous_step_end = 0.0;
  struct Totals {
    double seconds = 0.0;
    double wait_seconds = 0.0;
    std::int64_t examples = 0;
    std::int64_t steps = 0;
  };
  Totals epoch;
  Totals interval;  // since the last batch_ scalars

  SummaryWriter& validation() {
    if (!validation_writer) {
      validation_writer =
          std::make_unique<SummaryWriter>(options.log_dir + "/validation", options.writer);
    }
    return *validation_writer;
  }
};

TensorBoard::TensorBoard(TensorBoardOptions options) : state_(std::make_unique<State>()) {
  if (options.log_dir.empty()) {
    throw InvalidArgument("TensorBoard: log_dir is empty; give the folder for this run's logs");
  }
  if (options.update_freq < 0) {
    throw InvalidArgument("TensorBoard: update_freq must be >= 0 (0: per epoch only), got " +
                          std::to_string(options.update_freq));
  }
  if (options.histogram_freq < 0) {
    throw InvalidArgument("TensorBoard: histogram_freq must be >= 0 (0: no histograms), got " +
                          std::to_string(options.histogram_freq));
  }
  if (options.max_images < 0) {
    throw InvalidArgument("TensorBoard: max_images must be >= 0, got " +
                          std::to_string(options.max_images));
  }
  if (!options.writer.guard) {
    options.writer.guard = std::make_shared<LogGuard>("the TensorBoard logs in " + options.log_dir);
  }
  state_->run_writer = std::make_shared<SummaryWriter>(options.log_dir, options.writer);
  state_->train_writer =
      std::make_shared<SummaryWriter>(options.log_dir + "/train", options.writer);
  state_->options = std::move(options);
}

TensorBoard::~TensorBoard() {
  // fit left by an exception: the session did not finish.
  if (state_->session_open) {
    try {
      state_->run_writer->add_hparams_session_end(SessionStatus::failure);
    } catch (const Error&) {
      // The writers' guard has reported any failed write; a destructor throws nothing.
    }
  }
}

const std::shared_ptr<SummaryWriter>& TensorBoard::run_writer() const {
  return state_->run_writer;
}

bool TensorBoard::logging() const {
  return !state_->options.writer.guard->stopped();
}

void TensorBoard::on_train_begin(const train::Logs&) {
  State& state = *state_;
  const TensorBoardOptions& options = state.options;
  state.global_step = 0;
  std::string config = hparams_markdown(options.hparams);
  if (!options.config_text.empty()) config += "\n" + options.config_text;
  state.run_writer->add_text("config", config, 0);
  if (!options.hparams.empty()) {
    state.run_writer->add_hparams_session_start(options.hparams);
    state.session_open = true;
  }
  if (options.sample_batch && options.max_images > 0 &&
      is_image_batch(options.sample_batch->features)) {
    state.train_writer->add_image("inputs", options.sample_batch->features, 0, options.max_images);
  }
}

void TensorBoard::on_epoch_begin(int, const train::Logs&) {
  state_->epoch = {};
  state_->previous_step_end = train::detail::steady_seconds();
}

void TensorBoard::on_train_batch_begin(std::int64_t, const train::Logs&) {
  // fit fetched this step's batch through next_batch just before.
  const double wait = last_input_wait_seconds();
  state_->epoch.wait_seconds += wait;
  state_->interval.wait_seconds += wait;
}

bool TensorBoard::reads_logs_at_batch_end(std::int64_t) const {
  const State& state = *state_;
  const std::int64_t every = state.options.update_freq;
  return every > 0 && (state.global_step + 1) % every == 0 && logging();
}

void TensorBoard::on_train_batch_end(std::int64_t batch, const train::Logs& logs) {
  State& state = *state_;
  const double now = train::detail::steady_seconds();
  const double seconds = now - state.previous_step_end;
  state.previous_step_end = now;
  // The examples of this step: the batch size, except for a short last batch.
  const train::TrainingParams& run = params();
  std::int64_t examples = run.batch_size;
  if (run.examples > 0 && batch == run.steps - 1) {
    examples = std::clamp<std::int64_t>(run.examples - (run.steps - 1) * run.batch_size, 1,
                                        run.batch_size);
  }
  for (State::Totals* totals : {&state.epoch, &state.interval}) {
    totals->seconds += seconds;
    totals->examples += examples;
    ++totals->steps;
  }
  if (!state.model_text_written && model() != nullptr && model()->built()) {
    state.run_writer->add_text("model", markdown_code(model()->summary_string()), 0);
    state.model_text_written = true;
  }
  const std::int64_t step = state.global_step++;
  const std::int64_t every = state.options.update_freq;
  if (every == 0 || (step + 1) % every != 0 || !logging()) return;
  SummaryWriter& writer = *state.train_writer;
  for (const auto& [key, value] : logs)
    writer.add_scalar("batch_" + key, value, step);
  if (model() != nullptr && model()->compiled()) {
    writer.add_scalar("batch_learning_rate", model()->optimizer().learning_rate(), step);
  }
  if (state.interval.seconds > 0.0) {
    writer.add_scalar("batch_samples_per_sec",
                      static_cast<double>(state.interval.examples) / state.interval.seconds, step);
    writer.add_scalar("batch_input_wait_share",
                      state.interval.wait_seconds / state.interval.seconds, step);
  }
  state.interval = {};
}

void TensorBoard::on_epoch_end(int epoch, const train::Logs& logs) {
  State& state = *state_;
  if (!logging()) return;
  SummaryWriter& train_writer = *state.train_writer;
  for (const auto& [key, value] : logs) {
    if (key.starts_with(kValidationPrefix)) {
      state.validation().add_scalar(
          "epoch_" + key.substr(std::char_traits<char>::length(kValidationPrefix)), value, epoch);
    } else {
      train_writer.add_scalar("epoch_" + key, value, epoch);
    }
  }
  nn::Model* trained = model();
  if (trained != nullptr && trained->compiled()) {
    train_writer.add_scalar("epoch_learning_rate", trained->optimizer().learning_rate(), epoch);
  }
  if (state.epoch.seconds > 0.0) {
    train_writer.add_scalar("epoch_samples_per_sec",
                            static_cast<double>(state.epoch.examples) / state.epoch.seconds, epoch);
    train_writer.add_scalar("epoch_input_wait_share",
                            state.epoch.wait_seconds / state.epoch.seconds, epoch);
  }
  const int every = state.options.histogram_freq;
  if (trained == nullptr || every == 0 || epoch % every != 0) return;
  for (const Tensor& weight : trained->weights())
    train_writer.add_histogram("weights/" + weight.name(), weight, epoch);
  if (!state.options.sample_batch || !trained->compiled()) return;
  // Gradients on the sample batch in inference mode, so that the callback changes no batch-norm
  // statistic and draws no dropout mask of the training run.
  const data::Batch& sample = *state.options.sample_batch;
  const std::vector<Tensor> weights = trained->trainable_weights();
  std::vector<Tensor> gradients;
  {
    GradientTape tape;
    const Tensor predictions = trained->call(sample.features, /*training=*/false);
    const Tensor loss = trained->loss()(sample.labels, predictions);
    gradients = tape.gradient(loss, weights);
  }
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (gradients[i].defined()) {
      train_writer.add_histogram("gradients/" + weights[i].name(), gradients[i], epoch);
    }
  }
}

void TensorBoard::on_train_end(const train::Logs&) {
  State& state = *state_;
  if (state.session_open) {
    state.run_writer->add_hparams_session_end(SessionStatus::success);
    state.session_open = false;
  }
  state.run_writer->flush();
  state.train_writer->flush();
  if (state.validation_writer) state.validation_writer->flush();
}

}  // namespace tandem::observe
