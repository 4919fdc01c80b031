// `tandem train`: the command line over the run layer (tandem/run.h). Each option is a setting of
// run::RunConfig under its key (--batch-size is the setting batch-size), read from the command
// line and a run file (--config) into the configuration; run::Run trains and prints; this file
// writes the report.
#include <iostream>
#include <map>
#include <set>

#include "cli/commands.h"
#include "core/files.h"
#include "core/parse.h"
#include "core/text.h"
#include "tandem/data.h"
#include "tandem/nn.h"
#include "tandem/run.h"

namespace tandem::cli {
namespace {

// The options `tandem train` has besides the run's settings: what the CLI itself does with
// them.
constexpr const char* kConfigKey = "config";  // a run file, read here
constexpr const char* kReportKey = "report";  // the report's JSON, written here

struct TrainOption {
  std::string key;   // a run::Setting's key, or one of the CLI's own
  std::string help;  // one line; defaults belong here
};

// The help of every option, in the order --help lists them.
const std::vector<TrainOption>& train_options() {
  static const std::vector<TrainOption> options{
      {"model", "zoo model: " + join(nn::zoo::image_model_names(), ", ") +
                    " (default cnn); or a Keras model as TensorFlow writes it (model.to_json() or "
                    "a config.json, from fresh weights; a .keras file, from its weights); or a "
                    "folder `--save-model` wrote (its weights too: training goes on from them)"},
      {"epochs", "passes over the training set (default 10)"},
      {"batch-size", "examples per training step (default 32)"},
      {"lr", "Adam learning rate (default 0.001)"},
      {"lr-schedule",
       "constant, or cosine: decay the rate to 0 along a cosine over the run (default cosine)"},
      {"threads",
       "CPU threads for the kernels (default: automatic, the usable cores less those other "
       "processes are using)"},
      {"seed", "seeds the initial weights and the shuffle order (default 42)"},
      {"data-dir", std::string("directory with the four Fashion-MNIST IDX files, gzipped or not "
                               "(default ") +
                       data::kFashionMnistDefaultDir +
                       ", from the Debian package dataset-fashion-mnist); other data: --data"},
      {"validation-split",
       "hold out the last fraction F of the training set (of an image folder: a random one, "
       "seeded) and report val_ metrics each epoch (default 0)"},
      {"data-fraction",
       "train on the first fraction F of the training examples (after any validation split): a "
       "cheaper run for pre-screening, as `tandem sweep`'s successive halving does (default 1)"},
      {kReportKey,
       "also write the results (settings, test accuracy and loss, samples/s, times) as JSON"},
      {kConfigKey,
       "read options from a TOML run file, keyed by these long options without '--' (batch-size "
       "= 64, lr-schedule = \"cosine\", deterministic = true), at the top or in [tables] that "
       "group them; options given here override the file's"},
      {"jit",
       "run the training step compiled (traced once, then one planned graph a step) or eagerly, "
       "op by op; the results are the same bit for bit, compiled faster and in 0.65x the memory "
       "(default: on for the CPU and GPUs, where the compiled step is replayed as one CUDA "
       "graph; TANDEM_CUDA_GRAPHS=0 runs its nodes one by one); with the XLA strategies "
       "(xla-cpu, xla-gpu, tpu) the step is compiled by XLA unless --jit off, which runs each op "
       "on the XLA device alone"},
      {"quiet", "no progress bar, only the results"},
      {"verbose", "also print the model summary and the data details"},
      {"logdir",
       "write TensorBoard logs to DIR (train/ and validation/ runs, hparams, the model, and the "
       "resource monitor's samples, also as DIR/monitor.csv); view them with tensorboard "
       "--logdir DIR"},
      {"log-every",
       "with --logdir: log the loss, metrics, learning rate, throughput and input-wait share "
       "every N steps as well as every epoch (default 1; 0: per epoch only)"},
      {"histogram-freq",
       "with --logdir: weight and gradient histograms every N epochs (default 1; 0: none)"},
      {"monitor-interval",
       "with --logdir: sample CPU, memory and GPUs every S seconds (default 1; 0: no monitor)"},
      {"profile",
       "time every op of the profiled steps; print a table of ops by time with FLOPs and GFLOP/s "
       "and write a Chrome trace for https://ui.perfetto.dev"},
      {"profile-steps",
       "the training steps to profile, counted from 0 across epochs (default 20:29)"},
      {"trace",
       "where --profile writes its trace (default DIR/trace.json with --logdir, else "
       "tandem-trace.json)"},
      {"log-device-placement",
       "print the device every op of the profiled steps ran on, and warn when an op falls back "
       "to another device than the training device"},
      {"checkpoint-dir",
       "write checkpoints (weights, optimizer state, RNG and data position) into DIR, atomically "
       "and in the background; a run killed at any moment resumes from the last one with "
       "--resume DIR"},
      {"checkpoint-every",
       "also checkpoint every N training steps (default: at the end of each epoch only)"},
      {"keep-checkpoints",
       "keep the newest N checkpoints, delete older ones (default 3; 0 keeps all)"},
      {"keep-best",
       "also keep the best checkpoint by this log: val_loss, val_accuracy (with validation data: "
       "--validation-split, --validation-data or the data's val/ split), loss or accuracy "
       "(lowest loss, highest accuracy)"},
      {"resume",
       "continue the run whose checkpoints are in DIR (or the checkpoint DIR/ckpt-<step>) where "
       "it stopped, with its settings; checkpoints go on into DIR"},
      {"deterministic",
       "bit-identical results run to run and for any --threads: kernels sum in a fixed order "
       "(slower); with --resume the final weights equal an uninterrupted run's"},
      {"save-model",
       "save the trained model (architecture JSON and safetensors weights) into DIR for tandem "
       "predict and tandem export"},
      {"strategy",
       "where to train: auto (the best of TPU, several GPUs, one GPU, the CPU, with the reason "
       "for each fallback), cpu, gpu or gpu:N (one GPU), mirrored (every local GPU), "
       "multi-worker (one process per device, under mpirun or `tandem launch`), xla-cpu, "
       "xla-gpu (the whole step compiled by XLA through a PJRT plugin), tpu (default auto)"},
      {"replicas",
       "xla-cpu, xla-gpu, tpu: train on N devices of the platform together, one replica each "
       "(default 1; tpu: every core)"},
      {"pjrt-plugin",
       "xla-cpu, xla-gpu, tpu: the PJRT plugin to load (default: the one found for the platform)"},
      {"lr-scaling",
       "none: --lr applies to the global batch as given; linear: multiplied by the number of "
       "replicas (default none)"},
      {"join-timeout", "multi-worker: how long to wait for every worker to start (default 300)"},
      {"collective-timeout",
       "multi-worker: how long one all-reduce may take before the workers stop, naming the "
       "missing ones (default 300)"},
      {"bucket-kib",
       "multi-worker: gradients are all-reduced in buckets of about N KiB, started during the "
       "backward pass (default 64 on CPUs, 25600 on GPUs)"},
      {"precision",
       "fp32, bf16 (mixed_bfloat16: compute in bfloat16, variables float32) or fp16 "
       "(mixed_float16, with dynamic loss scaling) (default fp32)"},
      {"memory-limit",
       "cap what Tandem allocates on each training device, e.g. 512M or 8G (default: none); an "
       "allocation past it fails as on a full device"},
      {"find-max-batch",
       "first search the largest batch size that fits the device's memory (from --batch-size "
       "up), then train with it"},
      {"keep-denormals",
       "CPU kernels keep denormal floats (IEEE gradual underflow, as PyTorch does) instead of "
       "flushing them to zero (as TensorFlow and XLA do; on x86 each operation on one costs "
       "about a hundred cycles)"},
      {"data",
       "train on this data instead of Fashion-MNIST: a folder (Fashion-MNIST IDX files, "
       "CIFAR-10 batches, <class>/<image> folders, or train/ val/ test/ of them), TFRecord files "
       "of tf.train.Example (a file, a glob, a comma-separated list), CIFAR-10 .bin files, or "
       "IMAGES,LABELS IDX files; READER:SPEC forces the reader (fashion-mnist, idx, cifar10, "
       "images, tfrecord). The data's own test split is the test set"},
      {"validation-data",
       "validation data, as --data (default: the data's val/ split, if any, or "
       "--validation-split)"},
      {"test-data", "test data, as --data (default: the data's test split, if any)"},
      {"image-feature",
       "TFRecord: the image feature, JPEG/PNG bytes or raw pixels with height and width features "
       "(default: image, image/encoded, ... or the only bytes feature)"},
      {"label-feature",
       "TFRecord: the int64 label feature (default: label, labels, image/class/label, ...)"},
      {"image-size",
       "resize every image to H x W pixels (default: the first training image's size)"},
      {"channels", "decode images grey (1) or RGB (3) (default: the first image's)"},
      {"augment",
       "training-time augmentations, comma-separated: flip (mirror half the images), translate "
       "(shift by up to 1/8 of the size, zero-filled), resized-crop (a random crop of 8-100% of "
       "the area resized back) (default: none)"},
      {"num-classes",
       "classes of the labels, 0 .. N-1 (default: the data's class folders or names, else the "
       "largest label + 1)"},
      {"prune",
       "prune the Dense and Conv2D kernels by magnitude to sparsity S (0 < S < 1, e.g. 0.8) "
       "while training, as TF-MOT's prune_low_magnitude; the zeros stay in the saved model "
       "(default: no pruning)"},
      {"prune-schedule",
       "polynomial (from 0 to S over the first three quarters of the run, TF-MOT's "
       "PolynomialDecay with power 3) or constant (S from the first step) (default polynomial)"},
      {"prune-pattern",
       "unstructured, or 2:4 (two of every four weights along the input channels, the pattern of "
       "NVIDIA's sparse tensor cores; sparsity 0.5) (default unstructured)"},
      {"prune-layers", "the layers to prune, comma-separated (default: every Dense and Conv2D)"},
      {"quantize",
       "quantise the trained model's Dense and Conv2D layers to int8 (per-channel weights, "
       "per-tensor inputs calibrated on training examples); the saved model is quantised "
       "(default: none)"},
      {"calibrator",
       "how --quantize sets each input's range: minmax (the largest value seen), percentile "
       "(99.99% of the values) or entropy (the closest int8 histogram in KL divergence, "
       "TensorRT's) (default minmax)"},
      {"calibration-examples", "training examples --quantize calibrates on (default 1024)"},
      {"qat-epochs",
       "after --quantize, train N more epochs quantisation-aware (int8 in the forward pass, the "
       "gradient straight through) with Adam at a tenth of the learning rate (default 0)"},
      {"quantize-layers",
       "the layers --quantize quantises, comma-separated (default: every Dense and Conv2D)"},
  };
  return options;
}

// How the CLI names a setting in messages: its option.
std::string option_name(const std::string& key) {
  return "--" + key;
}

// Checks an option of the CLI's own as it is read.
void check_own_option(const std::string& key, const std::string& text) {
  if (key == kReportKey) parse_output_path(option_name(key), text);
}

// A setting's text as the command line gives it: a flag given is "true".
std::string given_text(const std::string& key, const std::string& text) {
  const run::Setting* setting = run::find_setting(key);
  return setting != nullptr && setting->value_name.empty() && text.empty() ? "true" : text;
}

// What `tandem train` was asked for: the run's configuration and what the CLI does itself.
struct TrainCommand {
  run::RunConfig config;
  std::string report_path;
  std::optional<std::string> run_file;
};

// The options given, by key in help order: the command line's over the run file's.
std::vector<std::pair<std::string, std::string>> given_options(const ParsedArgs& args) {
  std::map<std::string, std::string> from_file;
  if (const std::optional<std::string> path = args.value("--config")) {
    const run::RunFileKeys keys{{{kReportKey, false}},
                                check_own_option,
                                "the long options of 'tandem train' without their dashes "
                                "(tandem train --help)"};
    for (const run::FileSetting& setting : run::read_run_file(*path, keys, option_name))
      from_file[setting.key] = setting.text;
  }
  std::vector<std::pair<std::string, std::string>> given;
  for (const TrainOption& option : train_options()) {
    if (option.key == kConfigKey) continue;
    if (const std::optional<std::string> text = args.value(option_name(option.key))) {
      given.emplace_back(option.key, *text);
    } else if (const auto found = from_file.find(option.key); found != from_file.end()) {
      given.emplace_back(option.key, found->second);
    }
  }
  return given;
}

TrainCommand read_train_command(const ParsedArgs& args) {
  const std::vector<std::pair<std::string, std::string>> given = given_options(args);
  std::set<std::string> keys;
  for (const auto& [key, text] : given)
    keys.insert(key);
  if (keys.contains("quiet") && keys.contains("verbose")) {
    throw UsageError("--quiet and --verbose contradict each other; pass one of them");
  }
  TrainCommand command;
  // A resumed run takes its settings from the checkpoint, under the options given.
  for (const auto& [key, text] : given) {
    if (key == "resume") command.config = run::resumed_config(text, keys, option_name);
  }
  for (const auto& [key, text] : given) {
    if (key == kReportKey) {
      check_own_option(key, text);
      command.report_path = text;
    } else {
      run::set_setting(command.config, key, given_text(key, text), option_name);
    }
  }
  command.run_file = args.value("--config");
  return command;
}

}  // namespace

void check_train_option(const std::string& key, const std::string& text) {
  if (run::find_setting(key) == nullptr) {
    check_own_option(key, text);
    return;
  }
  run::RunConfig scratch;
  run::set_setting(scratch, key, given_text(key, text), option_name);
}

bool is_train_flag(const std::string& key) {
  const run::Setting* setting = run::find_setting(key);
  return setting != nullptr && setting->value_name.empty();
}

const CommandSpec& train_spec() {
  static const CommandSpec spec = [] {
    CommandSpec made{
        "train",
        "Train a zoo model on Fashion-MNIST; report test accuracy and throughput",
        "tandem train [options]",
        "Trains with Adam on the best device available (this build: the CPU, through oneDNN) "
        "and\nsays which and why, shows a Keras-style progress bar per epoch, then prints the "
        "test\naccuracy, the test loss and the steady-state training throughput in samples/s "
        "(warm-up\nsteps excluded).",
        {},
    };
    for (const TrainOption& option : train_options()) {
      const run::Setting* setting = run::find_setting(option.key);
      // The CLI's own options (--report, --config) name a file.
      made.options.push_back({option_name(option.key),
                              setting != nullptr ? setting->value_name : "FILE", option.help});
    }
    return made;
  }();
  return spec;
}

int run_train(const ParsedArgs& args) {
  const TrainCommand command = read_train_command(args);
  if (!command.report_path.empty()) {
    require_writable_destination(command.report_path, "--report", Destination::file);
  }
  run::Run run(command.config, {.name = option_name});
  const run::Report report = run.run();
  if (!report.chief) return 0;
  if (!command.report_path.empty()) {
    std::vector<std::pair<std::string, std::string>> annotations;
    if (command.run_file) annotations.emplace_back("config_file", *command.run_file);
    write_file_atomically(command.report_path, run::report_json(report, annotations));
    if (report.config.verbosity > 0) std::cout << "report: " << command.report_path << "\n";
  }
  return report.saved ? 0 : 1;
}

}  // namespace tandem::cli
