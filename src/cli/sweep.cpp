// `tandem sweep sweep.toml`: trials of `tandem train` over a space of its options, N at a time,
// each a process of its own logging into <folder>/<trial> (TensorBoard's HParams tab compares
// them), with successive halving on a fraction of the data or the epochs; a killed sweep started
// again finishes what it had begun. At the end: the table of trials, the best configuration as a
// run file, and an HTML report of every trial's learning curve.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/files.h"
#include "tandem/bench.h"
#include "tandem/cuda.h"
#include "tandem/io.h"
#include "tandem/run.h"
#include "tandem/sweep.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;

// What the sweep sets for every trial itself, by key; a sweep file may not.
const std::set<std::string>& reserved_keys() {
  static const std::set<std::string> keys{"config",  "help",           "logdir",  "report",
                                          "resume",  "checkpoint-dir", "threads", "quiet",
                                          "verbose", "save-model"};
  return keys;
}

// The settings of `tandem train` a sweep file names, checked as it checks them.
sweep::SettingKeys train_setting_keys() {
  sweep::SettingKeys keys;
  keys.is_flag = [](const std::string& key) -> std::optional<bool> {
    if (run::find_setting(key) == nullptr) return std::nullopt;
    return is_train_flag(key);
  };
  keys.check = check_train_option;
  for (const run::Setting& setting : run::settings()) {
    if (!reserved_keys().contains(setting.key)) keys.keys.push_back(setting.key);
  }
  keys.reserved = reserved_keys();
  keys.described_as =
      "the long options of 'tandem train' without their dashes (tandem train --help)";
  return keys;
}

// ---- One trial: a `tandem train` process ----

// A trial's settings by key: the file's [base] under the trial's values of [space].
std::map<std::string, std::string> trial_settings(const sweep::SweepFile& file,
                                                  const sweep::Params& params) {
  std::map<std::string, std::string> settings(file.base.begin(), file.base.end());
  for (const auto& [name, value] : params)
    settings[name] = sweep::value_text(value);
  return settings;
}

std::string own_executable() {
  std::error_code error;
  const fs::path path = fs::read_symlink("/proc/self/exe", error);
  if (error) throw IoError("cannot find the tandem program (/proc/self/exe): " + error.message());
  return path.string();
}

// Runs `program args`, its output into `log`; returns the wait status. The child dies with the
// thread that started it (PR_SET_PDEATHSIG), so a killed sweep leaves no trial running.
int run_process(const std::string& program, const std::vector<std::string>& args,
                const std::string& log) {
  std::vector<std::string> argv_text{program};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_text)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) throw IoError(std::string("cannot start a trial: fork: ") + std::strerror(errno));
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0) _exit(127);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw IoError(std::string("waiting for a trial: ") + std::strerror(errno));
  }
  return status;
}

// Why the trial failed: its one-line error, else how it ended.
std::string failure_of(int status, const std::string& log) {
  std::ifstream file(log);
  std::string reason;
  for (std::string line; std::getline(file, line);) {
    if (line.starts_with("tandem: error: ")) reason = line.substr(15);
  }
  if (!reason.empty()) return reason;
  if (WIFSIGNALED(status)) {
    return "crashed: killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + "); see " + log;
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status)) + "; see " + log;
}

double number_or_nan(const nlohmann::json& value) {
  return value.is_number() ? value.get<double>() : std::nan("");
}

sweep::Outcome outcome_of(const std::string& report_path, int threads,
                          const bench::PriceTable& prices) {
  const std::vector<std::uint8_t> bytes = read_whole_file(report_path);
  const nlohmann::json report = nlohmann::json::parse(bytes.begin(), bytes.end());
  sweep::Outcome outcome;
  for (const auto& [name, series] : report.at("history").items()) {
    for (const nlohmann::json& value : series)
      outcome.history[name].push_back(number_or_nan(value));
    if (!outcome.history[name].empty()) outcome.metrics[name] = outcome.history[name].back();
  }
  for (const char* name : {"test_accuracy", "test_loss"}) {
    if (report.at(name).is_number()) outcome.metrics[name] = report.at(name).get<double>();
  }
  outcome.seconds = report.at("train_seconds").get<double>();
  if (const auto quote = prices.quote(report.at("device").get<std::string>(), threads)) {
    outcome.cost = quote->per_hour * outcome.seconds / 3600.0;
  }
  return outcome;
}

