// The shipped callbacks (keras.callbacks): History with step timing, EarlyStopping,
// LearningRateScheduler, LambdaCallback and the progress bar.
#include <cmath>
#include <iostream>
#include <limits>

#include "core/tensor_copy.h"
#include "tandem/nn.h"
#include "tandem/train.h"
#include "train/progress_bar.h"

namespace tandem::train {
namespace {

nn::Model& model_of(const Callback& callback, const char* name) {
  if (callback.model() == nullptr) {
    throw InvalidArgument(std::string(name) +
                          " has no model: it only works as a callback passed to Model::fit");
  }
  return *callback.model();
}

}  // namespace

std::int64_t default_warmup_steps(std::int64_t total_steps) {
  return std::min<std::int64_t>(10, total_steps / 20);
}

// ---- History ----

void History::on_train_begin(const Logs&) {
  history_.clear();
  epochs_.clear();
  epoch_seconds_.clear();
  step_seconds_.clear();
  step_examples_.clear();
  step_input_wait_seconds_.clear();
  skipped_elements_.clear();
  input_advice_.clear();
}

void History::on_epoch_begin(int, const Logs&) {
  epoch_start_ = detail::steady_seconds();
  step_seconds_.emplace_back();
  step_examples_.emplace_back();
  step_input_wait_seconds_.emplace_back();
}

void History::on_epoch_end(int epoch, const Logs& logs) {
  epoch_seconds_.push_back(detail::steady_seconds() - epoch_start_);
  epochs_.push_back(epoch);
  for (const auto& [key, value] : logs)
    history_[key].push_back(value);
}

void History::record_step(double seconds, std::int64_t examples, double input_wait_seconds) {
  TANDEM_ASSERT(!step_seconds_.empty(), "History::record_step outside an epoch");
  step_seconds_.back().push_back(seconds);
  step_examples_.back().push_back(examples);
  step_input_wait_seconds_.back().push_back(input_wait_seconds);
}

void History::record_input_report(std::int64_t skipped, std::string advice) {
  skipped_elements_.push_back(skipped);
  if (!advice.empty()) input_advice_ = std::move(advice);
}

double History::input_wait_share() const {
  double waited = 0.0;
  std::int64_t step = 0;
  for (const std::vector<double>& epoch : step_input_wait_seconds_) {
    for (const double wait : epoch) {
      if (step++ >= warmup_steps_) waited += wait;
    }
  }
  const double seconds = timed_seconds();
  return seconds > 0.0 ? waited / seconds : 0.0;
}

double History::timed_seconds() const {
  double seconds = 0.0;
  std::int64_t step = 0;
  for (const std::vector<double>& epoch : step_seconds_) {
    for (double step_time : epoch) {
      if (step++ >= warmup_steps_) seconds += step_time;
    }
  }
  return seconds;
}

std::int64_t History::timed_examples() const {
  std::int64_t examples = 0;
  std::int64_t step = 0;
  for (const std::vector<std::int64_t>& epoch : step_examples_) {
    for (std::int64_t count : epoch) {
      if (step++ >= warmup_steps_) examples += count;
    }
  }
  return examples;
}

double History::samples_per_sec() const {
  const double seconds = timed_seconds();
  return seconds > 0.0 ? static_cast<double>(timed_examples()) / seconds : 0.0;
}

// ---- EarlyStopping ----

EarlyStopping::EarlyStopping(std::string monitor, double min_delta, int patience, std::string mode,
                             bool restore_best_weights)
    : monitor_(std::move(monitor)),
      min_delta_(std::abs(min_delta)),
      patience_(patience),
      restore_best_weights_(restore_best_weights) {
  if (mode == "min") {
    maximize_ = false;
  } else if (mode == "max") {
    maximize_ = true;
  } else if (mode == "auto") {
    maximize_ = monitor_.find("acc") != std::string::npos;
  } else {
    throw InvalidArgument("EarlyStopping: mode must be auto, min or max, got '" + mode + "'");
  }
  if (patience < 0) {
    throw InvalidArgument("EarlyStopping: patience must be >= 0, got " + std::to_string(patience));
  }
}

void EarlyStopping::on_train_begin(const Logs&) {
  best_ = maximize_ ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  best_epoch_ = -1;
  wait_ = 0;
  stopped_epoch_ = -1;
  best_weights_.clear();
}

bool EarlyStopping::improved(double value) const {
  return maximize_ ? value - min_delta_ > best_ : value + min_delta_ < best_;
}

// ---- TerminateOnNaN ----

void TerminateOnNaN::on_train_begin(const Logs&) {
  last_finite_.reset();
}

void TerminateOnNaN::on_epoch_begin(int epoch, const Logs&) {
  epoch_ = epoch;
}

void TerminateOnNaN::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  step_ = epoch_ * params().steps + batch + 1;
  check(logs, "at step " + std::to_string(step_) + " (epoch " + std::to_string(epoch_ + 1) +
                  ", batch " + std::to_string(batch + 1) + ")");
}

void TerminateOnNaN::on_epoch_end(int epoch, const Logs& logs) {
  check(logs, "by the end of epoch " + std::to_string(epoch + 1));
}

void TerminateOnNaN::check(const Logs& logs, const std::string& where) {
  const auto loss = logs.find("loss");
  if (loss == logs.end()) return;
  if (std::isfinite(loss->second)) {
    last_finite_ = loss->second;
    last_finite_step_ = step_;
    return;
  }
  const std::string last = last_finite_ ? "; the last finite loss seen was " +
                                              std::to_string(*last_finite_) + " at step " +
                                              std::to_string(last_finite_step_)
                                        : "";
  throw NonFiniteLoss(
      "training diverged: the loss became " +
      std::string(std::isnan(loss->second) ? "nan" : "inf") + " " + where + last +
      "; try a lower learning rate, gradient clipping (clipnorm), or fp32 instead of fp16; the "
      "checkpoints written before it (if any) hold the weights it had");
}

