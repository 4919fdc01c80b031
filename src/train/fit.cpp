// Model's training methods: compile, the training step under a gradient tape, fit's epoch loop
// with callbacks and step timing, evaluate and predict. They belong to nn::Model (as in Keras)
// but live here, above the nn layer, because they use losses, metrics and optimizers.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include "core/tensor_copy.h"
#include "nn/model_state.h"
#include "tandem/autodiff.h"
#include "tandem/compile.h"
#include "tandem/data.h"
#include "tandem/mixed_precision.h"
#include "tandem/nn.h"
#include "tandem/runtime.h"
#include "tandem/spans.h"
#include "tandem/train.h"
#include "train/distribution.h"

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

// Above this share of the step time spent waiting for batches, training is input-bound.
constexpr double kInputBoundShare = 0.10;
// Below this much waiting in all, the time lost is too small to act on (a few steps of a tiny
// model, whose steps take microseconds, spend a large share slicing in-memory batches).
constexpr double kInputBoundMinimumWaitSeconds = 0.1;

// The end-of-training word on the input, as a performance guide would give it: the share of the
// step time spent waiting for batches and the most likely fix.
void warn_if_input_bound(const train::History& history) {
  const double share = history.input_wait_share();
  if (share <= kInputBoundShare ||
      share * history.timed_seconds() < kInputBoundMinimumWaitSeconds) {
    return;
  }
  const std::string fix =
      !history.input_advice().empty()
          ? history.input_advice()
          : "make the batches ahead of the model: build the input as a data::Pipeline ending in "
            ".prefetch(data::kAutotune), with map(..., {.num_parallel_calls = "
            "data::kAutotune}) for per-element work";
  std::cout << "WARNING: training waited for input " << std::lround(100.0 * share)
            << "% of the step time (above " << std::lround(100.0 * kInputBoundShare)
            << "%): the input pipeline is the bottleneck. Most likely fix: " << fix << "\n";
}

// A training step that ran out of memory, said with the batch size and the fixes to try.
OutOfMemory training_out_of_memory(const OutOfMemory& error, std::int64_t batch_size) {
  return OutOfMemory(
      std::string(error.what()) + ", training a batch of " + std::to_string(batch_size) +
          " examples. Try a smaller batch size (`tandem train --find-max-batch` finds the largest "
          "that fits), mixed precision (`--precision bf16`, or "
          "mixed_precision::set_global_policy(\"mixed_bfloat16\")) to halve the activations, or "
          "gradient accumulation (OptimizerOptions::gradient_accumulation_steps) to keep the "
          "effective batch with smaller steps",
      error.device(), error.requested_bytes(), error.held_bytes(), error.available_bytes());
}

// Runs one training step, adding the batch size and the fixes to an out-of-memory error.
template <typename Step>
std::pair<Tensor, Tensor> within_memory(std::int64_t batch_size, Step&& step) {
  try {
    return step();
  } catch (const OutOfMemory& error) {
    throw training_out_of_memory(error, batch_size);
  }
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void reset_metrics(Model::State& state) {
  for (const auto& metric : state.metrics)
    metric->reset_state();
}

// A training step whose loss and metrics fit has not read from their device yet.
struct UnreadStep {
  Tensor loss;
  Tensor labels;
  Tensor y_pred;
  std::int64_t examples = 0;
};

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
                                     const Tensor& y, std::vector<Tensor>& variables,
                                     train::detail::ReplicaStep* replica = nullptr) {
  Tensor y_pred;
  Tensor loss;
  std::vector<Tensor> gradients;
  {
    GradientTape tape;
    {
      SpanScope forward(SpanKind::forward);
      y_pred = model.call(x, /*training=*/true);
      loss = (*state.loss)(y, y_pred);
    }
    if (variables.empty()) variables = model.trainable_weights();
    SpanScope backward(SpanKind::backward);
    // Under loss scaling (mixed_float16) the gradients are of the scaled loss; the optimizer
    // divides them by the scale again.
    gradients = tape.gradient(state.optimizer->scale_loss(loss), variables, {}, false,
                              replica != nullptr ? replica->gradient_ready() : nullptr);
  }
  // Data-parallel: the replicas' gradients are combined first; one replica may apply for all.
  if (replica != nullptr && !replica->reduce(gradients, variables)) {
    return {std::move(y_pred), std::move(loss)};
  }
  SpanScope optimizer(SpanKind::optimizer);
  state.optimizer->apply_gradients(gradients, variables);
  return {std::move(y_pred), std::move(loss)};
}