class TrialRunner {
 public:
  explicit TrialRunner(const sweep::SweepFile& file)
      : file_(file), program_(own_executable()), prices_(bench::default_prices()) {
    const cuda::Status& gpus = cuda::status();
    gpu_count_ = gpus.available ? static_cast<int>(gpus.devices.size()) : 0;
  }

  sweep::Outcome operator()(const sweep::Trial& trial) {
    const fs::path folder(trial.folder);
    const std::string checkpoints = (folder / "checkpoints").string();
    const bool resume = trial.resume && io::latest_checkpoint(checkpoints).has_value();
    if (!resume) {
      // A fresh start: nothing of an earlier, interrupted attempt.
      for (const fs::directory_entry& entry : fs::directory_iterator(folder))
        fs::remove_all(entry.path());
    }
    std::vector<std::string> args = arguments(trial);
    args.insert(args.end(), {"--logdir", trial.folder, "--report",
                             (folder / "report.json").string(), "--checkpoint-dir", checkpoints,
                             "--threads", std::to_string(trial.threads), "--quiet"});
    if (resume) args.insert(args.end(), {"--resume", checkpoints});
    const std::string log = (folder / "train.log").string();
    const int status = run_process(program_, args, log);
    sweep::Outcome outcome;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      outcome = outcome_of((folder / "report.json").string(), trial.threads, prices_);
    } else {
      outcome.ok = false;
      outcome.failure = failure_of(status, log);
    }
    print(trial, outcome, resume);
    return outcome;
  }

 private:
  std::vector<std::string> arguments(const sweep::Trial& trial) const {
    std::vector<std::string> args{"train"};
    std::map<std::string, std::string> options = trial_settings(file_, trial.params);
    if (file_.options.halving && trial.budget < 1.0) {
      if (file_.resource == "data") {
        options["data-fraction"] = sweep::value_text(trial.budget);
      } else {
        const auto epochs =
            options.contains("epochs") ? std::stoll(options["epochs"]) : run::RunConfig{}.epochs;
        options["epochs"] = std::to_string(
            std::max<long long>(1, std::llround(static_cast<double>(epochs) * trial.budget)));
      }
    }
    // One GPU per trial where there are several.
    if (gpu_count_ > 1 && !options.contains("strategy")) {
      options["strategy"] = "gpu:" + std::to_string(trial.slot % gpu_count_);
    }
    for (const auto& [key, text] : options) {
      if (is_train_flag(key)) {
        if (text == "true") args.push_back("--" + key);
      } else {
        args.insert(args.end(), {"--" + key, text});
      }
    }
    return args;
  }

  void print(const sweep::Trial& trial, const sweep::Outcome& outcome, bool resumed) {
    std::string line = trial.id;
    for (const auto& [name, value] : trial.params)
      line += " " + name + "=" + sweep::value_text(value);
    if (resumed) line += " (resumed)";
    if (outcome.ok) {
      const auto metric = outcome.metrics.find(file_.options.metric);
      line += ": done";
      if (metric != outcome.metrics.end()) {
        line += ", " + file_.options.metric + " " + sweep::value_text(metric->second);
      }
      line += ", " + sweep::value_text(std::round(outcome.seconds * 10) / 10) + " s";
    } else {
      line += ": failed: " + outcome.failure;
    }
    std::lock_guard lock(print_mutex_);
    std::cout << line << std::endl;
  }

  const sweep::SweepFile& file_;
  std::string program_;
  bench::PriceTable prices_;
  int gpu_count_ = 0;
  std::mutex print_mutex_;
};

// The best trial's configuration as a run file for `tandem train --config`.
std::string best_run_file(const sweep::SweepFile& file, const sweep::Summary& summary) {
  const sweep::Result& best = summary.results[*summary.best];
  run::RunConfig config;
  for (const auto& [key, text] : trial_settings(file, best.trial.params))
    run::set_setting(config, key, text);
  return run::run_file_text(
      config, "# The best trial (" + best.trial.id + ", " + summary.options.metric + " " +
                  sweep::value_text(best.outcome.metrics.at(summary.options.metric)) +
                  ") of the sweep " + file.path +
                  "; repeat it with: tandem train --config <this file>\n");
}

}  // namespace

