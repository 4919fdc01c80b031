#pragma once
// Hyper-parameter sweeps: a set of trials over any options (a grid, seeded random draws, or
// explicit lists), run N at a time, each in its own folder under the sweep's folder, with
// successive halving (ASHA) to pre-screen many configurations on a small budget and promote the
// best to larger ones. The sweep's progress is a file (<folder>/sweep.json) rewritten after
// every trial: a sweep that is killed and started again keeps what finished and runs the rest
// (trials that were running are told to resume). `tandem sweep sweep.toml` runs `tandem train`
// trials through this; a program runs its own training function:
//
//   sweep::SweepOptions options{.folder = "sweeps/lr", .parallel = 2, .metric = "val_accuracy"};
//   const sweep::Summary summary = sweep::run_sweep(
//       {{.name = "lr", .values = {1e-3, 3e-3, 1e-2}}, {.name = "batch_size", .values = {32, 64}}},
//       options, [](const sweep::Trial& trial) {
//         ... train with trial.params, on trial.threads threads, logging into trial.folder ...
//         return sweep::Outcome{.metrics = {{"val_accuracy", accuracy}}};
//       });
//   std::cout << summary.table();
//
// With parallel > 1 the function runs on several threads at once: models are independent, but
// Tandem's process-wide settings (set_num_threads, manual_seed, the dtype policy) are shared, so a
// function that sets them should run with parallel = 1 or in processes of its own (as the CLI's
// trials do).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tandem::sweep {

// An option's value as a run file holds it.
using Value = std::variant<bool, std::int64_t, double, std::string>;
using Params = std::map<std::string, Value>;
// "0.001", "64", "true", "cosine": the shortest text that reads back as the same value.
std::string value_text(const Value& value);

// A range to draw from (random search): uniform, or uniform in log space; integers rounded.
struct Range {
  double low = 0.0;
  double high = 1.0;
  bool log = false;
  bool integer = false;
};

// One option the sweep varies: a list of values (a grid axis, or the choices of a random draw)
// or, for random search, a range.
struct Axis {
  std::string name;
  std::vector<Value> values;
  std::optional<Range> range;
};

enum class Method { grid, random };

// Successive halving: every configuration first runs on the budget of the first rung (a fraction
// of the full budget, e.g. of the data or the epochs); once a rung's runs have finished, its best
// 1/reduction go on to the next rung, until the last rung runs the full budget. Runs of a rung
// and new configurations fill the trial slots as they free (as ASHA does), and the compute is
// known in advance: rung k runs N / reduction^k configurations.
struct Halving {
  std::vector<double> rungs{0.25, 0.5, 1.0};  // increasing, in (0, 1], the last 1
  int reduction = 2;                          // eta: the best 1/reduction of a rung go on
};

struct SweepOptions {
  std::string folder;  // the sweep's folder: sweep.json, and one folder per trial
  Method method = Method::grid;
  std::int64_t trials = 0;  // random: how many configurations to draw
  std::uint64_t seed = 0;   // random: the draws
  int parallel = 1;         // trials at once
  // Ranks the trials; an outcome without it is a failed trial.
  std::string metric = "val_accuracy";
  bool maximize = true;
  std::optional<Halving> halving;
  // What defines the sweep (the sweep file, say): a folder holding another sweep's progress is
  // refused rather than mixed with it.
  std::string definition;
  // CPU threads shared out between the trials running at once (0: the usable cores,
  // tandem/runtime.h).
  int threads = 0;
  std::string currency = "USD";  // of Outcome::cost
};

// One run of one configuration at one budget.
struct Trial {
  std::int64_t index = 0;  // of the configuration, from 0
  std::string id;          // "trial-03", or "trial-03/rung-1" under halving
  Params params;
  int rung = 0;
  double budget = 1.0;  // the rung's fraction of the full budget
  std::string folder;   // created, for the trial's logs and checkpoints
  // This run was under way when the sweep stopped: continue from its checkpoints, if any.
  bool resume = false;
  int slot = 0;     // 0 .. parallel-1: which of the concurrent runs (e.g. which GPU)
  int threads = 1;  // its share of the CPU threads
};

struct Outcome {
  bool ok = true;
  std::string failure;                                 // why not, for the table
  std::map<std::string, double> metrics;               // final values
  std::map<std::string, std::vector<double>> history;  // per epoch, for the learning curves
  double seconds = 0.0;                                // of training
  std::optional<double> cost;                          // in SweepOptions::currency
};

struct Result {
  Trial trial;
  Outcome outcome;
};

struct Summary {
  std::vector<Axis> space;
  SweepOptions options;
  std::vector<Result> results;      // in the order they finished
  std::optional<std::size_t> best;  // into results: the best at the largest budget reached
  std::int64_t configurations = 0;
  // Budget spent, in full trials (a trial at rung budget 0.25 counts 0.25), and what running
  // every configuration at the full budget would spend.
  double compute = 0.0;
  double full_compute = 0.0;

  // One line per trial run: id, the varied options, status, the metric and the other final
  // metrics, seconds and cost; the best marked.
  std::string table() const;
};

// The configurations of a grid (every combination, the first axis slowest) or of a random search
// (options.trials draws from options.seed). Throws InvalidArgument naming a bad axis.
std::vector<Params> configurations(const std::vector<Axis>& space, const SweepOptions& options);

// Runs the sweep, resuming what options.folder's sweep.json recorded. A trial that throws is a
// failed trial (its message the reason); the sweep goes on.
Summary run_sweep(const std::vector<Axis>& space, const SweepOptions& options,
                  const std::function<Outcome(const Trial&)>& run_trial);

// ---- Sweep files ----
//
//   [sweep]    folder = "runs/lr"  parallel = 2  method = "grid"|"random"  trials = 20
//              seed = 0  metric = "val_accuracy"  mode = "max"|"min"  threads = 0
//   [base]     model = "cnn"  epochs = 3  validation-split = 0.1   (a run file's keys)
//   [space]    lr = [1e-3, 3e-3, 1e-2]  batch-size = [32, 64]
//              lr = { low = 1e-4, high = 1e-1, scale = "log" }   (random only)
//   [halving]  rungs = [0.25, 0.5, 1]  reduction = 2  resource = "data"|"epochs"

// The settings a sweep file's [base] and [space] may name: a training run's, keyed as its run
// files key them, supplied by whoever runs the trials.
struct SettingKeys {
  // Whether `key` is a flag (true/false); nullopt for a key that names no setting.
  std::function<std::optional<bool>(const std::string& key)> is_flag;
  // Checks a value's text as the run reads it; throws ConfigError saying what is wrong.
  std::function<void(const std::string& key, const std::string& text)> check;
  std::vector<std::string> keys;   // every key, for "did you mean"
  std::set<std::string> reserved;  // set by the sweep for every trial: refused in the file
  std::string described_as;        // "the long options of 'tandem train' without their dashes ..."
};

struct SweepFile {
  std::string path;
  SweepOptions options;  // folder defaults to the file's path without .toml
  std::vector<Axis> space;
  std::vector<std::pair<std::string, std::string>> base;  // key, text ("true" for a flag)
  std::string resource = "data";                          // halving: data or epochs
};

// Reads a sweep file. Throws ConfigError naming the file, the line and the key, with the fix.
SweepFile read_sweep_file(const std::string& path, const SettingKeys& settings);
// What defines the sweep (SweepOptions::definition): everything but how it runs.
std::string sweep_definition(const SweepFile& file);

// A self-contained HTML page: the learning curve (options.metric per epoch) of every trial on
// one chart, and the table.
std::string html_report(const Summary& summary);

}  // namespace tandem::sweep