// What decides the compiled training step's graph besides the batch: the precision policy,
// deterministic mode, the trainable weights (a layer frozen or unfrozen changes the graph), the
// layers' simulated quantisation and the optimizer (compile() with a new one starts a new cache).
StepSignature train_step_signature(const Model& model, const Tensor& x, const Tensor& y) {
  StepSignature signature = input_signature({x, y});
  const std::optional<mixed_precision::Policy> policy = mixed_precision::global_policy();
  signature.push_back({"precision", policy ? policy->name() : "float32"});
  signature.push_back({"deterministic", deterministic() ? "on" : "off"});
  std::string trainable;
  for (const Tensor& weight : model.trainable_weights())
    trainable += (trainable.empty() ? "" : ", ") +
                 (weight.name().empty() ? "#" + std::to_string(weight.id()) : weight.name());
  signature.push_back({"trainable weights", trainable});
  std::string quantized;
  for (const nn::Layer& layer : model.layers()) {
    if (const auto& quantizer = layer.impl().quantizer()) {
      quantized += (quantized.empty() ? "" : ", ") + layer.name() + " " + quantizer->signature();
    }
  }
  if (!quantized.empty()) signature.push_back({"quantized layers", quantized});
  return signature;
}

// The training step on one batch: compiled when the model was compiled with jit (traced once
// per signature, then one planned graph a step), eagerly otherwise. The first step of a model
// not built yet runs eagerly: it builds the layers, whose weights the signature names; the two
// kinds of step give the same results, bit for bit.
std::pair<Tensor, Tensor> run_train_step(Model& model, Model::State& state, const Tensor& x,
                                         const Tensor& y, std::vector<Tensor>& variables) {
  if (!state.jit || !model.built()) return train_step(model, state, x, y, variables);
  std::optional<CompiledStep> step;
  try {
    step = state.train_steps->get(train_step_signature(model, x, y), [&] {
      return trace_step("train_step",
                        [&](const std::vector<Tensor>& inputs) {
                          auto [y_pred, loss] =
                              train_step(model, state, inputs[0], inputs[1], variables);
                          return std::vector<Tensor>{y_pred, loss};
                        },
                        {x, y});
    });
  } catch (const Error& error) {
    // Tracing runs nothing, so the eager step starts from the same state. Where the caller
    // asked for a compiled step, that it cannot be is an error (naming the op and why).
    if (!state.jit_by_default) throw;
    state.jit = false;
    write_compile_log("tandem: the training step runs eagerly: it could not be compiled (" +
                      std::string(error.what()) +
                      "); jit_compile = true (tandem train --jit on) makes this an error");
    return train_step(model, state, x, y, variables);
  }
  std::vector<Tensor> results = step->run({x, y});
  return {std::move(results[0]), std::move(results[1])};
}

// A training step under the model's distribution strategy: every replica runs train_step on its
// share of the global batch; the predictions and loss returned cover the whole global batch.
std::pair<Tensor, Tensor> distributed_step(Model& model, Model::State& state,
                                           const data::Batch& batch,
                                           std::vector<Tensor>& variables) {
  return state.distribution->step(
      batch.features, batch.labels, *state.loss,
      [&](const Tensor& x, const Tensor& y, train::detail::ReplicaStep& replica) {
        // One replica with nothing to combine (single_replica): the step compiles as without
        // a strategy.
        return state.jit ? run_train_step(model, state, x, y, variables)
                         : train_step(model, state, x, y, variables, &replica);
      });
}

