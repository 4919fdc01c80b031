// run::Run: a training run from its configuration to its report (tandem/run.h).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <ostream>
#include <sstream>

#include "core/files.h"
#include "core/text.h"
#include "io/file_io.h"
#include "run/checkpoints.h"
#include "run/input.h"
#include "run/process_settings.h"
#include "run/settings_table.h"
#include "tandem/mixed_precision.h"
#include "tandem/nn.h"
#include "tandem/random.h"
#include "tandem/runtime.h"
#include "tandem/xla.h"

namespace tandem::run {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::optional<std::string> precision_warning(const std::string& precision,
                                             const std::vector<Device>& devices,
                                             const SettingName& name) {
  const bool on_cpu = std::any_of(devices.begin(), devices.end(), [](const Device& device) {
    return device.type == DeviceType::cpu;
  });
  if (!on_cpu) return std::nullopt;
  const std::string setting = name("precision");
  if (precision == "fp16") {
    return setting +
           " fp16 on the CPU runs Tandem's float16 reference loops, over 100x slower than bf16 "
           "there (no oneDNN float16 kernels); " +
           (cpu_kernels().bf16
                ? "use " + setting + " bf16 on the CPU"
                : "use " + setting + " fp32 on this CPU (it has no AVX-512 for bf16)");
  }
  if (precision == "bf16" && !cpu_kernels().bf16) {
    return setting +
           " bf16 on this CPU runs Tandem's bfloat16 loops, many times slower than fp32 (oneDNN "
           "has bf16 kernels only with AVX-512, which this CPU lacks: " +
           cpu_backend_description() + "); use " + setting + " fp32 here";
  }
  return std::nullopt;
}

namespace {

// "float32", "mixed_bfloat16", "mixed_float16": the dtype policy a precision names.
std::string policy_name(const std::string& precision) {
  if (precision == "bf16") return "mixed_bfloat16";
  if (precision == "fp16") return "mixed_float16";
  return "float32";
}

double mean_epoch_seconds(const train::History& history) {
  const std::vector<double>& seconds = history.epoch_seconds();
  if (seconds.empty()) return 0.0;
  return std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(seconds.size());
}

double step_seconds(const train::History& history) {
  double total = 0;
  for (const std::vector<double>& epoch : history.step_seconds()) {
    for (const double seconds : epoch)
      total += seconds;
  }
  return total;
}

// What combining gradients cost, when the strategy measured any.
std::optional<CommunicationShares> communication_shares(const distribute::Strategy& strategy,
                                                        const train::History& history) {
  const distribute::CommunicationStats stats = strategy.communication_stats();
  const double total = step_seconds(history);
  if (stats.steps == 0 || total <= 0) return std::nullopt;
  return CommunicationShares{stats.wait_seconds / total, stats.pack_seconds / total,
                             stats.bytes / stats.steps, stats.gradient_buckets,
                             stats.overlapped_buckets};
}

// The learning rate `learning_rate` decaying over `total_steps` under the cosine schedule.
train::LearningRate scheduled_rate(const RunConfig& config, double learning_rate,
                                   std::int64_t total_steps) {
  return config.optimizer.schedule == "cosine"
             ? train::LearningRate(train::CosineDecay(learning_rate, total_steps))
             : train::LearningRate(learning_rate);
}

// Adam at `rate`; the loss on the model's logits (or probabilities); accuracy.
void compile_for_training(io::ModelSource& made, const RunConfig& config,
                          const train::LearningRate& rate) {
  made.model.compile({.optimizer = train::Adam(rate),
                      .loss = train::SparseCategoricalCrossentropy(!made.outputs_probabilities),
                      .metrics = {"accuracy"},
                      .jit_compile = config.jit});
}

// The settings that decide the training, by name as the caller spells them, in canonical text:
// compared across the workers of a multi-worker run before they start.
std::vector<std::pair<std::string, std::string>> agreed_settings(const RunConfig& config,
                                                                 const SettingName& name) {
  std::vector<std::pair<std::string, std::string>> agreed;
  for (const Entry& entry : entries()) {
    if (entry.setting.workers_agree)
      agreed.emplace_back(name(entry.setting.key), entry.write(config));
  }
  return agreed;
}

// The run's settings for TensorBoard's HParams and Text tabs, and a batch of its images.
observe::RunDescription describe_run(const RunConfig& config, const data::ImageData& data,
                                     const data::Dataset& training, const std::string& device) {
  observe::RunDescription run;
  run.hparams = {{"model", config.model},
                 {"epochs", static_cast<double>(config.epochs)},
                 {"batch_size", static_cast<double>(config.batch_size)},
                 {"learning_rate", config.optimizer.learning_rate},
                 {"lr_schedule", config.optimizer.schedule},
                 {"seed", static_cast<double>(config.seed)},
                 {"threads", static_cast<double>(num_threads())},
                 {"validation_split", config.data.validation_split},
                 {"device", device}};
  // The other settings that decide the training (a sweep varies any of them), where set:
  // numbers as numbers, so the HParams tab can plot them.
  for (const auto& [key, text] : agreed_settings(config, setting_identifier)) {
    if (text.empty() || run.hparams.contains(key) || key == "lr" || key == "batch_size" ||
        key == "lr_schedule") {
      continue;
    }
    char* end = nullptr;
    const double number = std::strtod(text.c_str(), &end);
    if (end != text.c_str() && *end == '\0') {
      run.hparams[key] = number;
    } else if (text == "true" || text == "false") {
      run.hparams[key] = text == "true";
    } else {
      run.hparams[key] = text;
    }
  }
  run.device = Device::parse(device);
  run.config_text = "tandem " + std::string(version()) + " train on " + data.description + ", " +
                    std::to_string(training.num_examples()) + " training examples";
  if (!config.logging.logdir.empty()) run.sample_batch = training.iterate(0)->next();
  return run;
}

}  // namespace

struct Run::State {
  RunConfig config;
  RunOutput output;
  Clock::time_point start = Clock::now();
  enum class Phase { fresh, prepared, fitted, evaluated, finished };
  Phase phase = Phase::fresh;

