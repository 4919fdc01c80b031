// `tandem train`: a zoo model, Adam, Fashion-MNIST; prints the test accuracy, the test loss and
// the steady-state training throughput, and optionally writes them to a JSON report.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <numeric>
#include <tuple>

#include "cli/commands.h"
#include "cli/cpu_info.h"
#include "cli/format.h"
#include "cli/json.h"
#include "tandem/data.h"
#include "tandem/nn.h"
#include "tandem/random.h"
#include "tandem/runtime.h"
#include "tandem/train.h"

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
  std::string report_path;
  int verbosity = 1;  // 0 quiet, 1 progress bar, 2 also the model summary and data details
};

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (const std::string& item : items)
    text += (text.empty() ? "" : separator) + item;
  return text;
}

TrainOptions parse_train_options(const ParsedArgs& args) {
  TrainOptions options;
  if (auto model = args.value("--model")) {
    const std::vector<std::string> names = nn::zoo::names();
    if (std::find(names.begin(), names.end(), *model) == names.end()) {
      throw UsageError("unknown model '" + *model + "' for --model; choose one of " +
                       join(names, ", "));
    }
    options.model = *model;
  }
  if (auto text = args.value("--epochs")) {
    options.epochs = parse_positive_integer("--epochs", *text);
    if (options.epochs > std::numeric_limits<int>::max()) {
      throw UsageError("--epochs " + *text + " is too many; pass at most " +
                       std::to_string(std::numeric_limits<int>::max()));
    }
  }
  if (auto text = args.value("--batch-size")) {
    options.batch_size = parse_positive_integer("--batch-size", *text);
  }
  if (auto text = args.value("--lr")) options.learning_rate = parse_positive_number("--lr", *text);
  if (auto text = args.value("--lr-schedule")) {
    if (*text != "constant" && *text != "cosine") {
      throw UsageError("unknown schedule '" + *text + "' for --lr-schedule; choose constant or cosine");
    }
    options.schedule = *text;
  }
  if (auto text = args.value("--threads")) {
    const std::int64_t threads = parse_positive_integer("--threads", *text);
    if (threads > 4096) {
      throw UsageError("--threads must be at most 4096, got '" + *text + "'");
    }
    options.threads = static_cast<int>(threads);
  }
  if (auto text = args.value("--seed")) options.seed = parse_unsigned_integer("--seed", *text);
  if (auto dir = args.value("--data-dir")) {
    if (dir->empty()) throw UsageError("--data-dir needs a directory, got ''");
    options.data_dir = *dir;
  }
  if (auto text = args.value("--validation-split")) {
    options.validation_split = parse_fraction("--validation-split", *text);
  }
  if (auto path = args.value("--report")) {
    const std::filesystem::path parent = std::filesystem::absolute(*path).parent_path();
    if (path->empty() || !std::filesystem::is_directory(parent)) {
      throw UsageError("--report '" + *path + "': directory " + parent.string() +
                       " does not exist; create it or choose another path");
    }
    options.report_path = *path;
  }
  if (args.has("--quiet") && args.has("--verbose")) {
    throw UsageError("--quiet and --verbose contradict each other; pass one of them");
  }
  if (args.has("--quiet")) options.verbosity = 0;
  if (args.has("--verbose")) options.verbosity = 2;
  return options;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double mean_epoch_seconds(const train::History& history) {
  const std::vector<double>& seconds = history.epoch_seconds();
  if (seconds.empty()) return 0.0;
  return std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(seconds.size());
}

void write_report(const std::string& path, const JsonObject& report) {
  std::ofstream out(path);
  out << report.str() << "\n";
  out.close();
  if (!out) {
    throw IoError("cannot write the report " + path +
                  "; check that the disk has space and the "
                  "file is writable");
  }
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
      {
          {"--model", "NAME", "zoo model: " + join(nn::zoo::names(), ", ") + " (default cnn)"},
          {"--epochs", "N",
           "passes over the training set (default " + std::to_string(kDefaultEpochs) + ")"},
          {"--batch-size", "N",
           "examples per training step (default " + std::to_string(kDefaultBatchSize) + ")"},
          {"--lr", "RATE", "Adam learning rate (default 0.001)"},
          {"--lr-schedule", "NAME",
           "constant, or cosine: decay the rate to 0 along a cosine over the run (default cosine)"},
          {"--threads", "N", "CPU threads for the kernels (default: every core)"},
          {"--seed", "N",
           "seeds the initial weights and the shuffle order (default " +
               std::to_string(kDefaultSeed) + ")"},
          {"--data-dir", "DIR",
           std::string("directory with the four Fashion-MNIST IDX files, gzipped or not "
                       "(default ") +
               data::kFashionMnistDefaultDir + ", from the Debian package dataset-fashion-mnist)"},
          {"--validation-split", "F",
           "hold out the last fraction F of the training set and report val_ metrics each epoch "
           "(default 0)"},
          {"--report", "FILE",
           "also write the results (settings, test accuracy and loss, samples/s, times) as "
           "JSON"},
          {"--quiet", "", "no progress bar, only the results"},
          {"--verbose", "", "also print the model summary and the data details"},
      },
  };
  return spec;
}