// A batch on the device the model's strategy runs it on (unchanged without a strategy).
data::Batch on_model_device(const Model::State& state, const data::Batch& batch) {
  if (!state.distribution) return batch;
  const Device device = state.distribution->input_device();
  return {batch.features.to(device), batch.labels.to(device)};
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
  std::shared_ptr<train::Optimizer> optimizer =
      mixed_precision::optimizer_for_policy(options.optimizer.get());
  std::shared_ptr<train::detail::Distribution> distribution = train::detail::current_distribution();
  // Why the step cannot be compiled, if it cannot.
  std::string untraceable = optimizer->untraceable_reason();
  if (distribution && distribution->compiles_steps() && !untraceable.empty()) {
    throw InvalidArgument(label(state) +
                          ".compile: this strategy compiles the whole training step (XLA), but "
                          "it cannot be traced: " +
                          untraceable + "; train with another strategy (--strategy cpu)");
  }
  if (untraceable.empty() && distribution && !distribution->single_replica() &&
      !distribution->compiles_steps()) {
    untraceable =
        "training over several replicas runs each replica's step eagerly (the "
        "gradients are all-reduced on the host as the backward pass goes)";
  }
  if (options.jit_compile.value_or(false) && !untraceable.empty()) {
    throw InvalidArgument(label(state) +
                          ".compile: jit_compile = true, but the training step "
                          "cannot be compiled: " +
                          untraceable +
                          "; compile with jit_compile = false (tandem train --jit off)");
  }
  state.optimizer = std::move(optimizer);
  state.loss = options.loss.get();
  state.metrics = std::move(metrics);
  state.distribution = std::move(distribution);
  const Device device = state.distribution ? state.distribution->input_device() : Device::cpu();
  state.jit = untraceable.empty() &&
              !(state.distribution && state.distribution->compiles_steps()) &&
              options.jit_compile.value_or(train::default_jit_compile(device));
  state.jit_by_default = !options.jit_compile.has_value();
  state.train_steps = std::make_shared<StepCache>("train_step");
}

}  // namespace tandem::nn

namespace tandem::train {

bool default_jit_compile(const Device& device) {
  return device.type == DeviceType::cpu || device.type == DeviceType::cuda;
}

}  // namespace tandem::train