  std::optional<io::CheckpointInfo> resume;
  std::optional<io::detail::DirectoryLock> logdir_lock;
  std::shared_ptr<distribute::Strategy> strategy;
  std::int64_t global_batch = 0;
  double global_learning_rate = 0.0;
  bool chief = true;
  std::ostream* log = nullptr;  // output.log where the run speaks, else nullptr
  std::string device;
  std::unique_ptr<ProcessSettingsScope> settings;
  std::optional<data::ImageData> data;
  std::optional<TrainingInput> input;
  std::optional<distribute::StrategyScope> scope;
  std::optional<io::ModelSource> made;
  train::FitOptions fit_options;
  std::unique_ptr<observe::RunObservers> observers;
  std::unique_ptr<RunCheckpoints> checkpoints;
  std::shared_ptr<pruning::Pruning> pruning;
  train::History history;
  double train_seconds = 0.0;
  std::optional<quantization::QuantizeOutcome> quantized;
  std::optional<train::Logs> results;

  const SettingName& name() const { return output.name; }
  std::ostream* warnings() const { return output.warnings; }
  void warn(const std::string& warning) const {
    if (chief && warnings() != nullptr) *warnings() << "warning: " << warning << "\n";
  }
  // A failure after training: the trained model is saved where asked before the error goes on.
  void rescue_trained_model(const std::string& failure) {
    if (!chief || !made || !checkpoints || !data || rescued) return;
    rescued = true;
    checkpoints->rescue(made->model, data->class_names, warnings(), failure);
  }
  bool rescued = false;

