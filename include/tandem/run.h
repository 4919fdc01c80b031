#pragma once
// The training run as a library: everything `tandem train` does, callable in-process, in the
// spirit of Keras' fit and Hugging Face's Trainer + TrainingArguments. A plain configuration
// (RunConfig, with the main job's defaults) says what to train on what, how, where, and what to
// keep; a Run prepares the data, the model, the strategy and the observers, fits, evaluates and
// finishes, and returns a Report.
//
//   run::RunConfig config;
//   config.model = "photos-model.json";         // a zoo name, Keras JSON, .keras, saved folder
//   config.data.images.training = "photos/";    // <class>/<image> folders, TFRecords, IDX, ...
//   config.data.images.image_height = config.data.images.image_width = 64;
//   config.epochs = 5;
//   config.logging.logdir = "runs/photos";      // TensorBoard
//   const run::Report report = run::Run(config).run();
//   std::cout << report.test_accuracy.value_or(0.0) << "\n";
//
// Every field has a key, as run files (TOML) and reports spell it ("batch-size", "lr"); a run
// file is the configuration's text (run_file_text, load_run_file) and a checkpoint records the
// fields that define the run, so a run resumes from its checkpoints whether a program or
// `tandem train` wrote them. Process-wide settings a run changes (threads, the seed, deterministic
// mode, denormals, the dtype policy, memory limits) are put back when it ends, so that runs one
// after another in a process (a notebook, an in-process sweep) do not leak into each other.
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tandem/data_spec.h"
#include "tandem/distribute.h"
#include "tandem/io.h"
#include "tandem/observe.h"
#include "tandem/pruning.h"
#include "tandem/quantization.h"
#include "tandem/train.h"