namespace tandem::nn {

bool Model::jit_compiled() const {
  return state_->jit;
}

std::string Model::compiled_step_listing() const {
  const CompiledStep* step = state_->train_steps ? state_->train_steps->last() : nullptr;
  return step != nullptr ? step->listing() : "";
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

train::Mean& Model::loss_tracker() const {
  return state_->epoch_loss;
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

train::History Model::fit(const data::Dataset& dataset, const train::FitOptions& options) {
  State& state = *state_;
  require_compiled(state, "fit");
  if (options.batch_size) {
    throw InvalidArgument(label(state) +
                          ".fit: batch_size is for tensors; a dataset has its batches already "
                          "(batch it with the size you want, e.g. Pipeline::batch)");
  }
  if (options.validation_split != 0.0) {
    throw InvalidArgument(label(state) +
                          ".fit: validation_split is for tensors; split a dataset yourself and "
                          "give the held-out part as validation_data");
  }
  const int epochs = options.epochs;
  if (epochs < 1) {
    throw InvalidArgument(label(state) + ".fit: epochs must be positive, got " +
                          std::to_string(epochs));
  }
  // Under a strategy only the chief worker shows progress.
  const int verbose = state.distribution && !state.distribution->is_chief()
                          ? 0
                          : options.verbose.value_or(state.verbose);
  require_verbose(verbose, "Model::fit");
  const std::int64_t steps = dataset.num_batches();
  if (steps < 1) {
    throw InvalidArgument(label(state) + ".fit: the dataset has no batches (" +
                          std::to_string(dataset.num_examples()) + " examples, batch size " +
                          std::to_string(dataset.batch_size()) + ")");
  }
  if (options.initial_epoch < 0 || options.initial_epoch > epochs) {
    throw InvalidArgument(label(state) +
                          ".fit: initial_epoch must be in [0, epochs = " + std::to_string(epochs) +
                          "], got " + std::to_string(options.initial_epoch));
  }
  if (options.initial_step < 0 || options.initial_step > steps ||
      (options.initial_step > 0 && options.initial_epoch == epochs)) {
    throw InvalidArgument(label(state) + ".fit: initial_step must be in [0, " +
                          std::to_string(steps) + "] (the batches per epoch) within an epoch " +
                          "still to run, got " + std::to_string(options.initial_step));
  }
  const std::int64_t planned_steps =
      steps * (epochs - options.initial_epoch) - options.initial_step;
  const std::int64_t warmup =
      options.warmup_steps.value_or(train::default_warmup_steps(planned_steps));
  if (warmup < 0) {
    throw InvalidArgument(label(state) + ".fit: warmup_steps must be >= 0, got " +
                          std::to_string(warmup));
  }

  if (state.distribution) state.distribution->prepare(*this, dataset, epochs);

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
  bool reads_weights_each_batch = false;
  for (const auto& callback : callbacks) {
    callback->set_model(this);
    callback->set_params({epochs, steps, verbose, dataset.batch_size(), dataset.num_examples()});
    reads_weights_each_batch = reads_weights_each_batch || callback->reads_weights_at_batch_end();
  }

  state.stop_training = false;
  Logs logs;
  for (const auto& callback : callbacks)
    callback->on_train_begin(logs);
  train::Mean& loss_tracker = state.epoch_loss;
  std::vector<Tensor> variables;
  for (int epoch = options.initial_epoch; epoch < epochs && !state.stop_training; ++epoch) {
    const std::int64_t skipped = epoch == options.initial_epoch ? options.initial_step : 0;
    // A resumed epoch keeps the loss and metrics its checkpoint restored.
    if (skipped == 0) {
      loss_tracker.reset_state();
      reset_metrics(state);
    }
    logs.clear();
    for (const auto& callback : callbacks)
      callback->on_epoch_begin(epoch, logs);

    const std::unique_ptr<data::BatchIterator> batches = dataset.iterate(epoch);
    // The batches trained before the restart: an epoch's order depends only on the epoch, so
    // drawing and dropping them puts the iterator where the interrupted run was.
    for (std::int64_t done = 0; done < skipped; ++done) {
      if (!batches->next()) {
        throw InvalidArgument(label(state) + ".fit: the dataset ended after " +
                              std::to_string(done) + " batches of epoch " + std::to_string(epoch) +
                              " while skipping the " + std::to_string(skipped) +
                              " already trained; resume with the dataset the run used");
      }
    }
    std::int64_t step = skipped;
    double step_start = now_seconds();
    // The steps whose loss and metrics have not been read yet: reading them is a host sync on a
    // GPU, so it waits until a callback reads the logs (in step order, so the running values
    // are those of one read per step).
    std::vector<UnreadStep> unread;
    const auto read_steps = [&] {
      for (const UnreadStep& done : unread) {
        loss_tracker.update_state(done.loss.item(), static_cast<double>(done.examples));
        for (const auto& metric : state.metrics)
          metric->update_state(done.labels, done.y_pred);
      }
      if (!unread.empty()) history->record_log_read(static_cast<std::int64_t>(unread.size()));
      unread.clear();
      write_logs(state, loss_tracker.result(), logs);
    };
    while (std::optional<data::Batch> batch = train::next_batch(*batches)) {
      const double input_wait = now_seconds() - step_start;
      for (const auto& callback : callbacks)
        callback->on_train_batch_begin(step, logs);
      const auto [y_pred, loss] = within_memory(batch->features.dim(0), [&] {
        return state.distribution
                   ? distributed_step(*this, state, *batch, variables)
                   : run_train_step(*this, state, batch->features, batch->labels, variables);
      });
      const std::int64_t examples = batch->features.dim(0);
      unread.push_back({loss, batch->labels, y_pred, examples});
      const bool logs_read =
          static_cast<std::int64_t>(unread.size()) >= train::kMaxUnreadSteps ||
          std::any_of(callbacks.begin(), callbacks.end(), [&](const auto& callback) {
            return callback->reads_logs_at_batch_end(step);
          });
      if (logs_read) read_steps();
      if (state.distribution && reads_weights_each_batch) state.distribution->weights_to_host();
      for (const auto& callback : callbacks)
        callback->on_train_batch_end(step, logs);
      const double step_end = now_seconds();
      history->record_step(step_end - step_start, examples, input_wait);
      step_start = step_end;
      ++step;
      if (state.stop_training) break;
    }
    if (step == 0) {
      throw InvalidArgument(label(state) + ".fit: the dataset yielded no batch in epoch " +
                            std::to_string(epoch));
    }
    read_steps();
    if (state.distribution) state.distribution->weights_to_host();
    const data::PassReport input = batches->report();
    history->record_input_report(input.skipped, input.advice);
    if (options.validation_data != nullptr) {
      for (const auto& [key, value] : evaluate(*options.validation_data))
        logs["val_" + key] = value;
    }
    for (const auto& callback : callbacks)
      callback->on_epoch_end(epoch, logs);
    if (state.distribution) state.distribution->weights_from_host();
    if (verbose > 0 && input.skipped > 0) {
      std::cout << "Epoch " << epoch + 1 << ": " << input.skipped_summary << "\n";
    }
  }
  for (const auto& callback : callbacks)
    callback->on_train_end(logs);
  if (verbose > 0) warn_if_input_bound(*history);
  return *history;
}

train::History Model::fit(const Tensor& x, const Tensor& y, const train::FitOptions& options) {
  State& state = *state_;
  require_examples(state, "fit", x, y);
  const std::int64_t batch_size = options.batch_size.value_or(32);
  const double validation_split = options.validation_split;
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
  if (options.shuffle) training->shuffle(options.seed);
  train::FitOptions effective = options;
  effective.batch_size.reset();
  effective.validation_split = 0.0;
  if (validation_split > 0.0) {
    validation->batch(batch_size);
    effective.validation_data = validation.get();
  }
  return fit(*training, effective);
}

train::Logs Model::evaluate(const data::Dataset& dataset) {
  State& state = *state_;
  require_compiled(state, "evaluate");
  NoGradGuard no_grad;
  reset_metrics(state);
  train::Mean loss_tracker("loss");
  const std::unique_ptr<data::BatchIterator> batches = dataset.iterate(0);
  while (std::optional<data::Batch> next = batches->next()) {
    const data::Batch batch = on_model_device(state, *next);
    const Tensor y_pred = call(batch.features, /*training=*/false);
    loss_tracker.update_state((*state.loss)(batch.labels, y_pred).item(),
                              static_cast<double>(batch.features.dim(0)));
    for (const auto& metric : state.metrics)
      metric->update_state(batch.labels, y_pred);
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
  const Tensor input =
      state_->distribution ? x.to(state_->distribution->input_device()) : x;  // (N, ...)
  const std::int64_t total = input.dim(0);
  if (total <= batch_size) return call(input, /*training=*/false);
  Tensor predictions;  // (N, ...)
  for (std::int64_t start = 0; start < total; start += batch_size) {
    const std::int64_t count = std::min(batch_size, total - start);
    const Tensor y = call(tandem::detail::rows(input, start, count), /*training=*/false);
    if (!predictions.defined()) {
      Shape shape = y.shape();
      shape[0] = total;
      predictions = Tensor::empty(shape, y.dtype(), y.device());
    }
    tandem::detail::copy_into(tandem::detail::rows(predictions, start, count), y,
                              label(*state_) + ".predict");
  }
  return predictions;
}

train::Logs Model::train_on_batch(const Tensor& x, const Tensor& y) {
  State& state = *state_;
  require_compiled(state, "train_on_batch");
  require_examples(state, "train_on_batch", x, y);
  std::vector<Tensor> variables;
  const auto [y_pred, loss] =
      within_memory(x.dim(0), [&] { return run_train_step(*this, state, x, y, variables); });
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
