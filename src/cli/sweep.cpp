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

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/run_file.h"
#include "core/files.h"
#include "tandem/bench.h"
#include "tandem/cuda.h"
#include "tandem/io.h"
#include "tandem/sweep.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;

// What the sweep sets for every trial itself; a sweep file may not.
const std::set<std::string>& reserved_options() {
  static const std::set<std::string> names{"--config",  "--help",           "--logdir",  "--report",
                                           "--resume",  "--checkpoint-dir", "--threads", "--quiet",
                                           "--verbose", "--save-model"};
  return names;
}

const OptionSpec* train_option(const std::string& option) {
  for (const OptionSpec& spec : train_spec().options) {
    if (spec.name == option) return &spec;
  }
  return nullptr;
}

std::vector<std::string> train_option_keys() {
  std::vector<std::string> keys;
  for (const OptionSpec& spec : train_spec().options) {
    if (!reserved_options().contains(spec.name)) keys.push_back(spec.name.substr(2));
  }
  return keys;
}

struct SweepFile {
  std::string path;
  sweep::SweepOptions options;
  std::vector<sweep::Axis> space;
  std::vector<std::pair<std::string, std::string>> base;  // option, text ("true" for a flag)
  std::string resource = "data";                          // halving: data or epochs
};

class SweepFileReader {
 public:
  explicit SweepFileReader(std::string path) : path_(std::move(path)) {}