const CommandSpec& sweep_spec() {
  static const CommandSpec spec{
      "sweep",
      "Run trials of `tandem train` over a space of options; report and keep the best",
      "tandem sweep SWEEP.toml",
      "Runs `tandem train` trials over the options [space] varies (every combination, or random\n"
      "draws), on top of the options [base] sets, [sweep] parallel at a time with the CPU\n"
      "threads shared between them (one GPU each where there are several), each logging into\n"
      "FOLDER/trial-NN (point TensorBoard at FOLDER: its HParams tab compares them). [halving]\n"
      "pre-screens: every trial on a fraction of the data (or epochs), the best going on to\n"
      "larger fractions. Started again, a killed sweep keeps its finished trials and resumes the\n"
      "rest from their checkpoints. At the end it prints the table of trials and writes\n"
      "FOLDER/trials.txt, FOLDER/best.toml (the best trial as a run file) and FOLDER/report.html.\n"
      "\n"
      "  [sweep]    folder = \"runs/lr\"  parallel = 2  method = \"grid\"|\"random\"  trials = 20\n"
      "             seed = 0  metric = \"val_accuracy\"  mode = \"max\"|\"min\"  threads = 0\n"
      "  [base]     model = \"cnn\"  epochs = 3  validation-split = 0.1   (run-file keys)\n"
      "  [space]    lr = [1e-3, 3e-3, 1e-2]  batch-size = [32, 64]\n"
      "             lr = { low = 1e-4, high = 1e-1, scale = \"log\" }   (random only)\n"
      "  [halving]  rungs = [0.25, 0.5, 1]  reduction = 2  resource = \"data\"|\"epochs\"",
      {},
      false,
      "SWEEP.toml",
  };
  return spec;
}

int run_sweep(const ParsedArgs& args) {
  if (args.operands().size() != 1) {
    throw UsageError("'tandem sweep' takes one sweep file, got " +
                     std::to_string(args.operands().size()));
  }
  sweep::SweepFile file = sweep::read_sweep_file(args.operands().front(), train_setting_keys());
  file.options.currency = bench::default_prices().currency;
  if (!file.options.metric.starts_with("val_") && !file.options.metric.starts_with("test_")) {
    std::cerr << "warning: the sweep ranks trials by " << file.options.metric
              << ", a figure of the data they train on; a validation metric (val_accuracy, with "
                 "validation-split in [base]) picks what generalises\n";
  }
  const bool validates = std::any_of(file.base.begin(), file.base.end(), [](const auto& option) {
    return option.first == "validation-split" || option.first == "validation-data";
  });
  if (file.options.metric.starts_with("val_") && !validates) {
    std::cout << "note: " << file.options.metric
              << " needs validation data: trials without it (no validation-split or "
                 "validation-data, and no val/ split in their data) fail\n";
  }
  const std::vector<sweep::Params> configurations = sweep::configurations(file.space, file.options);
  std::cout << "sweep: " << configurations.size() << " configurations, " << file.options.parallel
            << " at a time, into " << file.options.folder << "\n";
  TrialRunner runner(file);
  const sweep::Summary summary = sweep::run_sweep(
      file.space, file.options, [&runner](const sweep::Trial& trial) { return runner(trial); });
  const std::string table = summary.table();
  std::cout << "\n" << table;
  const fs::path folder(file.options.folder);
  write_file_atomically((folder / "trials.txt").string(), table);
  write_file_atomically((folder / "report.html").string(), sweep::html_report(summary));
  std::cout << "report: " << (folder / "report.html").string() << "\n"
            << "TensorBoard: tensorboard --logdir " << file.options.folder << " (HParams tab)\n";
  if (!summary.best) {
    std::cout << "every trial failed; see the reasons above\n";
    return 1;
  }
  write_file_atomically((folder / "best.toml").string(), best_run_file(file, summary));
  std::cout << "best configuration: " << (folder / "best.toml").string()
            << " (tandem train --config " << (folder / "best.toml").string() << ")\n";
  return 0;
}

}  // namespace tandem::cli
