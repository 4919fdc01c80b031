// `tandem train`: a zoo model, Adam, Fashion-MNIST; prints the test accuracy, the test loss and
// the steady-state training throughput, and optionally writes them to a JSON report.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/checkpointing.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/observe_options.h"
#include "cli/precision_options.h"
#include "cli/prune_options.h"
#include "cli/quantize_options.h"
#include "cli/run_file.h"
#include "cli/strategy_options.h"
#include "cli/train_data.h"
#include "core/files.h"
#include "tandem/data.h"
#include "tandem/io.h"
#include "tandem/mixed_precision.h"
#include "tandem/nn.h"
#include "tandem/observe.h"
#include "tandem/pipeline.h"
#include "tandem/random.h"
#include "tandem/runtime.h"
#include "tandem/train.h"
#include "tandem/xla.h"

namespace tandem::cli {
namespace {

// Defaults of the main job (`make run`); the aim is >= 91% test accuracy for the CNN within 10
// minutes on 2 cores.
constexpr const char* kDefaultModel = "cnn";
constexpr std::int64_t kDefaultEpochs = 10;
constexpr std::int64_t kDefaultBatchSize = 32;
constexpr double kDefaultLearningRate = 1e-3;
// Adam at a constant rate keeps bouncing around its minimum (measured: 90.5-91.0% test accuracy
// over epochs 6-10); decaying the rate to zero along a cosine over the run settles it.
constexpr const char* kDefaultSchedule = "cosine";
constexpr std::uint64_t kDefaultSeed = 42;
// Evaluation only runs forward passes; larger batches are faster and change no result.
constexpr std::int64_t kEvaluationBatchSize = 256;
// Decoded training images up to this size stay in memory after the first epoch (JPEG and PNG
// decoding would otherwise be paid every epoch); larger sets are decoded again each epoch and
// shuffled through a buffer of kShuffleBufferBytes.
constexpr std::int64_t kCacheBytes = std::int64_t{2} << 30;
constexpr std::int64_t kShuffleBufferBytes = std::int64_t{256} << 20;

struct TrainOptions {
  std::string model = kDefaultModel;
  std::int64_t epochs = kDefaultEpochs;
  std::int64_t batch_size = kDefaultBatchSize;
  double learning_rate = kDefaultLearningRate;
  std::string schedule = kDefaultSchedule;
  int threads = 0;  // 0: every core
  std::uint64_t seed = kDefaultSeed;
  std::string data_dir = data::kFashionMnistDefaultDir;
  double validation_split = 0.0;
  double data_fraction = 1.0;  // of the training examples each epoch trains on
  std::string report_path;
  int verbosity = 1;        // 0 quiet, 1 progress bar, 2 also the model summary and data details
  std::optional<bool> jit;  // unset: train::default_jit_compile(device)
  ObserveOptions observe;
  CheckpointingOptions checkpointing;
  StrategyOptions strategy;
  PrecisionOptions precision;
  TrainDataOptions data;
  PruneOptions prune;
  QuantizeOptions quantize;
};

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (const std::string& item : items)
    text += (text.empty() ? "" : separator) + item;
  return text;
}

// Every option of `tandem train`: its own, then the groups' (in the help's order). --model offers
// the zoo's image models: the run trains on images.
const OptionTable<TrainOptions>& train_options() {
  using O = TrainOptions;
  static const OptionTable<O> table = [] {
    OptionTable<O> options({
        {"--model", "NAME|FILE",
         "zoo model: " + join(nn::zoo::image_model_names(), ", ") +
             " (default cnn); or a Keras model as TensorFlow writes it (model.to_json() or a "
             "config.json, from fresh weights; a .keras file, from its weights); or a folder "
             "`--save-model` wrote (its weights too: training goes on from them)",
         [](O& options, const std::string& option, const std::string& text) {
           const std::vector<std::string> zoo = nn::zoo::image_model_names();
           if (std::find(zoo.begin(), zoo.end(), text) == zoo.end() &&
               !std::filesystem::exists(text)) {
             throw UsageError("unknown model '" + text + "' for " + option + "; choose " +
                              join(zoo, ", ") +
                              ", or pass a Keras model file (.json, .keras) or a saved model "
                              "folder that exists");
           }
           options.model = text;
         }},
        {"--epochs", "N",
         "passes over the training set (default " + std::to_string(kDefaultEpochs) + ")",
         [](O& options, const std::string& option, const std::string& text) {
           options.epochs = parse_positive_integer(option, text);
           if (options.epochs > std::numeric_limits<int>::max()) {
             throw UsageError(option + " " + text + " is too many; pass at most " +
                              std::to_string(std::numeric_limits<int>::max()));
           }
         }},
        {"--batch-size", "N",
         "examples per training step (default " + std::to_string(kDefaultBatchSize) + ")",
         into(&O::batch_size, parse_positive_integer)},
        {"--lr", "RATE", "Adam learning rate (default 0.001)",
         into(&O::learning_rate, parse_positive_number)},
        {"--lr-schedule", "NAME",
         "constant, or cosine: decay the rate to 0 along a cosine over the run (default cosine)",
         into(&O::schedule, one_of({"constant", "cosine"}, "schedule"))},
        {"--threads", "N", "CPU threads for the kernels (default: every core)",
         [](O& options, const std::string& option, const std::string& text) {
           const std::int64_t threads = parse_positive_integer(option, text);
           if (threads > 4096) {
             throw UsageError(option + " must be at most 4096, got '" + text + "'");
           }
           options.threads = static_cast<int>(threads);
         }},
        {"--seed", "N",
         "seeds the initial weights and the shuffle order (default " +
             std::to_string(kDefaultSeed) + ")",
         into(&O::seed, parse_unsigned_integer)},
        {"--data-dir", "DIR",
         std::string("directory with the four Fashion-MNIST IDX files, gzipped or not "
                     "(default ") +
             data::kFashionMnistDefaultDir +
             ", from the Debian package dataset-fashion-mnist); other data: --data",
         // Checked as it is read, so that a run file names the line of a folder that is not there.
         [](O& options, const std::string& option, const std::string& text) {
           options.data_dir = parse_directory(option, text);
           if (!std::filesystem::is_directory(text)) {
             throw UsageError(option + " " + text +
                              ": no such folder; it should hold Fashion-MNIST's IDX files: "
                              "install the Debian package dataset-fashion-mnist "
                              "(scripts/install-deps.sh does) and leave --data-dir out, or pass "
                              "the folder that has them (--data SPEC for other data)");
           }
         }},
        {"--validation-split", "F",
         "hold out the last fraction F of the training set (of an image folder: a random one, "
         "seeded) and report val_ metrics each epoch (default 0)",
         into(&O::validation_split, parse_fraction)},
        {"--data-fraction", "F",
         "train on the first fraction F of the training examples (after any validation split): "
         "a cheaper run for pre-screening, as `tandem sweep`'s successive halving does (default "
         "1)",
         [](O& options, const std::string& option, const std::string& text) {
           // (0, 1]: all of the data is the default.
           options.data_fraction = text == "1" ? 1.0 : parse_fraction(option, text);
           if (options.data_fraction == 0.0) {
             throw UsageError(option + " 0 leaves nothing to train on; pass a fraction above 0");
           }
         }},
        {"--report", "FILE",
         "also write the results (settings, test accuracy and loss, samples/s, times) as JSON",
         into(&O::report_path, parse_output_path)},
        {"--config", "FILE",
         "read options from a TOML run file, keyed by these long options without '--' "
         "(batch-size = 64, lr-schedule = \"cosine\", deterministic = true), at the top or "
         "in [tables] that group them; options given here override the file's",
         [](O&, const std::string&, const std::string&) {}},
        {"--jit", "on|off",
         "run the training step compiled (traced once, then one planned graph a step) or "
         "eagerly, op by op; the results are the same bit for bit, compiled faster and in 0.65x "
         "the memory (default: on for the CPU and GPUs, where the compiled step is replayed as "
         "one CUDA graph; TANDEM_CUDA_GRAPHS=0 runs its nodes one by one); with the XLA "
         "strategies (xla-cpu, xla-gpu, tpu) the step is compiled by XLA unless --jit off, which "
         "runs each op on the XLA device alone",
         [](O& options, const std::string& option, const std::string& text) {
           options.jit = one_of({"on", "off"}, "jit")(option, text) == "on";
         }},
        {"--quiet", "", "no progress bar, only the results",
         [](O& options, const std::string&, const std::string&) { options.verbosity = 0; }},
        {"--verbose", "", "also print the model summary and the data details",
         [](O& options, const std::string&, const std::string&) { options.verbosity = 2; }},
    });
    options
        .check([](O& options, const ParsedArgs& args) {
          if (args.has("--quiet") && args.has("--verbose")) {
            throw UsageError("--quiet and --verbose contradict each other; pass one of them");
          }
          if (args.has("--data") && args.has("--data-dir")) {
            throw UsageError(
                "--data and --data-dir both name the training data; pass one (--data DIR reads "
                "a Fashion-MNIST folder too)");
          }
          if (args.has("--validation-data") && options.validation_split > 0.0) {
            throw UsageError(
                "--validation-data and --validation-split both say what to validate on; pass "
                "one of them");
          }
          const std::string& best = options.checkpointing.keep_best;
          if (best.starts_with("val_") && options.validation_split == 0.0 &&
              options.data.validation_data.empty() && options.data.data.empty()) {
            throw UsageError("--keep-best " + best +
                             " needs validation data, and this run has none; add "
                             "--validation-split F (e.g. 0.1), or keep the best by " +
                             best.substr(4));
          }
        })
        .add(observe_options(), &O::observe)
        .add(checkpointing_options(), &O::checkpointing)
        .add(strategy_options(), &O::strategy)
        .add(precision_options(), &O::precision)
        .add(train_data_options(), &O::data)
        .add(prune_options(), &O::prune)
        .add(quantize_options(), &O::quantize);
    return options;
  }();
  return table;
}

// With --profile, the compiled step's summary and memory plan; its nodes go to a file beside
// the trace (hundreds of lines).
void print_compiled_step(const nn::Model& model, const std::string& trace_path, std::ostream& out) {
  const std::string listing = model.compiled_step_listing();
  if (listing.empty()) return;
  out << listing.substr(0, listing.find('\n') + 1);
  const std::size_t plan = listing.rfind("memory plan:");
  if (plan != std::string::npos) out << listing.substr(plan);
  if (trace_path.empty()) return;
  const std::string path =
      (trace_path.ends_with(".json") ? trace_path.substr(0, trace_path.size() - 5) : trace_path) +
      "-step.txt";
  try {
    write_file_atomically(path, listing);
    out << "compiled step nodes: " << path << "\n";
  } catch (const IoError& error) {
    std::cerr << "tandem: warning: " << error.what() << " (the compiled step's nodes)\n";
  }
}

// What decides the training, option by option in canonical text: compared across the workers
// of a multi-worker run before they start. A new option of `tandem train` goes here or into
// per_worker_options() (a test checks that every option is in one of them).
std::vector<std::pair<std::string, std::string>> training_configuration(
    const TrainOptions& options) {
  const distribute::MultiWorkerOptions& workers = options.strategy.multi_worker;
  return {
      {"--model", options.model},
      {"--epochs", std::to_string(options.epochs)},
      {"--batch-size", std::to_string(options.batch_size)},
      {"--lr", shortest(options.learning_rate)},
      {"--lr-schedule", options.schedule},
      {"--seed", std::to_string(options.seed)},
      {"--validation-split", shortest(options.validation_split)},
      {"--data-fraction", shortest(options.data_fraction)},
      {"--deterministic", options.checkpointing.deterministic ? "true" : "false"},
      {"--precision", options.precision.precision},
      {"--find-max-batch", options.precision.find_max_batch ? "true" : "false"},
      {"--keep-denormals", options.precision.keep_denormals ? "true" : "false"},
      {"--jit", !options.jit   ? "default"
                : *options.jit ? "on"
                               : "off"},
      {"--strategy", options.strategy.name},
      {"--replicas",
       options.strategy.replicas == 0 ? "default" : std::to_string(options.strategy.replicas)},
      {"--lr-scaling",
       options.strategy.lr_scaling == distribute::LearningRateScaling::linear ? "linear" : "none"},
      {"--bucket-kib",
       workers.bucket_bytes == 0 ? "default" : std::to_string(workers.bucket_bytes / 1024)},
      {"--image-feature", options.data.image_feature},
      {"--label-feature", options.data.label_feature},
      {"--image-size", options.data.image_height == 0
                           ? ""
                           : std::to_string(options.data.image_height) + "x" +
                                 std::to_string(options.data.image_width)},
      {"--channels", options.data.channels == 0 ? "" : std::to_string(options.data.channels)},
      {"--augment", join(options.data.augment, ",")},
      {"--num-classes",
       options.data.num_classes == 0 ? "" : std::to_string(options.data.num_classes)},
      {"--prune", options.prune.sparsity == 0.0 ? "" : shortest(options.prune.sparsity)},
      // Without pruning its shaping options say nothing (and a resumed run is not given them).
      {"--prune-schedule", options.prune.sparsity == 0.0 ? "" : options.prune.schedule},
      {"--prune-pattern", options.prune.sparsity == 0.0 ? "" : options.prune.pattern},
      {"--prune-layers", join(options.prune.layers, ",")},
      {"--quantize", options.quantize.precision},
      // As pruning's: without --quantize these say nothing.
      {"--calibrator", options.quantize.precision.empty() ? "" : options.quantize.calibrator},
      {"--calibration-examples", options.quantize.precision.empty()
                                     ? ""
                                     : std::to_string(options.quantize.calibration_examples)},
      {"--qat-epochs",
       options.quantize.precision.empty() ? "" : std::to_string(options.quantize.qat_epochs)},
      {"--quantize-layers", join(options.quantize.layers, ",")},
  };
}

}  // namespace