  SweepFile read() {
    std::vector<std::uint8_t> bytes;
    try {
      bytes = read_whole_file(path_, {.max_bytes = 1 << 20});
    } catch (const IoError& error) {
      throw UsageError(error.what());
    }
    toml::table document;
    try {
      document = toml::parse(std::string(bytes.begin(), bytes.end()), std::string_view(path_));
    } catch (const toml::parse_error& error) {
      fail(static_cast<int>(error.source().begin.line),
           "bad TOML (" + std::string(error.description()) + ", column " +
               std::to_string(error.source().begin.column) + ")",
           "see https://toml.io for the syntax");
    }
    file_.path = path_;
    for (const auto& [key, node] : document) {
      const std::string name(key.str());
      const int line = static_cast<int>(key.source().begin.line);
      const toml::table* table = node.as_table();
      static const std::vector<std::string> sections{"sweep", "base", "space", "halving"};
      if (table == nullptr || std::find(sections.begin(), sections.end(), name) == sections.end()) {
        fail(line, "'" + name + "' is not a section of a sweep file" + did_you_mean(name, sections),
             "the sections are [sweep], [base], [space] and [halving] (tandem sweep --help)");
      }
      if (name == "sweep") read_sweep(*table);
      if (name == "base") read_base(*table);
      if (name == "halving") read_halving(*table, line);
    }
    // The space after [base], so that an option in both is found whatever the order.
    if (const toml::table* space = document["space"].as_table()) read_space(*space);
    if (file_.space.empty()) {
      fail(1, "the sweep varies nothing",
           "list the options to try in [space], e.g. lr = [1e-3, 1e-2]");
    }
    if (file_.options.folder.empty()) {
      file_.options.folder = (fs::path(path_).parent_path() / fs::path(path_).stem()).string();
    }
    if (file_.options.method == sweep::Method::random && file_.options.trials == 0) {
      fail(1, "a random search needs its number of trials", "add trials = N to [sweep]");
    }
    return std::move(file_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& problem, const std::string& fix) const {
    throw UsageError(path_ + ":" + std::to_string(line) + ": " + problem + "; " + fix);
  }

  static int line_of(const toml::node& node) { return static_cast<int>(node.source().begin.line); }

  std::int64_t integer(const toml::node& node, const std::string& key, std::int64_t low) const {
    const auto* value = node.as_integer();
    if (value == nullptr || value->get() < low) {
      fail(line_of(node), "'" + key + "' must be a whole number of at least " + std::to_string(low),
           "write " + key + " = " + std::to_string(std::max<std::int64_t>(low, 1)));
    }
    return value->get();
  }

  std::string text(const toml::node& node, const std::string& key,
                   const std::vector<std::string>& choices = {}) const {
    const auto* value = node.as_string();
    if (value == nullptr) fail(line_of(node), "'" + key + "' must be a \"string\"", "quote it");
    if (!choices.empty() &&
        std::find(choices.begin(), choices.end(), value->get()) == choices.end()) {
      std::string listed;
      for (const std::string& choice : choices)
        listed += (listed.empty() ? "" : " or ") + choice;
      fail(line_of(node), "'" + key + "' is \"" + value->get() + "\"", "choose " + listed);
    }
    return value->get();
  }

  void read_sweep(const toml::table& table) {
    static const std::vector<std::string> keys{"folder", "parallel", "method", "trials",
                                               "seed",   "metric",   "mode",   "threads"};
    std::optional<std::string> mode;
    for (const auto& [key, node] : table) {
      const std::string name(key.str());
      if (name == "folder") {
        file_.options.folder = text(node, name);
      } else if (name == "parallel") {
        file_.options.parallel = static_cast<int>(integer(node, name, 1));
      } else if (name == "method") {
        file_.options.method = text(node, name, {"grid", "random"}) == "grid"
                                   ? sweep::Method::grid
                                   : sweep::Method::random;
      } else if (name == "trials") {
        file_.options.trials = integer(node, name, 1);
      } else if (name == "seed") {
        file_.options.seed = static_cast<std::uint64_t>(integer(node, name, 0));
      } else if (name == "metric") {
        file_.options.metric = text(node, name);
      } else if (name == "mode") {
        mode = text(node, name, {"max", "min"});
      } else if (name == "threads") {
        file_.options.threads = static_cast<int>(integer(node, name, 0));
      } else {
        fail(static_cast<int>(key.source().begin.line),
             "unknown key 'sweep." + name + "'" + did_you_mean(name, keys),
             "[sweep] takes folder, parallel, method, trials, seed, metric, mode and threads");
      }
    }
    file_.options.maximize =
        mode ? *mode == "max" : file_.options.metric.find("loss") == std::string::npos;
  }

  // A train option's key: known, not one the sweep sets, not given twice.
  std::string option_of(const std::string& key, int line, const std::string& section) {
    const std::string option = "--" + key;
    if (reserved_options().contains(option)) {
      fail(line, "'" + key + "' in [" + section + "] is set by the sweep for every trial",
           "remove it (each trial logs, reports and checkpoints into its own folder)");
    }
    if (train_option(option) == nullptr) {
      fail(line,
           "unknown key '" + section + "." + key + "'" + did_you_mean(key, train_option_keys()),
           "the keys of [base] and [space] are the long options of 'tandem train' without their "
           "dashes (tandem train --help)");
    }
    if (!given_.insert(option).second) {
      fail(line, "'" + key + "' is given twice (in [base] and [space]?)", "keep one");
    }
    return option;
  }

  // The option's text for a TOML value, checked as `tandem train` checks it.
  std::string option_text(const std::string& option, const toml::node& node,
                          const std::string& written) const {
    const OptionSpec& spec = *train_option(option);
    std::string value;
    if (spec.value_name.empty()) {
      const auto* flag = node.as_boolean();
      if (flag == nullptr) {
        fail(line_of(node), "'" + written + "' is a flag", "write true or false");
      }
      return flag->get() ? "true" : "false";
    }
    if (const auto* string = node.as_string()) {
      value = string->get();
    } else if (const auto* whole = node.as_integer()) {
      value = std::to_string(whole->get());
    } else if (const auto* floating = node.as_floating_point()) {
      value = sweep::value_text(floating->get());
    } else {
      fail(line_of(node),
           "'" + written + "' needs a value (" + option + " " + spec.value_name + ")",
           "write a number or a \"string\", as on the command line");
    }
    try {
      check_train_option(option, value);
    } catch (const UsageError& error) {
      fail(line_of(node), "'" + written + "': " + error.what(), "correct the value in the file");
    }
    return value;
  }

  void read_base(const toml::table& table) {
    for (const auto& [key, node] : table) {
      const std::string name(key.str());
      const std::string option = option_of(name, static_cast<int>(key.source().begin.line), "base");
      file_.base.emplace_back(option, option_text(option, node, "base." + name));
    }
  }

  sweep::Value value_of(const toml::node& node) const {
    if (const auto* flag = node.as_boolean()) return flag->get();
    if (const auto* whole = node.as_integer()) return whole->get();
    if (const auto* floating = node.as_floating_point()) return floating->get();
    return node.as_string()->get();
  }

  void read_space(const toml::table& table) {
    // In the file's order (toml++ keeps keys sorted): the first option varies slowest.
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (const auto& [key, node] : table)
      entries.emplace_back(&key, &node);
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return a.first->source().begin.line < b.first->source().begin.line;
    });
    for (const auto& [key_pointer, node_pointer] : entries) {
      const toml::key& key = *key_pointer;
      const toml::node& node = *node_pointer;
      const std::string name(key.str());
      const int line = static_cast<int>(key.source().begin.line);
      const std::string option = option_of(name, line, "space");
      sweep::Axis axis;
      axis.name = name;
      if (const toml::array* values = node.as_array()) {
        if (values->empty())
          fail(line, "'space." + name + "' lists no values", "give at least one");
        for (const toml::node& value : *values) {
          option_text(option, value, "space." + name);
          axis.values.push_back(value_of(value));
        }
      } else if (const toml::table* range = node.as_table()) {
        axis.range = read_range(*range, "space." + name, line);
        if (file_.options.method != sweep::Method::random) {
          fail(line, "'space." + name + "' is a range, which only a random search draws from",
               "list its values, or set method = \"random\" in [sweep]");
        }
        option_text(option, toml::value<double>(axis.range->low), "space." + name + ".low");
        option_text(option, toml::value<double>(axis.range->high), "space." + name + ".high");
      } else {
        fail(line, "'space." + name + "' is neither a list nor a range",
             "write " + name + " = [a, b, c] or " + name +
                 " = { low = a, high = b, scale = \"log\" }");
      }
      file_.space.push_back(std::move(axis));
    }
  }

  sweep::Range read_range(const toml::table& table, const std::string& written, int line) const {
    sweep::Range range;
    bool low = false;
    bool high = false;
    for (const auto& [key, node] : table) {
      const std::string name(key.str());
      const auto number = [&] {
        if (const auto* value = node.as_floating_point()) return value->get();
        if (const auto* value = node.as_integer()) return static_cast<double>(value->get());
        fail(line_of(node), "'" + written + "." + name + "' must be a number", "write a number");
      };
      if (name == "low") {
        range.low = number();
        low = true;
      } else if (name == "high") {
        range.high = number();
        high = true;
      } else if (name == "scale") {
        range.log = text(node, written + ".scale", {"linear", "log"}) == "log";
      } else if (name == "integer") {
        const auto* flag = node.as_boolean();
        if (flag == nullptr)
          fail(line_of(node), "'" + written + ".integer' is true or false", "fix it");
        range.integer = flag->get();
      } else {
        fail(line_of(node), "unknown key '" + written + "." + name + "'",
             "a range takes low, high, scale (\"linear\" or \"log\") and integer");
      }
    }
    if (!low || !high || !(range.low < range.high) || (range.log && !(range.low > 0))) {
      fail(line, "'" + written + "' needs low < high (and low > 0 on a log scale)",
           "write { low = 1e-4, high = 1e-2, scale = \"log\" }");
    }
    return range;
  }

  void read_halving(const toml::table& table, int line) {
    sweep::Halving halving;
    for (const auto& [key, node] : table) {
      const std::string name(key.str());
      if (name == "rungs") {
        const toml::array* rungs = node.as_array();
        halving.rungs.clear();
        if (rungs != nullptr) {
          for (const toml::node& rung : *rungs) {
            if (const auto* value = rung.as_floating_point()) halving.rungs.push_back(value->get());
            if (const auto* value = rung.as_integer()) {
              halving.rungs.push_back(static_cast<double>(value->get()));
            }
          }
        }
        bool increasing = rungs != nullptr && halving.rungs.size() == rungs->size() &&
                          !halving.rungs.empty() && halving.rungs.front() > 0 &&
                          halving.rungs.back() == 1.0;
        for (std::size_t i = 1; i < halving.rungs.size(); ++i)
          increasing = increasing && halving.rungs[i] > halving.rungs[i - 1];
        if (!increasing) {
          fail(line_of(node), "'halving.rungs' must be fractions of the full budget rising to 1",
               "write rungs = [0.25, 0.5, 1]");
        }
      } else if (name == "reduction") {
        halving.reduction = static_cast<int>(integer(node, "halving.reduction", 2));
      } else if (name == "resource") {
        file_.resource = text(node, "halving.resource", {"data", "epochs"});
      } else {
        fail(static_cast<int>(key.source().begin.line), "unknown key 'halving." + name + "'",
             "[halving] takes rungs, reduction and resource");
      }
    }
    if (file_.resource == "data" && given_.contains("--data-fraction")) {
      fail(line, "halving on the data sets --data-fraction for each rung",
           "remove data-fraction from [base]/[space], or set resource = \"epochs\"");
    }
    file_.options.halving = halving;
  }

  std::string path_;
  SweepFile file_;
  std::set<std::string> given_;
};