  void prepare();
  void search_max_batch(int equal_shares);
  void fit();
  void evaluate();
  Report finish();
  void print_results(const Report& report) const;
};

void Run::State::prepare() {
  const SettingName& name = this->name();
  validate(config, name);
  // A resumed run defines itself as the run it continues.
  if (!config.checkpoints.resume.empty()) {
    resume = io::read_checkpoint_info(config.checkpoints.resume);
    check_resumable(config, *resume, name);
  }
  // Under a strategy the pipeline yields global batches (per-replica batch x replicas), the
  // learning rate follows lr_scaling, and only the chief worker reports. Workers compare what
  // decides the training as they start.
  distribute::StrategyOptions strategy_options = config.strategy.strategy;
  strategy_options.multi_worker.run_configuration = agreed_settings(config, name);
  // jit off with an XLA strategy: its device, op by op.
  strategy_options.op_by_op = config.jit == false;
  strategy = distribute::make_strategy(strategy_options, name);
  global_batch = strategy->global_batch_size(config.batch_size);
  global_learning_rate =
      strategy->scaled_learning_rate(config.optimizer.learning_rate, config.strategy.lr_scaling);
  chief = strategy->is_chief();
  log = config.verbosity > 0 && chief ? output.log : nullptr;
  if (chief) {
    // The files the run writes at its end, checked before its first step: a bad destination
    // found only after hours of training would lose the results.
    if (!config.checkpoints.save_model.empty()) {
      require_writable_destination(config.checkpoints.save_model, name("save-model"),
                                   Destination::folder);
    }
    if (config.logging.profile && !config.logging.trace_path.empty()) {
      require_writable_destination(config.logging.trace_path, name("trace"), Destination::file);
    }
    // The folders it writes into must be folders (or not there yet).
    require_replaceable(config.checkpoints.directory, Destination::folder, name("checkpoint-dir"));
    require_replaceable(config.logging.logdir, Destination::folder, name("logdir"));
    // The configuration, as a run file that repeats the run. One run a log folder: two would mix
    // their TensorBoard files and run.toml.
    if (!config.logging.logdir.empty()) {
      std::filesystem::create_directories(config.logging.logdir);
      logdir_lock.emplace(config.logging.logdir, ".logdir.lock");
      write_file_atomically(config.logging.logdir + "/run.toml", run_file_text(config));
    }
  }

  settings = std::make_unique<ProcessSettingsScope>();
  set_num_threads(config.threads);
  if (const auto warning = distribute::thread_count_warning(config.threads, name)) warn(*warning);
  manual_seed(config.seed);
  set_deterministic(config.deterministic);
  set_flush_denormals(!config.precision.keep_denormals);
  device = strategy->devices().front().str();
  if (log != nullptr) {
    *log << distribute::strategy_summary(*strategy, config.strategy.strategy, config.batch_size,
                                         name);
  }

  // The dtype policy and the memory cap hold before any model is made.
  const std::string& precision = config.precision.precision;
  mixed_precision::set_global_policy(policy_name(precision));
  if (config.precision.memory_limit > 0) {
    for (const Device& training_device : strategy->devices())
      settings->set_memory_limit(training_device, config.precision.memory_limit);
  }
  if (const auto warning = precision_warning(precision, strategy->devices(), name)) warn(*warning);
  if (log != nullptr) {
    *log << "precision: " << precision << " (" << policy_name(precision) << " dtype policy"
         << (precision == "fp16" ? ", dynamic loss scaling" : "") << ")"
         << (config.precision.keep_denormals ? ", denormals kept on the CPU" : "")
         << (config.precision.memory_limit > 0
                 ? ", memory limit " + format_memory_size(config.precision.memory_limit) +
                       " per device"
                 : "")
         << "\n";
  }
  if (!config.quantization.precision.empty() && strategy->num_replicas_in_sync() > 1) {
    throw ConfigError(name("quantize") +
                      " calibrates and fine-tunes one replica's model; train "
                      "with " +
                      strategy->description() + " and " + name("save-model") +
                      " DIR, then quantise on one device: tandem train --model DIR --epochs 1 "
                      "--quantize int8 --save-model DIR_INT8");
  }
  // XLA's replicas take equal shares of every batch.
  const auto* xla_strategy = dynamic_cast<const distribute::Xla*>(strategy.get());
  const int equal_shares = xla_strategy != nullptr ? strategy->num_replicas_in_sync() : 1;
  data = data::open_image_data(config.data.images, name);
  input = training_input(*data, config, global_batch, equal_shares, name);
  const std::string& best = config.checkpoints.keep_best;
  if (best.starts_with("val_") && !input->validation) {
    throw ConfigError(name("keep-best") + " " + best + " needs validation data, and " +
                      data->description + " has no validation split; add " +
                      name("validation-split") + " F (e.g. 0.1) or " + name("validation-data") +
                      " SPEC, or keep the best by " + best.substr(4));
  }
  if (config.precision.find_max_batch) search_max_batch(equal_shares);
  const data::Pipeline& training = input->training;
  if (log != nullptr) {
    *log << "data: " << data->description << ": " << training.num_examples() << " training"
         << (input->validation
                 ? ", " + std::to_string(input->validation->num_examples()) + " validation"
                 : "")
         << ", "
         << (input->test ? std::to_string(input->test->num_examples()) + " test" : "no test")
         << " images " << shape_str(data->image_shape)
         << (config.data.augment.empty() ? "" : ", augmented: " + join(config.data.augment, ", "))
         << "\n";
    if (input->dropped > 0) {
      *log << "data: the last " << plural(input->dropped, "training example")
           << " of each epoch are left out: that partial batch does not split over " << equal_shares
           << " XLA replicas\n";
    }
  }
  if (config.verbosity == 2 && log != nullptr) {
    *log << "input pipeline: " << training.describe() << "\n";
  }

  scope.emplace(strategy->scope());
  // Layer names as a fresh process gives them, whatever was made before (a program's models, the
  // batch-size search's trials): a checkpoint of this run fits the model of the run resuming it.
  nn::clear_session();
  made = io::load_model_source(config.model, data->image_shape, data->num_classes, name);
  nn::Model& model = made->model;
  const std::int64_t total_steps = training.num_batches() * config.epochs;
  compile_for_training(*made, config, scheduled_rate(config, global_learning_rate, total_steps));
  if (config.verbosity == 2 && log != nullptr) model.summary(*log);
  if (log != nullptr) {
    *log << "training " << made->description << " (" << model.count_params() << " weights) for "
         << plural(config.epochs, "epoch") << ", batch size " << config.batch_size << ", Adam lr "
         << global_learning_rate
         << (config.optimizer.schedule == "cosine" ? " with cosine decay" : "") << ", seed "
         << config.seed << (config.deterministic ? ", deterministic" : "")
         << (xla_strategy != nullptr ? ", the whole step compiled by XLA"
             : model.jit_compiled()  ? ", compiled step"
                                     : ", eager step")
         << "\n";
  }

  fit_options.validation_data = input->validation ? &*input->validation : nullptr;
  fit_options.verbose = log != nullptr ? 1 : 0;
  observers = std::make_unique<observe::RunObservers>(
      config.logging, describe_run(config, *data, training, device), name);
  for (const auto& callback : observers->callbacks())
    fit_options.callbacks.push_back(callback);
  checkpoints = std::make_unique<RunCheckpoints>(
      config, checkpoint_record(config, strategy->num_replicas_in_sync()), resume, name);
  if (resume) check_replicas(*resume, strategy->num_replicas_in_sync(), name);
  checkpoints->prepare(model, training, fit_options, log);
  for (const auto& callback : checkpoints->callbacks())
    fit_options.callbacks.push_back(callback);
  // The other workers hold the same weights: the chief alone logs, saves and evaluates.
  if (!chief) fit_options.callbacks.clear();
  // A diverged run stops with an error, before any checkpoint or log of its broken weights.
  fit_options.callbacks.insert(fit_options.callbacks.begin(),
                               std::make_shared<train::TerminateOnNaN>());
  // Pruning on every worker (each masks its own copy of the same weights), first of the
  // callbacks so that checkpoints and logs see the masked weights.
  pruning = pruning::make_pruning(config.pruning, model, total_steps);
  if (pruning) {
    fit_options.callbacks.insert(fit_options.callbacks.begin(), pruning);
    if (resume) {
      pruning->resume_at(fit_options.initial_epoch * training.num_batches() +
                         fit_options.initial_step);
    }
    if (!config.logging.logdir.empty() && chief) {
      fit_options.callbacks.push_back(
          std::make_shared<observe::PruningSummaries>(pruning, config.logging.logdir));
    }
    if (log != nullptr) {
      *log << "pruning: " << config.pruning.pattern << " magnitude pruning of "
           << pruning->weights().size() << " kernels to sparsity "
           << shortest(config.pruning.sparsity)
           << (config.pruning.pattern == "2:4" ? ""
                                               : " (" + config.pruning.schedule + " schedule)");
      for (const std::string& skipped : pruning->skipped())
        *log << "; left alone: " << skipped;
      *log << "\n";
    }
  }
  // The caller's callbacks after the run's: they see what the run's own did at each step. Then
  // the progress bar, on the run's log (fit's own would draw on std::cout), last as fit puts its
  // own, so that it shows what the others left in the logs.
  for (const auto& callback : output.callbacks)
    fit_options.callbacks.push_back(callback);
  if (log != nullptr) {
    // On std::cout it is fit's own bar: redrawn in place on a terminal.
    fit_options.callbacks.push_back(
        std::make_shared<train::ProgressBar>(1, log == &std::cout ? nullptr : log));
  }
}

// find_max_batch: the largest per-replica batch the strategy's devices train, from batch_size up.
void Run::State::search_max_batch(int equal_shares) {
  if (strategy->num_workers() > 1) {
    throw ConfigError(name()("find-max-batch") + " searches within one process; run it without " +
                      name()("strategy") + " multi-worker, then pass the batch size it finds");
  }
  if (log != nullptr) {
    *log << "searching the largest batch size that fits (" << config.model << ", "
         << config.precision.precision << "):\n";
  }
  const distribute::StrategyScope trial_scope = strategy->scope();
  train::MaxBatchSearch search;
  search.first = config.batch_size;
  search.examples = input->training.num_examples();
  search.replicas = strategy->num_replicas_in_sync();
  search.epochs = static_cast<int>(config.epochs);
  search.input = [&](std::int64_t batch, std::int64_t first_examples) {
    if (first_examples == 0) return training_input(*data, config, batch, 1, name()).training;
    data::ImageData first = *data;
    first.training = data->training.take(first_examples);
    RunConfig whole = config;
    whole.data.validation_split = 0.0;
    return training_input(first, whole, batch, 1, name()).training;
  };
  search.model = [&](std::int64_t steps) {
    io::ModelSource trial =
        io::load_model_source(config.model, data->image_shape, data->num_classes, name());
    compile_for_training(trial, config,
                         scheduled_rate(config, config.optimizer.learning_rate, steps));
    return std::move(trial.model);
  };
  search.devices = strategy->devices();
  search.memory_limit = config.precision.memory_limit;
  config.batch_size = train::search_max_batch(search, log);
  if (log != nullptr) {
    *log << "largest batch size that fits: " << config.batch_size
         << (search.replicas > 1 ? " per replica" : "") << "; training with it\n";
  }
  global_batch = strategy->global_batch_size(config.batch_size);
  manual_seed(config.seed);  // the trials drew initial weights
  input = training_input(*data, config, global_batch, equal_shares, name());
}

void Run::State::fit() {
  const auto train_start = Clock::now();
  fit_options.epochs = static_cast<int>(config.epochs);
  history = made->model.fit(input->training, fit_options);
  train_seconds = seconds_since(train_start);
}

void Run::State::evaluate() {
  if (!chief) return;
  nn::Model& model = made->model;
  const std::vector<std::shared_ptr<train::Callback>> qat_callbacks =
      pruning ? std::vector<std::shared_ptr<train::Callback>>{pruning}
              : std::vector<std::shared_ptr<train::Callback>>{};
  quantized = quantization::quantize_trained_model(
      config.quantization, model, input->training, input->test ? &*input->test : nullptr,
      global_learning_rate,
      [&](double rate) { compile_for_training(*made, config, train::LearningRate(rate)); },
      qat_callbacks, log);
  // No test set (an image folder without test/, TFRecords without test data): no test figures.
  if (input->test) {
    results = model.evaluate(*input->test);
    observers->log_test_results(*results);
  }
}

void Run::State::print_results(const Report& report) const {
  std::ostream* out = output.out;
  if (out == nullptr) return;
  if (report.test_accuracy) {
    *out << "test accuracy: " << fixed(*report.test_accuracy, 4) << "\n"
         << "test loss: " << fixed(*report.test_loss, 4) << "\n";
  } else {
    if (report.history.contains("val_accuracy")) {
      *out << "validation accuracy: " << fixed(report.history.at("val_accuracy").back(), 4) << "\n"
           << "validation loss: " << fixed(report.history.at("val_loss").back(), 4) << "\n";
    }
    *out << "test: none (" << data->description << " has no test split; pass "
         << name()("test-data") << " SPEC for test figures)\n";
  }
  *out << "throughput: "
       << (report.samples_per_sec > 0.0
               ? fixed(report.samples_per_sec, 1) + " samples/s (training, after " +
                     plural(report.warmup_steps, "warm-up step") + ")"
               : "not measured: no training step followed the " +
                     plural(report.warmup_steps, "warm-up step") + "; train longer")
       << "\n"
       << "input: " << fixed(100.0 * report.input_wait_share, 1)
       << "% of the step time waiting for batches\n"
       << "time: " << fixed(report.train_seconds, 1) << " s training, "
       << fixed(seconds_since(start), 1) << " s in all\n";
  if (const std::optional<CommunicationShares>& shares = report.communication) {
    const distribute::CommunicationStats stats = strategy->communication_stats();
    *out << "all-reduce: " << fixed(100.0 * shares->wait_share, 1)
         << "% of the step time waiting for the other workers, "
         << fixed(100.0 * shares->pack_share, 1) << "% packing ("
         << fixed(static_cast<double>(stats.collectives) / static_cast<double>(stats.steps), 1)
         << " collectives, " << format_memory_size(static_cast<std::size_t>(shares->bytes_per_step))
         << " per step; " << shares->overlapped_buckets << " of " << shares->gradient_buckets
         << " gradient buckets started during the backward pass)\n";
  }
  if (const auto* xla_strategy = dynamic_cast<const distribute::Xla*>(strategy.get())) {
    const distribute::Xla::CompileStats compiled = xla_strategy->compile_stats();
    *out << "xla: " << plural(compiled.programs, "program") << " compiled in "
         << fixed(compiled.seconds, 2) << " s (one per batch shape); first step "
         << fixed(compiled.first_step_seconds, 2) << " s\n";
  } else if (strategy->devices().front().type == DeviceType::xla) {
    const xla::EagerStats eager = xla::eager_stats();
    *out << "xla: " << eager.ops_run << " ops run one by one, from "
         << plural(static_cast<std::int64_t>(eager.compiled), "executable")
         << " compiled once each\n";
  }
}

Report Run::State::finish() {
  Report report;
  report.config = config;
  report.chief = chief;
  if (!chief) {
    settings->restore();
    return report;
  }
  nn::Model& model = made->model;
  report.model_description = made->description;
  report.weights = model.count_params();
  report.device = device;
  report.strategy = strategy->description();
  report.replicas = strategy->num_replicas_in_sync();
  report.global_batch_size = global_batch;
  report.learning_rate = global_learning_rate;
  report.threads = num_threads();
  report.jit = model.jit_compiled();
  report.data = data->description;
  report.num_classes = data->num_classes;
  if (results) {
    report.test_accuracy = results->at("accuracy");
    report.test_loss = results->at("loss");
  }
  report.history = checkpoints->run_history(history);
  report.samples_per_sec = history.samples_per_sec();
  report.warmup_steps = history.warmup_steps();
  report.input_wait_share = history.input_wait_share();
  report.epoch_seconds = mean_epoch_seconds(history);
  report.train_seconds = train_seconds;
  report.communication = communication_shares(*strategy, history);
  print_results(report);

  std::ostream* out = output.out;
  std::ostringstream discarded;
  observers->finish(out != nullptr ? *out : discarded);
  if (config.logging.profile && out != nullptr) {
    // The compiled step's summary and memory plan; its nodes go to a file beside the trace
    // (hundreds of lines).
    const std::string listing = model.compiled_step_listing();
    const std::string trace_path = observers->trace_path();
    if (!listing.empty()) {
      *out << listing.substr(0, listing.find('\n') + 1);
      const std::size_t plan = listing.rfind("memory plan:");
      if (plan != std::string::npos) *out << listing.substr(plan);
      if (!trace_path.empty()) {
        const std::string path =
            (trace_path.ends_with(".json") ? trace_path.substr(0, trace_path.size() - 5)
                                           : trace_path) +
            "-step.txt";
        try {
          write_file_atomically(path, listing);
          *out << "compiled step nodes: " << path << "\n";
        } catch (const IoError& error) {
          if (warnings() != nullptr) {
            *warnings() << "tandem: warning: " << error.what() << " (the compiled step's nodes)\n";
          }
        }
      }
    }
  }
  if (pruning) {
    pruning::strip_pruning(*pruning);
    PruningResult pruned{config.pruning.sparsity, config.pruning.pattern, pruning->sparsity(), {}};
    for (const pruning::PrunedWeight& weight : pruning->weights())
      pruned.layers[weight.layer] = pruning->sparsity(weight.layer);
    if (out != nullptr) {
      *out << "pruning: " << fixed(100.0 * pruned.sparsity, 1)
           << "% of the pruned kernels are zero:";
      for (const pruning::PrunedWeight& weight : pruning->weights()) {
        *out << " " << weight.layer << " " << fixed(100.0 * pruned.layers.at(weight.layer), 1)
             << "%";
      }
      *out << "\n";
    }
    report.pruning = std::move(pruned);
  }
  if (quantized) {
    report.quantization = QuantizationResult{config.quantization, quantized->fp32_test_accuracy,
                                             quantized->quantization->inputs()};
  }
  report.saved = checkpoints->finish(model, data->class_names, out, warnings());
  report.saved_model = report.saved ? config.checkpoints.save_model : "";
  report.wall_seconds = seconds_since(start);
  scope.reset();
  settings->restore();
  return report;
}

Run::Run(RunConfig config, RunOutput output) : state_(std::make_unique<State>()) {
  state_->config = std::move(config);
  state_->output = std::move(output);
}

Run::~Run() = default;

void Run::prepare() {
  if (state_->phase != State::Phase::fresh) return;
  state_->prepare();
  state_->phase = State::Phase::prepared;
}

const train::History& Run::fit() {
  prepare();
  if (state_->phase == State::Phase::prepared) {
    state_->fit();
    state_->phase = State::Phase::fitted;
  }
  return state_->history;
}

void Run::evaluate() {
  fit();
  if (state_->phase != State::Phase::fitted) return;
  try {
    state_->evaluate();
  } catch (const std::exception& error) {
    state_->rescue_trained_model(error.what());
    throw;
  }
  state_->phase = State::Phase::evaluated;
}

Report Run::finish() {
  evaluate();
  if (state_->phase == State::Phase::finished) {
    throw InvalidArgument("run::Run::finish: the run has finished already; make a new Run");
  }
  state_->phase = State::Phase::finished;
  try {
    return state_->finish();
  } catch (const std::exception& error) {
    state_->rescue_trained_model(error.what());
    throw;
  }
}

Report Run::run() {
  return finish();
}

const RunConfig& Run::config() const {
  return state_->config;
}

nn::Model& Run::model() {
  if (!state_->made) throw InvalidArgument("run::Run::model: prepare() the run first");
  return state_->made->model;
}

const distribute::Strategy& Run::strategy() const {
  if (!state_->strategy) throw InvalidArgument("run::Run::strategy: prepare() the run first");
  return *state_->strategy;
}

}  // namespace tandem::run