namespace tandem::run {

// ---- The configuration ----

// Adam at a learning rate, constant or decayed to 0 along a cosine over the run.
struct OptimizerConfig {
  double learning_rate = 1e-3;  // of the global batch (StrategyConfig::lr_scaling)
  // Adam at a constant rate keeps bouncing around its minimum (the main job measured 90.5-91.0%
  // test accuracy over epochs 6-10); decaying it to zero along a cosine settles it.
  std::string schedule = "cosine";  // "constant" or "cosine"
};

struct DataConfig {
  data::ImageDataOptions images;  // where the examples come from, their size and classes
  // The last fraction of the training set held out for validation (Keras' validation_split; of
  // an image folder, a random one, seeded); 0: none, unless images.validation names some.
  double validation_split = 0.0;
  // Of the training examples (after any validation split), the first fraction each epoch trains
  // on: a cheaper run for pre-screening, as a sweep's successive halving does.
  double fraction = 1.0;
  std::vector<std::string> augment;  // data::augmentation_names(), in the order given
};

struct PrecisionConfig {
  // fp32, bf16 (mixed_bfloat16: compute in bfloat16, variables float32) or fp16 (mixed_float16,
  // with dynamic loss scaling).
  std::string precision = "fp32";
  std::size_t memory_limit = 0;  // bytes Tandem may allocate on each training device; 0: no cap
  bool find_max_batch = false;   // first search the largest batch that fits, from batch_size up
  bool keep_denormals = false;   // IEEE gradual underflow in CPU kernels instead of flushing
};

struct StrategyConfig {
  distribute::StrategyOptions strategy;  // by name: auto, cpu, gpu:N, mirrored, xla-cpu, tpu, ...
  distribute::LearningRateScaling lr_scaling = distribute::LearningRateScaling::none;
};

struct CheckpointConfig {
  std::string directory;         // empty: no checkpoints (the resumed run's, when resuming)
  std::int64_t every_steps = 0;  // also every N steps; 0: at the end of each epoch only
  int keep = 3;                  // the newest N; 0 keeps all
  std::string keep_best;         // also the best by this log (loss, val_accuracy, ...); empty: none
  // Continue the run whose checkpoints are here (or this checkpoint, DIR/ckpt-<step>) where it
  // stopped. The fields that define the run must be as it had them (resumed_config gives them).
  std::string resume;
  std::string save_model;  // save the trained model here (Model::save); empty: not saved
};

struct RunConfig {
  // A zoo image model (nn::zoo::image_model_names()), a Keras model as TensorFlow writes it
  // (model.to_json(), a config.json, a .keras file with its weights), or a saved model folder.
  std::string model = "cnn";
  std::int64_t epochs = 10;
  std::int64_t batch_size = 32;  // per replica
  OptimizerConfig optimizer;
  std::uint64_t seed = 42;  // the initial weights and the shuffle order
  int threads = 0;          // CPU threads for the kernels; 0: automatic (set_num_threads)
  // Kernels that sum in a fixed order: bit-identical results run to run and for any thread count.
  bool deterministic = false;
  std::optional<bool> jit;  // the training step compiled; unset: the device's default
  int verbosity = 1;        // 0 results only, 1 progress bar, 2 also the model summary and data
  DataConfig data;
  PrecisionConfig precision;
  StrategyConfig strategy;
  CheckpointConfig checkpoints;
  observe::RunObserverOptions logging;  // TensorBoard, the resource monitor, the profiler
  pruning::PruningRecipe pruning;
  quantization::QuantizationRecipe quantization;
};

// ---- The configuration as text: run files, reports, checkpoints, the CLI ----

// What a checkpoint does with a setting when a run resumes.
enum class OnResume {
  keep,   // defines the run: the resumed run must have it as the run had it
  carry,  // taken from the checkpoint unless the resumed run sets it
  none,   // each run's own (where it logs, its threads, ...)
};

// One setting: a field of RunConfig under its key.
struct Setting {
  std::string key;         // as run files and reports spell it: "batch-size"
  std::string field;       // the C++ field: "batch_size", "optimizer.learning_rate"
  std::string value_name;  // what the value is ("N", "RATE", "SPEC"); empty for a flag
  // Decides the training: the workers of a multi-worker run must agree on it, and checkpoints
  // record it.
  bool workers_agree = false;
  OnResume on_resume = OnResume::none;
  // Settings of one choice (data-dir and data both say where the data is): a resumed run that
  // sets one of them carries none of the others from the checkpoint.
  std::string group = {};
};

// Every setting, in the order run files and help texts list them.
const std::vector<Setting>& settings();
// The setting of `key`, or nullptr.
const Setting* find_setting(const std::string& key);

// The default SettingName of the library: the C++ field ("optimizer.learning_rate").
std::string field_name(const std::string& key);

// Sets one field from its text, as a run file or the command line gives it ("true" or "false"
// for a flag): typed and checked, a mistake a ConfigError naming the setting by `name`.
void set_setting(RunConfig& config, const std::string& key, const std::string& text,
                 const SettingName& name = field_name);
// A field's canonical text: "0.001", "true"/"false" for a flag, "" where unset.
std::string setting_text(const RunConfig& config, const std::string& key);
// The settings whose text differs from RunConfig{}'s, by key, in settings() order: what a run
// file or a report's "config" holds.
std::vector<std::pair<std::string, std::string>> changed_settings(const RunConfig& config);

// Checks the rules across fields (validation data for keep_best "val_...", checkpoint options
// without a directory, ...) and fills what they imply (a resumed run checkpoints where it came
// from; 2:4 pruning is sparsity 0.5). Throws ConfigError naming the settings.
void validate(RunConfig& config, const SettingName& name = field_name);

// A run file: a header comment, then `key = value` lines of changed_settings (numbers as
// numbers, flags as true, the rest as strings). `resume` is left out: a run file repeats a run.
std::string run_file_text(const RunConfig& config, const std::string& header = "");

// One `key = value` of a run file.
struct FileSetting {
  std::string key;
  std::string text;  // as set_setting takes it
  int line = 0;
  std::string written;  // the key with its table, as written: "optimizer.lr"
};
// The keys a caller accepts in a run file besides the settings (the CLI's own, such as
// "report"), each a flag or not, and how the reader's messages describe the keys.
struct RunFileKeys {
  std::map<std::string, bool> extra;  // key -> is a flag
  // Checks an extra key's text; throws ConfigError.
  std::function<void(const std::string& key, const std::string& text)> check_extra;
  std::string described_as = "RunConfig's settings by key (run::settings())";
};
// Reads a run file: keys at the top level or in [tables] that group them (the table's name is
// only for the reader), each value checked as set_setting checks it. Every mistake throws
// ConfigError naming the file, the line and the key, with the fix.
std::vector<FileSetting> read_run_file(const std::string& path, const RunFileKeys& keys = {},
                                       const SettingName& name = field_name);
// The configuration a run file describes, over the defaults.
RunConfig load_run_file(const std::string& path);

// ---- Checkpoints and resuming ----

// What a run's checkpoints record of it: the settings that define it and those a resumed run
// carries, by key, with the number of replicas it trains on.
io::RunConfig checkpoint_record(const RunConfig& config, int replicas);
// The configuration a checkpoint's run had, for resuming it: its recorded settings (the ones it
// keeps and the ones it carries) over RunConfig{}, with checkpoints.resume set to `checkpoint`.
// Carried settings whose group has a key in `overridden` are left at their defaults (the caller
// sets them). Throws ConfigError for a checkpoint that records no training run.
RunConfig resumed_config(const std::string& checkpoint,
                         const std::set<std::string>& overridden = {},
                         const SettingName& name = field_name);

// ---- The report ----

struct PruningResult {
  double target_sparsity = 0.0;
  std::string pattern;
  double sparsity = 0.0;                 // of the pruned kernels, all together
  std::map<std::string, double> layers;  // each pruned layer's
};

struct QuantizationResult {
  quantization::QuantizationRecipe recipe;
  std::optional<double> fp32_test_accuracy;
  std::vector<quantization::InputQuantization> inputs;  // each calibrated layer's input
};

// What combining gradients cost, as shares of the training steps' time (multi-worker runs).
struct CommunicationShares {
  double wait_share = 0.0;
  double pack_share = 0.0;
  std::int64_t bytes_per_step = 0;
  std::int64_t gradient_buckets = 0;
  std::int64_t overlapped_buckets = 0;
};

struct Report {
  RunConfig config;               // as the run trained (batch_size: found by find_max_batch)
  bool chief = true;              // the other workers of a multi-worker run report nothing else
  std::string model_description;  // "cnn", "Keras Sequential 'm' from m.json"
  std::int64_t weights = 0;
  std::string device;    // "cpu", "cuda:0"
  std::string strategy;  // "OneDevice(cpu)"
  int replicas = 1;
  std::int64_t global_batch_size = 0;
  double learning_rate = 0.0;  // of the global batch (config's, scaled to the replicas)
  int threads = 0;
  bool jit = false;  // the step ran compiled
  std::string data;  // "Fashion-MNIST (IDX) from ..., 10 classes"
  std::int64_t num_classes = 0;
  std::optional<double> test_accuracy;  // none without a test set
  std::optional<double> test_loss;
  io::EpochHistory history;  // the whole run's, a resumed run's earlier epochs included
  std::optional<PruningResult> pruning;
  std::optional<QuantizationResult> quantization;
  double samples_per_sec = 0.0;  // steady state, after the warm-up
  std::int64_t warmup_steps = 0;
  double input_wait_share = 0.0;
  double epoch_seconds = 0.0;  // mean
  double train_seconds = 0.0;
  double wall_seconds = 0.0;  // from the run's start to its report
  std::optional<CommunicationShares> communication;
  std::string saved_model;  // where the model was saved ("" when not asked for)
  bool saved = true;        // false: it could not be saved where asked (see the log)
};

// The report as JSON ("config": the changed settings, flags as true, values as text), with
// `annotations` as more members of text (the CLI's "config_file").
std::string report_json(const Report& report,
                        const std::vector<std::pair<std::string, std::string>>& annotations = {});

// The warning for a precision that is slow on these devices (fp16 on the CPU: oneDNN has no
// float16 kernels, so every op runs Tandem's scalar reference loops; bf16 on a CPU without
// AVX-512); nullopt when there is nothing to warn about.
std::optional<std::string> precision_warning(const std::string& precision,
                                             const std::vector<Device>& devices,
                                             const SettingName& name = field_name);

// ---- The run ----

struct RunOutput {
  // Progress: where the run trains and why, the data, the model, each epoch's progress bar (fit
  // prints it to std::cout) ... nullptr: silent. With verbosity 0 the run says nothing here.
  std::ostream* log = &std::cout;
  // The results at the end: test figures, throughput, times, logs, profile, checkpoints.
  std::ostream* out = &std::cout;
  // Warnings (a slow precision for the device, more threads than cores, ...).
  std::ostream* warnings = &std::cerr;
  // The caller's own callbacks, after the run's: watch the run, or stop it (set_stop_training).
  std::vector<std::shared_ptr<train::Callback>> callbacks = {};
  // How messages name settings: the library's fields by default, "--batch-size" for the CLI.
  SettingName name = field_name;
};

class Run {
 public:
  explicit Run(RunConfig config, RunOutput output = {});
  // Puts back the process-wide settings if the run did not finish (an exception, say).
  ~Run();
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // Checks the configuration, picks the strategy, sets the run's process-wide settings, opens
  // the data, makes and compiles the model, wires the observers and checkpoints and, when
  // resuming, restores the checkpoint. Every mistake found here is found before the first step.
  void prepare();
  // Trains (prepare() first if not done); the History of this call's epochs.
  const train::History& fit();
  // Quantises the trained model when the configuration asks for it, then evaluates the test set
  // (when the data has one). fit() first if not done.
  void evaluate();
  // Stops the observers, saves the model, prints the results and puts back the process-wide
  // settings. evaluate() first if not done.
  Report finish();
  // prepare, fit, evaluate, finish.
  Report run();

  const RunConfig& config() const;
  // The model, once prepared.
  nn::Model& model();
  // The strategy, once prepared.
  const distribute::Strategy& strategy() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::run