int run_train(const ParsedArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  const TrainOptions options = parse_train_options(args);
  const bool chatty = options.verbosity > 0;

  set_num_threads(options.threads);
  manual_seed(options.seed);
  const CpuInfo cpu = probe_cpu();
  const std::string device = "cpu";
  if (chatty) {
    std::cout << "device: " << device << " (" << cpu.model << ", " << num_threads() << " threads, "
              << cpu_backend_description() << "), the best available: " << gpu_backend_status()
              << "\n";
  }

  const data::ImageClassificationData fashion = data::load_fashion_mnist(options.data_dir);
  const Shape image_shape(fashion.train_images.shape().begin() + 1,
                          fashion.train_images.shape().end());  // (28, 28, 1)
  auto training = std::make_shared<data::TensorDataset>(fashion.train_images, fashion.train_labels);
  training->shuffle(options.seed).batch(options.batch_size);
  std::shared_ptr<data::TensorDataset> validation;
  if (options.validation_split > 0.0) {
    std::tie(training, validation) = training->split(options.validation_split);
    if (validation->num_examples() == 0) {
      throw InvalidArgument("--validation-split " + std::to_string(options.validation_split) +
                            " holds out no example of " +
                            std::to_string(fashion.train_images.dim(0)) +
                            "; pass a larger fraction or 0");
    }
  }
  data::TensorDataset test(fashion.test_images, fashion.test_labels);
  test.batch(kEvaluationBatchSize);
  if (chatty) {
    std::cout << "data: Fashion-MNIST from " << options.data_dir << ": " << training->num_examples()
              << " training"
              << (validation ? ", " + std::to_string(validation->num_examples()) + " validation"
                             : "")
              << ", " << test.num_examples() << " test images " << shape_str(image_shape) << "\n";
  }

  nn::Model model = nn::zoo::build(options.model, image_shape, fashion.num_classes);
  const std::int64_t total_steps = training->num_batches() * options.epochs;
  const train::LearningRate learning_rate =
      options.schedule == "cosine"
          ? train::LearningRate(train::CosineDecay(options.learning_rate, total_steps))
          : train::LearningRate(options.learning_rate);
  model.compile({.optimizer = train::Adam(learning_rate),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  if (options.verbosity == 2) model.summary(std::cout);
  if (chatty) {
    std::cout << "training " << options.model << " for " << plural(options.epochs, "epoch")
              << ", batch size " << options.batch_size << ", Adam lr " << options.learning_rate
              << (options.schedule == "cosine" ? " with cosine decay" : "")
              << ", seed " << options.seed << "\n";
  }

  train::FitOptions fit_options;
  fit_options.validation_data = validation.get();
  fit_options.verbose = chatty ? 1 : 0;
  const auto train_start = std::chrono::steady_clock::now();
  const train::History history =
      model.fit(*training, static_cast<int>(options.epochs), fit_options);
  const double train_seconds = seconds_since(train_start);

  const train::Logs results = model.evaluate(test);
  const double test_accuracy = results.at("accuracy");
  const double test_loss = results.at("loss");
  const double samples_per_sec = history.samples_per_sec();
  const double wall_seconds = seconds_since(start);

  std::cout << "test accuracy: " << fixed(test_accuracy, 4) << "\n"
            << "test loss: " << fixed(test_loss, 4) << "\n"
            << "throughput: "
            << (samples_per_sec > 0.0
                    ? fixed(samples_per_sec, 1) + " samples/s (training, after " +
                          plural(history.warmup_steps(), "warm-up step") + ")"
                    : "not measured: no training step followed the " +
                          plural(history.warmup_steps(), "warm-up step") + "; train longer")
            << "\n"
            << "time: " << fixed(train_seconds, 1) << " s training, " << fixed(wall_seconds, 1)
            << " s in all\n";

  if (!options.report_path.empty()) {
    JsonObject report;
    report.add_string("model", options.model)
        .add_string("device", device)
        .add_integer("epochs", options.epochs)
        .add_integer("batch_size", options.batch_size)
        .add_number("learning_rate", options.learning_rate)
        .add_string("lr_schedule", options.schedule)
        .add_integer("threads", num_threads())
        .add_unsigned("seed", options.seed)
        .add_number("validation_split", options.validation_split)
        .add_number("test_accuracy", test_accuracy)
        .add_number("test_loss", test_loss)
        .add_number("samples_per_sec", samples_per_sec)
        .add_integer("warmup_steps", history.warmup_steps())
        .add_number("epoch_seconds", mean_epoch_seconds(history))
        .add_number("wall_seconds", wall_seconds)
        .add_number("train_seconds", train_seconds)
        .add_string("tandem_version", version());
    write_report(options.report_path, report);
    if (chatty) std::cout << "report: " << options.report_path << "\n";
  }
  return 0;
}

}  // namespace tandem::cli