// What defines the sweep, for refusing a folder of another one: everything but how it runs.
std::string definition_of(const SweepFile& file) {
  nlohmann::ordered_json definition;
  for (const auto& [option, text] : file.base)
    definition["base"][option] = text;
  for (const sweep::Axis& axis : file.space) {
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (const sweep::Value& value : axis.values)
      values.push_back(sweep::value_text(value));
    definition["space"][axis.name] = values;
    if (axis.range) {
      definition["space"][axis.name] = {axis.range->low, axis.range->high, axis.range->log,
                                        axis.range->integer};
    }
  }
  definition["method"] = file.options.method == sweep::Method::grid ? "grid" : "random";
  definition["trials"] = file.options.trials;
  definition["seed"] = file.options.seed;
  definition["metric"] = file.options.metric;
  definition["maximize"] = file.options.maximize;
  if (file.options.halving) {
    definition["halving"] = {file.options.halving->rungs, file.options.halving->reduction,
                             file.resource};
  }
  return definition.dump();
}

// ---- One trial: a `tandem train` process ----

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
  explicit TrialRunner(const SweepFile& file)
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
    std::map<std::string, std::string> options(file_.base.begin(), file_.base.end());
    for (const auto& [name, value] : trial.params)
      options["--" + name] = sweep::value_text(value);
    if (file_.options.halving && trial.budget < 1.0) {
      if (file_.resource == "data") {
        options["--data-fraction"] = sweep::value_text(trial.budget);
      } else {
        const auto epochs = options.contains("--epochs") ? std::stoll(options["--epochs"]) : 10;
        options["--epochs"] = std::to_string(
            std::max<long long>(1, std::llround(static_cast<double>(epochs) * trial.budget)));
      }
    }
    // One GPU per trial where there are several.
    if (gpu_count_ > 1 && !options.contains("--strategy")) {
      options["--strategy"] = "gpu:" + std::to_string(trial.slot % gpu_count_);
    }
    for (const auto& [option, text] : options) {
      if (train_option(option)->value_name.empty()) {
        if (text == "true") args.push_back(option);
      } else {
        args.insert(args.end(), {option, text});
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

  const SweepFile& file_;
  std::string program_;
  bench::PriceTable prices_;
  int gpu_count_ = 0;
  std::mutex print_mutex_;
};

// The best trial's options as a run file for `tandem train --config`.
std::string best_run_file(const SweepFile& file, const sweep::Summary& summary) {
  const sweep::Result& best = summary.results[*summary.best];
  std::map<std::string, std::string> options(file.base.begin(), file.base.end());
  for (const auto& [name, value] : best.trial.params)
    options["--" + name] = sweep::value_text(value);
  std::string text = "# The best trial (" + best.trial.id + ", " + summary.options.metric + " " +
                     sweep::value_text(best.outcome.metrics.at(summary.options.metric)) +
                     ") of the sweep " + file.path + "; repeat it with: tandem train --config " +
                     "<this file>\n";
  for (const auto& [option, value] : options) {
    const std::string key = option.substr(2);
    if (train_option(option)->value_name.empty()) {
      if (value == "true") text += key + " = true\n";
      continue;
    }
    char* end = nullptr;
    std::strtod(value.c_str(), &end);
    const bool number = !value.empty() && *end == '\0';
    text += key + " = " + (number ? value : nlohmann::json(value).dump()) + "\n";
  }
  return text;
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
  SweepFile file = SweepFileReader(args.operands().front()).read();
  file.options.definition = definition_of(file);
  file.options.currency = bench::default_prices().currency;
  if (!file.options.metric.starts_with("val_") && !file.options.metric.starts_with("test_")) {
    std::cerr << "warning: the sweep ranks trials by " << file.options.metric
              << ", a figure of the data they train on; a validation metric (val_accuracy, with "
                 "validation-split in [base]) picks what generalises\n";
  }
  const bool validates = std::any_of(file.base.begin(), file.base.end(), [](const auto& option) {
    return option.first == "--validation-split" || option.first == "--validation-data";
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