// Keras' rule: every epoch adds one to the wait, an improvement resets it, and training stops
// once the wait reaches the patience (never after the first epoch).
void EarlyStopping::on_epoch_end(int epoch, const Logs& logs) {
  const auto entry = logs.find(monitor_);
  if (entry == logs.end()) {
    std::string keys;
    for (const auto& [key, value] : logs)
      keys += (keys.empty() ? "" : ", ") + key;
    throw InvalidArgument("EarlyStopping: monitor '" + monitor_ + "' is not in the logs (" + keys +
                          "); monitor one of those, or pass validation data for val_ entries");
  }
  nn::Model& model = model_of(*this, "EarlyStopping");
  ++wait_;
  if (improved(entry->second)) {
    best_ = entry->second;
    best_epoch_ = epoch;
    wait_ = 0;
    if (restore_best_weights_) {
      best_weights_.clear();
      for (const Tensor& weight : model.weights())
        best_weights_.push_back(weight.clone());
    }
    return;
  }
  if (wait_ >= patience_ && epoch > 0) {
    stopped_epoch_ = epoch;
    model.set_stop_training(true);
    if (restore_best_weights_ && !best_weights_.empty()) {
      const std::vector<Tensor> weights = model.weights();
      for (std::size_t i = 0; i < weights.size(); ++i) {
        tandem::detail::copy_into(weights[i], best_weights_[i],
                                  "EarlyStopping: restoring " + weights[i].name());
      }
    }
  }
}

// ---- LearningRateScheduler ----

LearningRateScheduler::LearningRateScheduler(ScheduleFn schedule, int verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {
  if (!schedule_) throw InvalidArgument("LearningRateScheduler: the schedule function is empty");
}

void LearningRateScheduler::on_epoch_begin(int epoch, const Logs&) {
  Optimizer& optimizer = model_of(*this, "LearningRateScheduler").optimizer();
  const double rate = schedule_(epoch, optimizer.learning_rate());
  if (!(rate >= 0.0) || !std::isfinite(rate)) {
    throw InvalidArgument("LearningRateScheduler: the schedule returned " + std::to_string(rate) +
                          " for epoch " + std::to_string(epoch) + "; return a finite rate >= 0");
  }
  optimizer.set_learning_rate(rate);
  if (verbose_ > 0) {
    std::cout << "\nEpoch " << epoch + 1 << ": LearningRateScheduler setting learning rate to "
              << rate << ".\n";
  }
}

// ---- LambdaCallback ----

void LambdaCallback::on_train_begin(const Logs& logs) {
  if (functions_.on_train_begin) functions_.on_train_begin(logs);
}
void LambdaCallback::on_train_end(const Logs& logs) {
  if (functions_.on_train_end) functions_.on_train_end(logs);
}
void LambdaCallback::on_epoch_begin(int epoch, const Logs& logs) {
  if (functions_.on_epoch_begin) functions_.on_epoch_begin(epoch, logs);
}
void LambdaCallback::on_epoch_end(int epoch, const Logs& logs) {
  if (functions_.on_epoch_end) functions_.on_epoch_end(epoch, logs);
}
void LambdaCallback::on_train_batch_begin(std::int64_t batch, const Logs& logs) {
  if (functions_.on_train_batch_begin) functions_.on_train_batch_begin(batch, logs);
}
void LambdaCallback::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  if (functions_.on_train_batch_end) functions_.on_train_batch_end(batch, logs);
}

// ---- ProgressBar ----

struct ProgressBar::State {
  int verbose;
  std::ostream* out;
  bool interactive;
  double interval_seconds;
  std::unique_ptr<detail::ProgressBar> bar;
  std::int64_t steps_done = 0;
};

ProgressBar::ProgressBar(int verbose, std::ostream* out, std::optional<bool> interactive,
                         double interval_seconds)
    : state_(std::make_unique<State>(
          State{verbose, out != nullptr ? out : &std::cout,
                interactive.value_or(out == nullptr && detail::stdout_is_terminal()),
                interval_seconds, nullptr})) {
  if (verbose < 0 || verbose > 2) {
    throw InvalidArgument("ProgressBar: verbose must be 0, 1 or 2, got " + std::to_string(verbose));
  }
}

ProgressBar::~ProgressBar() = default;

void ProgressBar::on_epoch_begin(int epoch, const Logs&) {
  State& state = *state_;
  if (state.verbose == 0) return;
  *state.out << "Epoch " << epoch + 1 << '/' << params().epochs
             << '\n';  // as Keras, even for one epoch
  state.bar = std::make_unique<detail::ProgressBar>(params().steps, state.verbose, *state.out,
                                                    state.interactive, state.interval_seconds);
  state.steps_done = 0;
}

bool ProgressBar::reads_logs_at_batch_end(std::int64_t) const {
  const State& state = *state_;
  return state.bar && state.bar->draws();
}

void ProgressBar::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  State& state = *state_;
  if (!state.bar) return;
  state.steps_done = batch + 1;
  state.bar->update(state.steps_done, logs);
}

void ProgressBar::on_epoch_end(int, const Logs& logs) {
  State& state = *state_;
  if (!state.bar) return;
  state.bar->update(state.steps_done, logs, /*finalize=*/true);
  state.bar.reset();
}

}  // namespace tandem::train