// Options that may differ from one worker to another: where each writes, what it prints, the
// resources of its machine, its patience. --data-dir too: the paths may differ between
// machines, and the data itself is compared (a digest of the first batch) when training starts.
const std::vector<std::string>& per_worker_options() {
  static const std::vector<std::string> names{
      "--threads", "--data-dir", "--data", "--validation-data", "--test-data", "--report",
      // its options are compared, not its path
      "--config", "--quiet", "--verbose", "--logdir", "--log-every", "--histogram-freq",
      "--monitor-interval", "--profile", "--profile-steps", "--trace", "--log-device-placement",
      "--checkpoint-dir", "--checkpoint-every", "--keep-checkpoints", "--keep-best", "--resume",
      "--save-model", "--join-timeout", "--collective-timeout", "--memory-limit", "--pjrt-plugin"};
  return names;
}

void check_train_option(const std::string& option, const std::string& text) {
  train_options().read_one(option, text);
}

std::vector<std::string> training_configuration_options() {
  std::vector<std::string> names;
  for (const auto& [name, value] : training_configuration(TrainOptions{}))
    names.push_back(name);
  return names;
}

namespace {

// What a checkpoint records of the run, keyed by option, in canonical text: what decides the
// training, and the options a resumed run carries over.
io::RunConfig run_config(const TrainOptions& options) {
  io::RunConfig config;
  for (auto& [name, value] : training_configuration(options))
    config.emplace(std::move(name), std::move(value));
  config.emplace("--data-dir", options.data_dir);
  config.emplace("--data", options.data.data);
  config.emplace("--validation-data", options.data.validation_data);
  config.emplace("--test-data", options.data.test_data);
  config.emplace("--checkpoint-every", options.checkpointing.every_steps > 0
                                           ? std::to_string(options.checkpointing.every_steps)
                                           : "");
  config.emplace("--keep-checkpoints", std::to_string(options.checkpointing.keep));
  config.emplace("--keep-best", options.checkpointing.keep_best);
  return config;
}

// The files the run writes at its end, checked before its first step: a bad destination found
// only after hours of training would lose the results.
void check_destinations(const TrainOptions& options) {
  if (!options.report_path.empty()) {
    require_writable_destination(options.report_path, "--report", Destination::file);
  }
  if (!options.checkpointing.save_model.empty()) {
    require_writable_destination(options.checkpointing.save_model, "--save-model",
                                 Destination::folder);
  }
  if (options.observe.profile && !options.observe.trace_path.empty()) {
    require_writable_destination(options.observe.trace_path, "--trace", Destination::file);
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double mean_epoch_seconds(const train::History& history) {
  const std::vector<double>& seconds = history.epoch_seconds();
  if (seconds.empty()) return 0.0;
  return std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(seconds.size());
}

// The run's input pipelines from its data sets (Fashion-MNIST's IDX files for the main job).
// Training: the examples shuffled every epoch through a buffer as large as the split (a full
// shuffle; decoded JPEG/PNG images kept in memory after the first epoch when they fit, else a
// bounded buffer), augmented, and batched ahead on a prefetch thread (depth autotuned) while the
// model trains; each batch is scaled to [0, 1] floats as the model takes it, so the buffers hold
// compact u8 pixels (a quarter of the memory; the scaling costs microseconds a batch).
// Validation (a data set of its own, or the last fraction of the training set as Keras'
// validation_split) and test: the same without shuffle or augmentation, in order.
struct TrainingInput {
  data::Pipeline training;
  std::optional<data::Pipeline> validation;
  std::optional<data::Pipeline> test;
  std::int64_t dropped = 0;  // training examples left out of each epoch (see training_input)
};

data::Pipeline scaled_batches(const data::Pipeline& examples, std::int64_t batch_size,
                              bool drop_remainder = false) {
  return examples.batch(batch_size, drop_remainder)
      .prefetch(data::kAutotune)
      .map(data::cast(DType::f32, 1.0 / 255.0), {.name = "scale"});
}

// `equal_shares`: the replicas each global batch must split into equally (XLA's replicas run one
// program of one static shape); a last partial batch that does not is dropped.
TrainingInput training_input(const TrainingData& data_sets, const TrainOptions& options,
                             int equal_shares = 1) {
  const std::int64_t total = data_sets.training.cardinality();
  const auto kept = static_cast<std::int64_t>(
      std::floor(static_cast<double>(total) * (1.0 - options.validation_split)));
  if (options.validation_split > 0.0 && kept == total) {
    throw UsageError("--validation-split " + shortest(options.validation_split) +
                     " holds out no example of " + std::to_string(total) +
                     "; pass a larger fraction or 0");
  }
  if (kept == 0) {
    throw UsageError("--validation-split " + shortest(options.validation_split) +
                     " holds out all " + std::to_string(total) +
                     " training examples and leaves none to train on; pass a smaller fraction, "
                     "e.g. 0.1");
  }
  // Examples in class order (an image folder) are split at random, with the run's seed.
  const std::int64_t trained = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::floor(static_cast<double>(kept) * options.data_fraction)));
  const data::Pipeline all =
      data_sets.ordered_by_class && trained < total
          ? data_sets.training.shuffle(total, options.seed, /*reshuffle_each_iteration=*/false)
          : data_sets.training;
  data::Pipeline examples = all.take(trained);
  const std::int64_t image_bytes = shape_numel(data_sets.image_shape);
  std::int64_t shuffle_buffer = trained;
  if (data_sets.decodes) {
    if (trained * image_bytes <= kCacheBytes) {
      examples = examples.cache();
    } else {
      shuffle_buffer =
          std::min(trained, std::max<std::int64_t>(1024, kShuffleBufferBytes / image_bytes));
    }
  }
  examples = augmented(examples.shuffle(shuffle_buffer, options.seed), options.data,
                       data_sets.image_shape, options.seed);
  const std::int64_t remainder = trained % options.batch_size;
  const bool drop_remainder = remainder % equal_shares != 0;
  TrainingInput input{scaled_batches(examples, options.batch_size, drop_remainder), std::nullopt,
                      std::nullopt, drop_remainder ? remainder : 0};
  if (data_sets.validation) {
    input.validation = scaled_batches(*data_sets.validation, kEvaluationBatchSize);
  } else if (kept < total) {
    input.validation = scaled_batches(all.skip(kept), kEvaluationBatchSize);
  }
  if (data_sets.test) input.test = scaled_batches(*data_sets.test, kEvaluationBatchSize);
  return input;
}

// The run's settings for TensorBoard's HParams and Text tabs, and a batch of its images.
RunDescription describe_run(const TrainOptions& options, const TrainingData& data_sets,
                            const data::Dataset& training, const std::string& device) {
  RunDescription run;
  run.hparams = {{"model", options.model},
                 {"epochs", static_cast<double>(options.epochs)},
                 {"batch_size", static_cast<double>(options.batch_size)},
                 {"learning_rate", options.learning_rate},
                 {"lr_schedule", options.schedule},
                 {"seed", static_cast<double>(options.seed)},
                 {"threads", static_cast<double>(num_threads())},
                 {"validation_split", options.validation_split},
                 {"device", device}};
  // The other options that decide the training (a sweep varies any of them), where set: numbers
  // as numbers, so the HParams tab can plot them.
  for (const auto& [name, text] : training_configuration(options)) {
    const std::string key = [&] {
      std::string underscored = name.substr(2);
      std::replace(underscored.begin(), underscored.end(), '-', '_');
      return underscored;
    }();
    if (text.empty() || text == "default" || run.hparams.contains(key) || name == "--lr" ||
        name == "--batch-size" || name == "--lr-schedule") {
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
  run.config_text = "tandem " + std::string(version()) + " train on " + data_sets.description +
                    ", " + std::to_string(training.num_examples()) + " training examples";
  if (!options.observe.logdir.empty()) run.sample_batch = training.iterate(0)->next();
  return run;
}

nlohmann::ordered_json or_null(const std::optional<double>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

void write_report(const std::string& path, const nlohmann::ordered_json& report) {
  write_file_atomically(path, json_text(report) + "\n");
}

// The model to train: a zoo model, a Keras description, or a saved model (with its weights), for
// the data's images and classes.
struct TrainedModel {
  nn::Model model;
  bool outputs_probabilities = false;  // ends in a softmax, not logits
  std::string description;             // "Keras Sequential 'cnn' from cnn.json"
};

// Whether the model's last layer gives probabilities (its activation is a softmax).
bool ends_in_softmax(const nn::Model& model) {
  const std::optional<nn::LayerConfig> config = model.layers().back().impl().config();
  if (!config) return false;
  const auto activation = config->find("activation");
  return activation != config->end() && std::holds_alternative<std::string>(activation->second) &&
         std::get<std::string>(activation->second) == "softmax";
}

TrainedModel make_model(const TrainOptions& options, const TrainingData& data_sets) {
  const std::vector<std::string> zoo = nn::zoo::image_model_names();
  if (std::find(zoo.begin(), zoo.end(), options.model) != zoo.end()) {
    return {nn::zoo::build(options.model, data_sets.image_shape, data_sets.num_classes), false,
            options.model};
  }
  TrainedModel made = [&]() -> TrainedModel {
    if (std::filesystem::is_directory(options.model)) {
      nn::Model saved = io::load_model(options.model);
      const std::string name = saved.name();
      const bool softmax = ends_in_softmax(saved);
      return {std::move(saved), softmax,
              "saved model '" + name + "' from " + options.model + " (with its weights)"};
    }
    io::KerasModel keras = io::load_keras_model(options.model, data_sets.image_shape);
    const std::string name = keras.model.name();
    // A .keras file carries its weights: training goes on from them.
    const bool with_weights = options.model.ends_with(".keras");
    if (with_weights) io::load_keras_weights(keras.model, options.model);
    return {std::move(keras.model), keras.outputs_probabilities,
            "Keras " + keras.class_name + " '" + name + "' from " + options.model +
                (with_weights ? " (with its weights)" : "")};
  }();
  const Shape& input = made.model.input_shape();    // (-1, H, W, C)
  const Shape& output = made.model.output_shape();  // (-1, classes)
  const Shape expected_input = [&] {
    Shape shape{-1};
    shape.insert(shape.end(), data_sets.image_shape.begin(), data_sets.image_shape.end());
    return shape;
  }();
  if (input != expected_input) {
    throw UsageError("--model " + options.model + " takes inputs " + shape_str(input) +
                     ", the data's images are " + shape_str(expected_input) +
                     "; pass --image-size/--channels to match, or change the model's input");
  }
  if (output != Shape{-1, data_sets.num_classes}) {
    throw UsageError("--model " + options.model + " gives outputs " + shape_str(output) +
                     ", the data has " + std::to_string(data_sets.num_classes) +
                     " classes; its last layer needs one unit per class");
  }
  return made;
}

// Adam at the run's (global) rate, decayed along a cosine over `total_steps` with --lr-schedule
// cosine; the loss on the model's logits (or probabilities); accuracy.
// The run's learning rate: `learning_rate` decaying over `total_steps` under --schedule cosine.
train::LearningRate scheduled_rate(const TrainOptions& options, double learning_rate,
                                   std::int64_t total_steps) {
  return options.schedule == "cosine"
             ? train::LearningRate(train::CosineDecay(learning_rate, total_steps))
             : train::LearningRate(learning_rate);
}

void compile_for_training(TrainedModel& made, const TrainOptions& options,
                          const train::LearningRate& rate) {
  made.model.compile({.optimizer = train::Adam(rate),
                      .loss = train::SparseCategoricalCrossentropy(!made.outputs_probabilities),
                      .metrics = {"accuracy"},
                      .jit_compile = options.jit});
}

// --find-max-batch: the largest per-replica batch the strategy's devices train, from
// --batch-size up. Each trial trains a fresh model (with its optimizer's slots) for two steps of
// the run's own input pipeline at that batch size, and the epoch's last partial batch, so the
// data held in memory (the shuffle buffer, the batches made ahead) and the compiled step's plans
// count as they will in training.
std::int64_t search_max_batch(const TrainOptions& options, const distribute::Strategy& strategy,
                              const TrainingData& data_sets, std::int64_t training_examples,
                              std::ostream* log) {
  if (strategy.num_workers() > 1) {
    throw UsageError(
        "--find-max-batch searches within one process; run it without "
        "--strategy multi-worker, then pass the batch size it finds");
  }
  const std::int64_t replicas = strategy.num_replicas_in_sync();
  if (log != nullptr) {
    *log << "searching the largest batch size that fits (" << options.model << ", "
         << options.precision.precision << "):\n";
  }
  const distribute::StrategyScope scope = strategy.scope();
  auto fits = [&](std::int64_t batch) {
    TrainOptions trial = options;
    trial.batch_size = strategy.global_batch_size(batch);
    try {
      const data::Pipeline batches = training_input(data_sets, trial).training;
      TrainedModel made = make_model(options, data_sets);
      nn::Model& model = made.model;
      // Compiled or eager as the run will be: a compiled step holds its planned block
      // between steps, an eager one frees its activations.
      compile_for_training(
          made, options,
          scheduled_rate(options, options.learning_rate, batches.num_batches() * options.epochs));
      train::FitOptions quiet;
      quiet.verbose = 0;
      model.fit(batches.take(2), 1, quiet);
      // The epoch's last, partial batch (a compiled step holds a plan per batch shape), while a
      // pass over the run's pipeline holds its buffers as it will in training.
      if (const std::int64_t remainder = training_examples % trial.batch_size; remainder > 0) {
        data::ElementIterator held = batches.start();
        held.next();
        TrainingData last = data_sets;
        last.training = data_sets.training.take(remainder);
        trial.validation_split = 0.0;
        model.fit(training_input(last, trial).training, 1, quiet);
      }
      return true;
    } catch (const OutOfMemory&) {
      return false;
    }
  };
  // Training holds a little more than its trials do (the batches the input pipeline makes ahead
  // grow as it runs; the epoch's last batch is assembled while the others are in use): under a
  // memory limit the trials leave 2% of it to that.
  const std::size_t limit = options.precision.memory_limit;
  if (limit > 0) {
    for (const Device& device : strategy.devices())
      set_memory_limit(device, limit / 50 * 49);
  }
  const std::int64_t found = train::find_max_batch(
      options.batch_size, std::max<std::int64_t>(1, training_examples / replicas), fits, log);
  if (limit > 0) {
    for (const Device& device : strategy.devices())
      set_memory_limit(device, limit);
  }
  if (log != nullptr) {
    *log << "largest batch size that fits: " << found << (replicas > 1 ? " per replica" : "")
         << "; training with it\n";
  }
  return found;
}

}  // namespace

const CommandSpec& train_spec() {
  static const CommandSpec spec{
      "train",
      "Train a zoo model on Fashion-MNIST; report test accuracy and throughput",
      "tandem train [options]",
      "Trains with Adam on the best device available (this build: the CPU, through oneDNN) and\n"
      "says which and why, shows a Keras-style progress bar per epoch, then prints the test\n"
      "accuracy, the test loss and the steady-state training throughput in samples/s (warm-up\n"
      "steps excluded).",
      train_options().specs(),
  };
  return spec;
}

int run_train(const ParsedArgs& command_line) {
  const auto start = std::chrono::steady_clock::now();
  // A run file's options under the command line's, each checked as the command line's are.
  const ParsedArgs args = with_run_file(train_spec(), command_line,
                                        [](const std::string& option, const std::string& text) {
                                          train_options().read_one(option, text);
                                        });
  // A resumed run takes its settings from the checkpoint.
  std::optional<io::CheckpointInfo> resume;
  if (const auto directory = args.value("--resume")) resume = io::read_checkpoint_info(*directory);
  TrainOptions options = train_options().read(
      resume ? resumed_arguments(
                   train_spec(), args, *resume,
                   [](const ParsedArgs& given) { return run_config(train_options().read(given)); })
             : args);
  // Under a strategy the pipeline yields global batches (per-replica batch x replicas), the
  // learning rate follows --lr-scaling, and only the chief worker reports. Workers compare what
  // decides the training as they start.
  options.strategy.multi_worker.run_configuration = training_configuration(options);
  // --jit off with an XLA strategy: its device, op by op.
  options.strategy.op_by_op = options.jit == false;
  const std::shared_ptr<distribute::Strategy> strategy = make_strategy(options.strategy);
  TrainOptions global = options;
  global.batch_size = strategy->global_batch_size(options.batch_size);
  global.learning_rate =
      strategy->scaled_learning_rate(options.learning_rate, options.strategy.lr_scaling);
  const bool chatty = options.verbosity > 0 && strategy->is_chief();
  if (strategy->is_chief()) {
    check_destinations(options);
    // The options the run was given, as a run file that repeats it.
    if (!options.observe.logdir.empty()) {
      std::filesystem::create_directories(options.observe.logdir);
      write_file_atomically(options.observe.logdir + "/run.toml",
                            resolved_run_file(train_spec(), args));
    }
  }

  set_num_threads(options.threads);
  if (const auto warning = thread_count_warning(options.threads); warning && strategy->is_chief()) {
    std::cerr << "warning: " << *warning << "\n";
  }
  manual_seed(options.seed);
  set_deterministic(options.checkpointing.deterministic);
  set_flush_denormals(!options.precision.keep_denormals);
  const std::string device = strategy_device(*strategy);
  if (chatty) describe_strategy(*strategy, options.strategy, options.batch_size, std::cout);

  // The dtype policy and the memory cap hold before any model is made.
  mixed_precision::set_global_policy(policy_name(options.precision.precision));
  if (options.precision.memory_limit > 0) {
    for (const Device& training_device : strategy->devices()) {
      set_memory_limit(training_device, options.precision.memory_limit);
    }
  }
  if (const auto warning = precision_warning(options.precision.precision, strategy->devices());
      warning && strategy->is_chief()) {
    std::cerr << "warning: " << *warning << "\n";
  }
  if (chatty) {
    std::cout << "precision: " << options.precision.precision << " ("
              << policy_name(options.precision.precision) << " dtype policy"
              << (options.precision.precision == "fp16" ? ", dynamic loss scaling" : "") << ")"
              << (options.precision.keep_denormals ? ", denormals kept on the CPU" : "")
              << (options.precision.memory_limit > 0
                      ? ", memory limit " + format_memory_size(options.precision.memory_limit) +
                            " per device"
                      : "")
              << "\n";
  }
  // XLA's replicas take equal shares of every batch.
  if (!options.quantize.precision.empty() && strategy->num_replicas_in_sync() > 1) {
    throw UsageError("--quantize calibrates and fine-tunes one replica's model; train with " +
                     strategy->description() +
                     " and --save-model DIR, then quantise on one device: tandem train --model "
                     "DIR --epochs 1 --quantize int8 --save-model DIR_INT8");
  }
  const auto* xla_strategy = dynamic_cast<const distribute::Xla*>(strategy.get());
  const int equal_shares = xla_strategy != nullptr ? strategy->num_replicas_in_sync() : 1;
  const TrainingData data_sets = open_training_data(options.data, options.data_dir);
  TrainingInput input = training_input(data_sets, global, equal_shares);
  const Shape& example_shape = data_sets.image_shape;  // (H, W, C)
  if (options.checkpointing.keep_best.starts_with("val_") && !input.validation) {
    throw UsageError("--keep-best " + options.checkpointing.keep_best +
                     " needs validation data, and " + data_sets.description +
                     " has no validation split; add --validation-split F (e.g. 0.1) or "
                     "--validation-data SPEC, or keep the best by " +
                     options.checkpointing.keep_best.substr(4));
  }
  if (options.precision.find_max_batch) {
    options.batch_size =
        search_max_batch(options, *strategy, data_sets, input.training.num_examples(),
                         chatty ? &std::cout : nullptr);
    global.batch_size = strategy->global_batch_size(options.batch_size);
    manual_seed(options.seed);  // the trials drew initial weights
    input = training_input(data_sets, global, equal_shares);
  }
  const data::Pipeline& training = input.training;
  if (chatty) {
    std::cout << "data: " << data_sets.description << ": " << training.num_examples() << " training"
              << (input.validation
                      ? ", " + std::to_string(input.validation->num_examples()) + " validation"
                      : "")
              << ", "
              << (input.test ? std::to_string(input.test->num_examples()) + " test" : "no test")
              << " images " << shape_str(example_shape)
              << (options.data.augment.empty() ? ""
                                               : ", augmented: " + join(options.data.augment, ", "))
              << "\n";
    if (input.dropped > 0) {
      std::cout << "data: the last " << plural(input.dropped, "training example")
                << " of each epoch are left out: that partial batch does not split over "
                << equal_shares << " XLA replicas\n";
    }
  }
  if (options.verbosity == 2) std::cout << "input pipeline: " << training.describe() << "\n";

  const distribute::StrategyScope scope = strategy->scope();
  TrainedModel made = make_model(options, data_sets);
  nn::Model& model = made.model;
  const std::int64_t total_steps = training.num_batches() * options.epochs;
  compile_for_training(made, options, scheduled_rate(options, global.learning_rate, total_steps));
  if (options.verbosity == 2) model.summary(std::cout);
  if (chatty) {
    std::cout << "training " << made.description << " (" << model.count_params() << " weights) for "
              << plural(options.epochs, "epoch") << ", batch size " << options.batch_size
              << ", Adam lr " << global.learning_rate
              << (options.schedule == "cosine" ? " with cosine decay" : "") << ", seed "
              << options.seed << (options.checkpointing.deterministic ? ", deterministic" : "")
              << (xla_strategy != nullptr ? ", the whole step compiled by XLA"
                  : model.jit_compiled()  ? ", compiled step"
                                          : ", eager step")
              << "\n";
  }

  train::FitOptions fit_options;
  fit_options.validation_data = input.validation ? &*input.validation : nullptr;
  fit_options.verbose = chatty ? 1 : 0;
  Observers observers(options.observe, describe_run(options, data_sets, training, device));
  fit_options.callbacks = observers.callbacks();
  io::RunConfig config = run_config(options);
  // Recorded so that a resume with another number of workers is told so, not that the data
  // set differs (the batches per epoch do).
  config.emplace(kReplicasKey, std::to_string(strategy->num_replicas_in_sync()));
  Checkpointing checkpointing(options.checkpointing, std::move(config), resume);
  checkpointing.prepare(model, training, fit_options, chatty ? &std::cout : nullptr);
  for (const auto& callback : checkpointing.callbacks())
    fit_options.callbacks.push_back(callback);
  // The other workers hold the same weights: the chief alone logs, saves and evaluates.
  if (!strategy->is_chief()) fit_options.callbacks.clear();
  // Pruning on every worker (each masks its own copy of the same weights), first of the
  // callbacks so that checkpoints and logs see the masked weights.
  const std::shared_ptr<pruning::Pruning> pruning = make_pruning(options.prune, model, total_steps);
  if (pruning) {
    fit_options.callbacks.insert(fit_options.callbacks.begin(), pruning);
    if (resume) {
      pruning->resume_at(fit_options.initial_epoch * training.num_batches() +
                         fit_options.initial_step);
    }
    if (!options.observe.logdir.empty() && strategy->is_chief()) {
      fit_options.callbacks.push_back(
          std::make_shared<observe::PruningSummaries>(pruning, options.observe.logdir));
    }
    if (chatty) {
      std::cout << "pruning: " << options.prune.pattern << " magnitude pruning of "
                << pruning->weights().size() << " kernels to sparsity "
                << shortest(options.prune.sparsity)
                << (options.prune.pattern == "2:4" ? ""
                                                   : " (" + options.prune.schedule + " schedule)");
      for (const std::string& skipped : pruning->skipped())
        std::cout << "; left alone: " << skipped;
      std::cout << "\n";
    }
  }
  const auto train_start = std::chrono::steady_clock::now();
  const train::History history = model.fit(training, static_cast<int>(options.epochs), fit_options);
  const double train_seconds = seconds_since(train_start);
  if (!strategy->is_chief()) return 0;

  const std::optional<QuantizeOutcome> quantized = quantize_trained_model(
      options.quantize, model, training, input.test ? &*input.test : nullptr, global.learning_rate,
      [&](double rate) { compile_for_training(made, options, train::LearningRate(rate)); },
      pruning ? std::vector<std::shared_ptr<train::Callback>>{pruning}
              : std::vector<std::shared_ptr<train::Callback>>{},
      chatty ? &std::cout : nullptr);

  // No test set (an image folder without test/, TFRecords without --test-data): no test figures.
  std::optional<train::Logs> results;
  if (input.test) {
    results = model.evaluate(*input.test);
    observers.log_test_results(*results);
  }
  const std::optional<double> test_accuracy =
      results ? std::optional(results->at("accuracy")) : std::nullopt;
  const std::optional<double> test_loss =
      results ? std::optional(results->at("loss")) : std::nullopt;
  const double samples_per_sec = history.samples_per_sec();
  const double wall_seconds = seconds_since(start);

  if (results) {
    std::cout << "test accuracy: " << fixed(results->at("accuracy"), 4) << "\n"
              << "test loss: " << fixed(results->at("loss"), 4) << "\n";
  } else {
    const io::EpochHistory epochs = checkpointing.run_history(history);
    if (epochs.contains("val_accuracy")) {
      std::cout << "validation accuracy: " << fixed(epochs.at("val_accuracy").back(), 4) << "\n"
                << "validation loss: " << fixed(epochs.at("val_loss").back(), 4) << "\n";
    }
    std::cout << "test: none (" << data_sets.description
              << " has no test split; pass --test-data SPEC for test figures)\n";
  }
  std::cout << "throughput: "
            << (samples_per_sec > 0.0
                    ? fixed(samples_per_sec, 1) + " samples/s (training, after " +
                          plural(history.warmup_steps(), "warm-up step") + ")"
                    : "not measured: no training step followed the " +
                          plural(history.warmup_steps(), "warm-up step") + "; train longer")
            << "\n"
            << "input: " << fixed(100.0 * history.input_wait_share(), 1)
            << "% of the step time waiting for batches\n"
            << "time: " << fixed(train_seconds, 1) << " s training, " << fixed(wall_seconds, 1)
            << " s in all\n";
  print_communication(*strategy, history, std::cout);
  if (xla_strategy != nullptr) {
    const distribute::Xla::CompileStats compiled = xla_strategy->compile_stats();
    std::cout << "xla: " << plural(compiled.programs, "program") << " compiled in "
              << fixed(compiled.seconds, 2) << " s (one per batch shape); first step "
              << fixed(compiled.first_step_seconds, 2) << " s\n";
  } else if (strategy->devices().front().type == DeviceType::xla) {
    const xla::EagerStats eager = xla::eager_stats();
    std::cout << "xla: " << eager.ops_run << " ops run one by one, from "
              << plural(static_cast<std::int64_t>(eager.compiled), "executable")
              << " compiled once each\n";
  }
  observers.finish(std::cout);
  if (options.observe.profile) print_compiled_step(model, observers.trace_path(), std::cout);
  nlohmann::ordered_json pruned = nullptr;
  if (pruning) {
    pruning::strip_pruning(*pruning);
    pruned = {{"target_sparsity", options.prune.sparsity},
              {"pattern", options.prune.pattern},
              {"sparsity", pruning->sparsity()}};
    std::cout << "pruning: " << fixed(100.0 * pruning->sparsity(), 1)
              << "% of the pruned kernels are zero:";
    for (const pruning::PrunedWeight& weight : pruning->weights()) {
      pruned["layers"][weight.layer] = pruning->sparsity(weight.layer);
      std::cout << " " << weight.layer << " " << fixed(100.0 * pruning->sparsity(weight.layer), 1)
                << "%";
    }
    std::cout << "\n";
  }
  const bool saved = checkpointing.finish(model, data_sets.class_names, std::cout);

  if (!options.report_path.empty()) {
    nlohmann::ordered_json report{
        {"model", options.model},
        {"model_description", made.description},
        {"weights", model.count_params()},
        {"device", device},
        {"epochs", options.epochs},
        {"batch_size", options.batch_size},
        {"precision", options.precision.precision},
        {"strategy", strategy->description()},
        {"replicas", strategy->num_replicas_in_sync()},
        {"global_batch_size", global.batch_size},
        {"learning_rate", options.learning_rate},
        {"lr_schedule", options.schedule},
        {"threads", num_threads()},
        {"seed", options.seed},
        {"validation_split", options.validation_split},
        {"deterministic", options.checkpointing.deterministic},
        {"jit", model.jit_compiled()},
        {"data", data_sets.description},
        {"num_classes", data_sets.num_classes},
        {"test_accuracy", or_null(test_accuracy)},
        {"test_loss", or_null(test_loss)},
        {"history", checkpointing.run_history(history)},
        {"pruning", pruned},
        {"quantization", quantization_report(options.quantize, quantized)},
        {"samples_per_sec", samples_per_sec},
        {"warmup_steps", history.warmup_steps()},
        {"input_wait_share", history.input_wait_share()},
        {"epoch_seconds", mean_epoch_seconds(history)},
        {"wall_seconds", wall_seconds},
        {"train_seconds", train_seconds},
        {"tandem_version", version()},
        {"config", resolved_configuration(train_spec(), args)}};
    if (const auto run_file = command_line.value("--config")) report["config_file"] = *run_file;
    add_communication(*strategy, history, report);
    write_report(options.report_path, report);
    if (chatty) std::cout << "report: " << options.report_path << "\n";
  }
  return saved ? 0 : 1;
}

}  // namespace tandem::cli
