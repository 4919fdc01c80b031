// Model's training methods: compile, the training step under a gradient tape, fit's epoch loop
// with callbacks and step timing, evaluate and predict. They belong to nn::Model (as in Keras)
// but live here, above the nn layer, because they use losses, metrics and optimizers.
#include <chrono>

#include "nn/model_state.h"
#include "nn/tensor_copy.h"
#include "tandem/autodiff.h"
#include "tandem/data.h"
#include "tandem/nn.h"

namespace tandem::nn {
namespace {

using train::Logs;

std::string label(const Model::State& state) {
  return "Model '" + state.name + "'";
}

void require_compiled(const Model::State& state, const char* method) {
  if (!state.optimizer || !state.loss) {
    throw InvalidArgument(label(state) + "." + method +
                          ": the model is not compiled; call model.compile({.optimizer = ..., "
                          ".loss = ..., .metrics = {...}}) first");
  }
}

void require_verbose(int verbose, const char* where) {
  if (verbose < 0 || verbose > 2) {
    throw InvalidArgument(std::string(where) + ": verbose must be 0, 1 or 2, got " +
                          std::to_string(verbose));
  }
}

void require_examples(const Model::State& state, const char* method, const Tensor& x,
                      const Tensor& y) {
  if (!x.defined() || !y.defined() || x.rank() < 1 || y.rank() < 1) {
    throw InvalidArgument(label(state) + "." + method +
                          ": x and y must be defined tensors with a batch dimension");
  }
  if (x.dim(0) != y.dim(0)) {
    throw InvalidArgument(label(state) + "." + method + ": x " + shape_str(x.shape()) + " has " +
                          std::to_string(x.dim(0)) + " examples but y " + shape_str(y.shape()) +
                          " has " + std::to_string(y.dim(0)) + "; give one target per example");
  }
}

void require_batch_size(const Model::State& state, const char* method, std::int64_t batch_size) {
  if (batch_size < 1) {
    throw InvalidArgument(label(state) + "." + method + ": batch_size must be positive, got " +
                          std::to_string(batch_size));
  }
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void reset_metrics(Model::State& state) {
  for (const auto& metric : state.metrics)
    metric->reset_state();
}

// Loss and metric results under their log keys.
void write_logs(const Model::State& state, double loss, Logs& logs) {
  logs["loss"] = loss;
  for (const auto& metric : state.metrics)
    logs[metric->name()] = metric->result();
}

// One optimisation step: forward pass and loss under a tape, gradients of the loss with respect
// to the trainable weights, one optimizer update. `variables` is filled on the first step (a
// Sequential builds during its first forward pass) and reused after. Returns the predictions
// and the loss.
std::pair<Tensor, Tensor> train_step(Model& model, Model::State& state, const Tensor& x,
                                     const Tensor& y, std::vector<Tensor>& variables) {
  Tensor y_pred;
  Tensor loss;
  std::vector<Tensor> gradients;
  {
    GradientTape tape;
    y_pred = model.call(x, /*training=*/true);
    loss = (*state.loss)(y, y_pred);
    if (variables.empty()) variables = model.trainable_weights();
    gradients = tape.gradient(loss, variables);
  }
  state.optimizer->apply_gradients(gradients, variables);
  return {std::move(y_pred), std::move(loss)};
}

}  // namespace

void Model::compile(const train::CompileOptions& options) {
  State& state = *state_;
  if (!options.optimizer) {
    throw InvalidArgument(label(state) +
                          ".compile: an optimizer is required, e.g. .optimizer = "
                          "train::Adam(1e-3) or \"adam\"");
  }
  if (!options.loss) {
    throw InvalidArgument(label(state) +
                          ".compile: a loss is required, e.g. .loss = "
                          "train::SparseCategoricalCrossentropy(/*from_logits=*/true)");
  }
  std::vector<std::shared_ptr<train::Metric>> metrics;
  for (const train::Spec<train::Metric>& metric : options.metrics) {
    if (!metric) throw InvalidArgument(label(state) + ".compile: a metric is empty");
    metrics.push_back(metric.get());
  }
  state.optimizer = options.optimizer.get();
  state.loss = options.loss.get();
  state.metrics = std::move(metrics);
}

bool Model::compiled() const {
  return state_->optimizer != nullptr;
}

train::Optimizer& Model::optimizer() const {
  require_compiled(*state_, "optimizer");
  return *state_->optimizer;
}

const train::Loss& Model::loss() const {
  require_compiled(*state_, "loss");
  return *state_->loss;
}

std::vector<std::shared_ptr<train::Metric>> Model::metrics() const {
  return state_->metrics;
}

void Model::set_verbose(int verbose) {
  require_verbose(verbose, "Model::set_verbose");
  state_->verbose = verbose;
}

int Model::verbose() const {
  return state_->verbose;
}

void Model::set_stop_training(bool stop) {
  state_->stop_training = stop;
}

bool Model::stop_training() const {
  return state_->stop_training;
}

train::History Model::fit(const data::Dataset& dataset, int epochs,
                          const train::FitOptions& options) {
  State& state = *state_;
  require_compiled(state, "fit");
  if (epochs < 1) {
    throw InvalidArgument(label(state) + ".fit: epochs must be positive, got " +
                          std::to_string(epochs));
  }
  const int verbose = options.verbose.value_or(state.verbose);
  require_verbose(verbose, "Model::fit");
  const std::int64_t steps = dataset.num_batches();
  if (steps < 1) {
    throw InvalidArgument(label(state) + ".fit: the dataset has no batches (" +
                          std::to_string(dataset.num_examples()) + " examples, batch size " +
                          std::to_string(dataset.batch_size()) + ")");
  }
  const std::int64_t warmup =
      options.warmup_steps.value_or(train::default_warmup_steps(steps * epochs));
  if (warmup < 0) {
    throw InvalidArgument(label(state) + ".fit: warmup_steps must be >= 0, got " +
                          std::to_string(warmup));
  }

  // History first, so its epoch clock starts before other callbacks run; the progress bar last,
  // so it shows what the others left in the logs.
  auto history = std::make_shared<train::History>();
  history->set_warmup_steps(warmup);
  std::vector<std::shared_ptr<train::Callback>> callbacks{history};
  bool has_progress_bar = false;
  for (const auto& callback : options.callbacks) {
    if (!callback) throw InvalidArgument(label(state) + ".fit: a callback is null");
    has_progress_bar |= dynamic_cast<const train::ProgressBar*>(callback.get()) != nullptr;
    callbacks.push_back(callback);
  }
  if (verbose > 0 && !has_progress_bar) {
    callbacks.push_back(std::make_shared<train::ProgressBar>(verbose));
  }
  for (const auto& callback : callbacks) {
    callback->set_model(this);
    callback->set_params({epochs, steps, verbose});
  }

  state.stop_training = false;
  Logs logs;
  for (const auto& callback : callbacks)
    callback->on_train_begin(logs);
  train::Mean loss_tracker("loss");
  std::vector<Tensor> variables;
  for (int epoch = 0; epoch < epochs && !state.stop_training; ++epoch) {
    loss_tracker.reset_state();
    reset_metrics(state);
    logs.clear();
    for (const auto& callback : callbacks)
      callback->on_epoch_begin(epoch, logs);

    const std::unique_ptr<data::BatchIterator> batches = dataset.iterate(epoch);
    std::int64_t step = 0;
    double step_start = now_seconds();
    while (std::optional<data::Batch> batch = batches->next()) {
      for (const auto& callback : callbacks)
        callback->on_train_batch_begin(step, logs);
      const auto [y_pred, loss] =
          train_step(*this, state, batch->features, batch->labels, variables);
      const std::int64_t examples = batch->features.dim(0);
      loss_tracker.update_state(loss.item(), static_cast<double>(examples));
      for (const auto& metric : state.metrics)
        metric->update_state(batch->labels, y_pred);
      write_logs(state, loss_tracker.result(), logs);
      for (const auto& callback : callbacks)
        callback->on_train_batch_end(step, logs);
      const double step_end = now_seconds();
      history->record_step(step_end - step_start, examples);
      step_start = step_end;
      ++step;
      if (state.stop_training) break;
    }
    if (step == 0) {
      throw InvalidArgument(label(state) + ".fit: the dataset yielded no batch in epoch " +
                            std::to_string(epoch));
    }
    if (options.validation_data != nullptr) {
      for (const auto& [key, value] : evaluate(*options.validation_data))
        logs["val_" + key] = value;
    }
    for (const auto& callback : callbacks)
      callback->on_epoch_end(epoch, logs);
  }
  for (const auto& callback : callbacks)
    callback->on_train_end(logs);
  return *history;
}

train::History Model::fit(const Tensor& x, const Tensor& y, std::int64_t batch_size, int epochs,
                          double validation_split, bool shuffle, std::uint64_t seed,
                          const train::FitOptions& options) {
  State& state = *state_;
  require_examples(state, "fit", x, y);
  require_batch_size(state, "fit", batch_size);
  if (!(validation_split >= 0.0 && validation_split < 1.0)) {
    throw InvalidArgument(label(state) + ".fit: validation_split must be in [0, 1), got " +
                          std::to_string(validation_split));
  }
  if (validation_split > 0.0 && options.validation_data != nullptr) {
    throw InvalidArgument(label(state) +
                          ".fit: give validation_split or FitOptions::validation_data, not both");
  }
  const data::TensorDataset all(x, y);
  auto [training, validation] = all.split(validation_split);
  if (validation_split > 0.0 &&
      (validation->num_examples() == 0 || training->num_examples() == 0)) {
    throw InvalidArgument(label(state) + ".fit: validation_split " +
                          std::to_string(validation_split) + " of " + std::to_string(x.dim(0)) +
                          " examples leaves an empty training or validation set");
  }
  training->batch(batch_size);
  if (shuffle) training->shuffle(seed);
  train::FitOptions effective = options;
  if (validation_split > 0.0) {
    validation->batch(batch_size);
    effective.validation_data = validation.get();
  }
  return fit(*training, epochs, effective);
}

train::Logs Model::evaluate(const data::Dataset& dataset) {
  State& state = *state_;
  require_compiled(state, "evaluate");
  NoGradGuard no_grad;
  reset_metrics(state);
  train::Mean loss_tracker("loss");
  const std::unique_ptr<data::BatchIterator> batches = dataset.iterate(0);
  while (std::optional<data::Batch> batch = batches->next()) {
    const Tensor y_pred = call(batch->features, /*training=*/false);
    loss_tracker.update_state((*state.loss)(batch->labels, y_pred).item(),
                              static_cast<double>(batch->features.dim(0)));
    for (const auto& metric : state.metrics)
      metric->update_state(batch->labels, y_pred);
  }
  Logs logs;
  write_logs(state, loss_tracker.result(), logs);
  return logs;
}

train::Logs Model::evaluate(const Tensor& x, const Tensor& y, std::int64_t batch_size) {
  require_examples(*state_, "evaluate", x, y);
  require_batch_size(*state_, "evaluate", batch_size);
  data::TensorDataset dataset(x, y);
  dataset.batch(batch_size);
  return evaluate(dataset);
}

Tensor Model::predict(const Tensor& x, std::int64_t batch_size) {
  require_batch_size(*state_, "predict", batch_size);
  if (!x.defined() || x.rank() < 1) {
    throw InvalidArgument(label(*state_) + ".predict: x must be a tensor with a batch dimension");
  }
  NoGradGuard no_grad;
  const std::int64_t total = x.dim(0);
  if (total <= batch_size) return call(x, /*training=*/false);
  Tensor predictions;  // (N, ...)
  for (std::int64_t start = 0; start < total; start += batch_size) {
    const std::int64_t count = std::min(batch_size, total - start);
    const Tensor y = call(detail::rows(x, start, count), /*training=*/false);
    if (!predictions.defined()) {
      Shape shape = y.shape();
      shape[0] = total;
      predictions = Tensor::empty(shape, y.dtype(), y.device());
    }
    detail::copy_into(detail::rows(predictions, start, count), y, label(*state_) + ".predict");
  }
  return predictions;
}

train::Logs Model::train_on_batch(const Tensor& x, const Tensor& y) {
  State& state = *state_;
  require_compiled(state, "train_on_batch");
  require_examples(state, "train_on_batch", x, y);
  std::vector<Tensor> variables;
  const auto [y_pred, loss] = train_step(*this, state, x, y, variables);
  reset_metrics(state);
  for (const auto& metric : state.metrics)
    metric->update_state(y, y_pred);
  Logs logs;
  write_logs(state, loss.item(), logs);
  return logs;
}

train::Logs Model::test_on_batch(const Tensor& x, const Tensor& y) {
  State& state = *state_;
  require_compiled(state, "test_on_batch");
  require_examples(state, "test_on_batch", x, y);
  NoGradGuard no_grad;
  const Tensor y_pred = call(x, /*training=*/false);
  const Tensor loss = (*state.loss)(y, y_pred);
  reset_metrics(state);
  for (const auto& metric : state.metrics)
    metric->update_state(y, y_pred);
  Logs logs;
  write_logs(state, loss.item(), logs);
  return logs;
}

}  // namespace tandem::nn
