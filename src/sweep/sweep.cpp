// sweep::run_sweep: configurations, the ASHA scheduler, the progress file and the table.
#include "tandem/sweep.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "core/files.h"
#include "io/file_io.h"
#include "tandem/error.h"
#include "tandem/runtime.h"

namespace tandem::sweep {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kStateFile = "sweep.json";
constexpr const char* kStateFormat = "tandem.sweep";
constexpr int kStateVersion = 1;
constexpr std::int64_t kMostConfigurations = 100000;

// A uniform double in [0, 1) from the generator's top 53 bits: the same on every platform
// (std::uniform_real_distribution is not).
double uniform(std::mt19937_64& generator) {
  return static_cast<double>(generator() >> 11) * 0x1.0p-53;
}

json value_json(const Value& value) {
  return std::visit([](const auto& item) { return json(item); }, value);
}

json params_json(const Params& params) {
  json object = json::object();
  for (const auto& [name, value] : params)
    object[name] = value_json(value);
  return object;
}

// NaN and infinities are not JSON: kept as null, read back as NaN.
json number_json(double value) {
  return std::isfinite(value) ? json(value) : json(nullptr);
}
double number_from_json(const json& value) {
  return value.is_number() ? value.get<double>() : std::nan("");
}

json outcome_json(const Outcome& outcome) {
  json metrics = json::object();
  for (const auto& [name, value] : outcome.metrics)
    metrics[name] = number_json(value);
  json history = json::object();
  for (const auto& [name, values] : outcome.history) {
    json series = json::array();
    for (const double value : values)
      series.push_back(number_json(value));
    history[name] = series;
  }
  return {
      {"ok", outcome.ok},           {"failure", outcome.failure},
      {"metrics", metrics},         {"history", history},
      {"seconds", outcome.seconds}, {"cost", outcome.cost ? json(*outcome.cost) : json(nullptr)}};
}

Outcome outcome_from_json(const json& value) {
  Outcome outcome;
  outcome.ok = value.at("ok").get<bool>();
  outcome.failure = value.at("failure").get<std::string>();
  for (const auto& [name, metric] : value.at("metrics").items())
    outcome.metrics[name] = number_from_json(metric);
  for (const auto& [name, series] : value.at("history").items()) {
    for (const json& item : series)
      outcome.history[name].push_back(number_from_json(item));
  }
  outcome.seconds = value.at("seconds").get<double>();
  if (!value.at("cost").is_null()) outcome.cost = value.at("cost").get<double>();
  return outcome;
}

std::string trial_id(std::int64_t index, int rung, std::int64_t configurations, bool halving) {
  const int width = std::max<int>(2, static_cast<int>(std::to_string(configurations - 1).size()));
  std::string number = std::to_string(index + 1);
  number.insert(0, static_cast<std::size_t>(std::max(0, width - static_cast<int>(number.size()))),
                '0');
  return "trial-" + number + (halving ? "/rung-" + std::to_string(rung) : "");
}

// The schedule and what happened, guarded by one mutex; written to sweep.json after every change.
class Scheduler {
 public:
  Scheduler(const std::vector<Axis>& space, const SweepOptions& options)
      : options_(options), configurations_(configurations(space, options)) {
    // One sweep a folder: a second one there would mark the first's finished trials failed and
    // rank the wrong best. The lock goes with the process, however it ends.
    require_replaceable(options.folder, Destination::folder, "the sweep folder");
    fs::create_directories(options.folder);
    lock_.emplace(options.folder);
    rungs_ = options.halving ? options.halving->rungs : std::vector<double>{1.0};
    promoted_.resize(rungs_.size());
    summary_.space = space;
    summary_.options = options;
    summary_.configurations = static_cast<std::int64_t>(configurations_.size());
    summary_.full_compute = static_cast<double>(configurations_.size());
    load();
  }

  // The next run, or nothing when none can start now.
  std::optional<Trial> next(int slot) {
    std::optional<Trial> trial;
    if (!interrupted_.empty()) {
      trial = interrupted_.front();
      interrupted_.erase(interrupted_.begin());
      trial->resume = true;
    } else if (std::optional<std::pair<std::int64_t, int>> promotion = promotable()) {
      trial = make_trial(promotion->first, promotion->second);
      promoted_[static_cast<std::size_t>(promotion->second - 1)].insert(promotion->first);
    } else if (next_configuration_ < static_cast<std::int64_t>(configurations_.size())) {
      trial = make_trial(next_configuration_++, 0);
    }
    if (!trial) return std::nullopt;
    trial->slot = slot;
    trial->threads = threads_per_trial();
    running_.push_back(*trial);
    save();
    return trial;
  }

  void finish(const Trial& trial, Outcome outcome) {
    if (outcome.ok) {
      const auto metric = outcome.metrics.find(options_.metric);
      if (metric == outcome.metrics.end()) {
        std::string names;
        for (const auto& [name, value] : outcome.metrics)
          names += (names.empty() ? "" : ", ") + name;
        outcome.ok = false;
        outcome.failure = "no " + options_.metric + " among its results (" +
                          (names.empty() ? "none" : names) + ")";
      } else if (!std::isfinite(metric->second)) {
        outcome.ok = false;
        outcome.failure = "diverged: " + options_.metric + " is " + std::to_string(metric->second);
      }
    }
    std::erase_if(running_, [&](const Trial& other) { return other.id == trial.id; });
    summary_.results.push_back({trial, std::move(outcome)});
    save();
  }

  bool idle() const { return running_.empty(); }

  Summary summary() {
    Summary summary = summary_;
    summary.compute = 0.0;
    int best_rung = -1;
    for (std::size_t i = 0; i < summary.results.size(); ++i) {
      const Result& result = summary.results[i];
      summary.compute += result.trial.budget;
      if (!result.outcome.ok) continue;
      const double value = result.outcome.metrics.at(options_.metric);
      if (result.trial.rung > best_rung ||
          (result.trial.rung == best_rung &&
           better(value, summary.results[*summary.best].outcome.metrics.at(options_.metric)))) {
        best_rung = result.trial.rung;
        summary.best = i;
      }
    }
    return summary;
  }

 private:
  bool better(double a, double b) const { return options_.maximize ? a > b : a < b; }

  int threads_per_trial() const {
    const int cores = options_.threads > 0 ? options_.threads : usable_cpu_cores();
    return std::max(1, cores / std::max(1, options_.parallel));
  }

  Trial make_trial(std::int64_t index, int rung) const {
    Trial trial;
    trial.index = index;
    trial.rung = rung;
    trial.budget = rungs_[static_cast<std::size_t>(rung)];
    trial.params = configurations_[static_cast<std::size_t>(index)];
    trial.id = trial_id(index, rung, static_cast<std::int64_t>(configurations_.size()),
                        options_.halving.has_value());
    trial.folder = (fs::path(options_.folder) / trial.id).string();
    fs::create_directories(trial.folder);
    return trial;
  }

  // How many configurations run at `rung`: all of them at the first, then 1/reduction of the
  // rung before (at least one).
  std::size_t runs_at(int rung) const {
    std::size_t count = configurations_.size();
    for (int k = 0; k < rung; ++k)
      count =
          std::max<std::size_t>(1, count / static_cast<std::size_t>(options_.halving->reduction));
    return count;
  }

  // Successive halving: once every run of a rung has finished, its best runs_at(rung + 1)
  // configurations go on to the next rung, from the highest rung down. (ASHA promotes as soon as
  // a run is in the top of what has finished so far, which starts more runs than this when
  // results arrive in rising order; waiting for the rung costs idle slots only at its end.)
  std::optional<std::pair<std::int64_t, int>> promotable() const {
    if (!options_.halving) return std::nullopt;
    for (int rung = static_cast<int>(rungs_.size()) - 2; rung >= 0; --rung) {
      std::vector<std::pair<double, std::int64_t>> finished;
      std::size_t ended = 0;
      for (const Result& result : summary_.results) {
        if (result.trial.rung != rung) continue;
        ++ended;
        if (result.outcome.ok) {
          finished.emplace_back(result.outcome.metrics.at(options_.metric), result.trial.index);
        }
      }
      if (ended < runs_at(rung)) continue;
      std::stable_sort(finished.begin(), finished.end(),
                       [&](const auto& a, const auto& b) { return better(a.first, b.first); });
      const std::size_t going_on = std::min(finished.size(), runs_at(rung + 1));
      for (std::size_t i = 0; i < going_on; ++i) {
        if (!promoted_[static_cast<std::size_t>(rung)].contains(finished[i].second)) {
          return std::pair{finished[i].second, rung + 1};
        }
      }
    }
    return std::nullopt;
  }

  std::string state_path() const { return (fs::path(options_.folder) / kStateFile).string(); }

  void save() const {
    json finished = json::array();
    for (const Result& result : summary_.results) {
      finished.push_back({{"index", result.trial.index},
                          {"rung", result.trial.rung},
                          {"params", params_json(result.trial.params)},
                          {"outcome", outcome_json(result.outcome)}});
    }
    json running = json::array();
    for (const Trial& trial : running_)
      running.push_back({{"index", trial.index}, {"rung", trial.rung}});
    for (const Trial& trial : interrupted_)
      running.push_back({{"index", trial.index}, {"rung", trial.rung}});
    const json state{{"format", kStateFormat},
                     {"format_version", kStateVersion},
                     {"definition", options_.definition},
                     {"configurations", configurations_.size()},
                     {"started", next_configuration_},
                     {"finished", finished},
                     {"running", running}};
    write_file_atomically(state_path(), state.dump(1) + "\n");
  }

  // What an earlier run of this sweep recorded: its finished runs are kept; runs that were under
  // way are started again first, told to resume.
  void load() {
    fs::create_directories(options_.folder);
    if (!fs::exists(state_path())) return;
    const std::string where = state_path();
    json state;
    try {
      const std::vector<std::uint8_t> bytes = read_whole_file(where);
      state = json::parse(bytes.begin(), bytes.end());
    } catch (const json::exception& error) {
      throw IoError(where + ": not a sweep's progress file (" + error.what() +
                    "); remove it to start the sweep afresh");
    }
    try {
      if (state.at("format") != kStateFormat) {
        throw IoError(where + ": not a sweep's progress file; give the sweep a folder of its own");
      }
      if (state.at("definition").get<std::string>() != options_.definition) {
        throw InvalidArgument(options_.folder +
                              " holds the progress of a different sweep (its definition "
                              "changed since); give this one a new folder, or restore the "
                              "definition to resume that one");
      }
      if (state.at("configurations").get<std::size_t>() != configurations_.size()) {
        throw InvalidArgument(where + ": the sweep had " + state.at("configurations").dump() +
                              " configurations, now " + std::to_string(configurations_.size()) +
                              "; give it a new folder");
      }
      next_configuration_ = state.at("started").get<std::int64_t>();
      for (const json& item : state.at("finished")) {
        const Trial trial =
            make_trial(item.at("index").get<std::int64_t>(), item.at("rung").get<int>());
        if (trial.rung > 0) promoted_[static_cast<std::size_t>(trial.rung - 1)].insert(trial.index);
        summary_.results.push_back({trial, outcome_from_json(item.at("outcome"))});
      }
      for (const json& item : state.at("running")) {
        Trial trial = make_trial(item.at("index").get<std::int64_t>(), item.at("rung").get<int>());
        if (trial.rung > 0) promoted_[static_cast<std::size_t>(trial.rung - 1)].insert(trial.index);
        interrupted_.push_back(std::move(trial));
      }
    } catch (const json::exception& error) {
      throw IoError(where + ": a member is missing or mistyped (" + error.what() +
                    "); remove it to start the sweep afresh");
    }
  }

  SweepOptions options_;
  std::vector<Params> configurations_;
  std::vector<double> rungs_;
  std::vector<std::set<std::int64_t>> promoted_;  // per rung: configurations gone on from it
  std::int64_t next_configuration_ = 0;
  std::vector<Trial> running_;
  std::vector<Trial> interrupted_;
  Summary summary_;
  std::optional<io::detail::DirectoryLock> lock_;  // the sweep folder's, while the sweep runs
};

void check_options(const SweepOptions& options) {
  if (options.folder.empty()) throw InvalidArgument("sweep: give the sweep a folder");
  if (options.parallel < 1) {
    throw InvalidArgument("sweep: parallel must be at least 1, got " +
                          std::to_string(options.parallel));
  }
  if (options.metric.empty()) throw InvalidArgument("sweep: name the metric that ranks trials");
  if (options.halving) {
    const std::vector<double>& rungs = options.halving->rungs;
    bool increasing = !rungs.empty() && rungs.front() > 0.0 && rungs.back() == 1.0;
    for (std::size_t i = 1; i < rungs.size(); ++i)
      increasing = increasing && rungs[i] > rungs[i - 1];
    if (!increasing) {
      throw InvalidArgument(
          "sweep: halving rungs must increase from above 0 to 1 (the full budget), e.g. "
          "[0.25, 0.5, 1]");
    }
    if (options.halving->reduction < 2) {
      throw InvalidArgument("sweep: halving reduction must be at least 2, got " +
                            std::to_string(options.halving->reduction));
    }
  }
}

std::string padded(const std::string& text, std::size_t width) {
  return text + std::string(width > text.size() ? width - text.size() : 0, ' ');
}

std::string metric_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", value);
  return text;
}

}  // namespace

std::string value_text(const Value& value) {
  return std::visit(
      [](const auto& item) -> std::string {
        using T = std::decay_t<decltype(item)>;
        if constexpr (std::is_same_v<T, bool>) {
          return item ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          return std::to_string(item);
        } else if constexpr (std::is_same_v<T, double>) {
          char text[32];
          for (int digits = 1; digits <= 17; ++digits) {
            std::snprintf(text, sizeof text, "%.*g", digits, item);
            if (std::strtod(text, nullptr) == item) break;
          }
          return text;
        } else {
          return item;
        }
      },
      value);
}

std::vector<Params> configurations(const std::vector<Axis>& space, const SweepOptions& options) {
  std::set<std::string> names;
  for (const Axis& axis : space) {
    if (axis.name.empty()) throw InvalidArgument("sweep: an axis without a name");
    if (!names.insert(axis.name).second) {
      throw InvalidArgument("sweep: '" + axis.name + "' is varied twice; give it one list");
    }
    if (axis.values.empty() && !axis.range) {
      throw InvalidArgument("sweep: '" + axis.name + "' has no values; give a list or a range");
    }
    if (axis.range) {
      if (options.method == Method::grid) {
        throw InvalidArgument("sweep: '" + axis.name +
                              "' is a range, which only a random search draws from; list its "
                              "grid values, or use method random");
      }
      const Range& range = *axis.range;
      if (!(range.low < range.high) || (range.log && !(range.low > 0.0))) {
        throw InvalidArgument("sweep: '" + axis.name +
                              "': a range needs low < high (and low > 0 on a log scale)");
      }
    }
  }
  std::vector<Params> result;
  if (options.method == Method::grid) {
    result.emplace_back();
    for (const Axis& axis : space) {
      std::vector<Params> expanded;
      for (const Params& partial : result) {
        for (const Value& value : axis.values) {
          Params params = partial;
          params[axis.name] = value;
          expanded.push_back(std::move(params));
        }
      }
      result = std::move(expanded);
      if (static_cast<std::int64_t>(result.size()) > kMostConfigurations) {
        throw InvalidArgument("sweep: the grid has more than " +
                              std::to_string(kMostConfigurations) +
                              " configurations; use fewer values or a random search");
      }
    }
    return result;
  }
  if (options.trials <= 0 || options.trials > kMostConfigurations) {
    throw InvalidArgument("sweep: a random search needs trials between 1 and " +
                          std::to_string(kMostConfigurations));
  }
  std::mt19937_64 generator(options.seed);
  for (std::int64_t trial = 0; trial < options.trials; ++trial) {
    Params params;
    for (const Axis& axis : space) {
      const double u = uniform(generator);
      if (!axis.range) {
        const auto pick =
            std::min(axis.values.size() - 1,
                     static_cast<std::size_t>(u * static_cast<double>(axis.values.size())));
        params[axis.name] = axis.values[pick];
        continue;
      }
      const Range& range = *axis.range;
      const double value =
          range.log
              ? std::exp(std::log(range.low) + u * (std::log(range.high) - std::log(range.low)))
              : range.low + u * (range.high - range.low);
      if (range.integer) {
        params[axis.name] = static_cast<std::int64_t>(std::llround(value));
      } else {
        params[axis.name] = value;
      }
    }
    result.push_back(std::move(params));
  }
  return result;
}

Summary run_sweep(const std::vector<Axis>& space, const SweepOptions& options,
                  const std::function<Outcome(const Trial&)>& run_trial) {
  check_options(options);
  Scheduler scheduler(space, options);
  std::mutex mutex;
  std::condition_variable changed;
  std::exception_ptr stopped;
  const auto worker = [&](int slot) {
    std::unique_lock lock(mutex);
    while (true) {
      std::optional<Trial> trial;
      // The scheduler writes the progress file as it hands out a trial: a failure to (a full
      // disk) stops the sweep, as one recording a result does.
      changed.wait(lock, [&] {
        if (stopped) return true;
        try {
          trial = scheduler.next(slot);
        } catch (...) {
          stopped = std::current_exception();
          return true;
        }
        return trial.has_value() || scheduler.idle();
      });
      if (!trial) {
        changed.notify_all();
        return;
      }
      lock.unlock();
      Outcome outcome;
      try {
        outcome = run_trial(*trial);
      } catch (const std::exception& error) {
        outcome.ok = false;
        outcome.failure = error.what();
      }
      lock.lock();
      try {
        scheduler.finish(*trial, std::move(outcome));
      } catch (...) {
        stopped = std::current_exception();
      }
      changed.notify_all();
    }
  };
  std::vector<std::thread> workers;
  for (int slot = 0; slot < options.parallel; ++slot)
    workers.emplace_back(worker, slot);
  for (std::thread& thread : workers)
    thread.join();
  if (stopped) std::rethrow_exception(stopped);
  return scheduler.summary();
}

std::string Summary::table() const {
  std::vector<std::string> metric_names{options.metric};
  std::set<std::string> others;
  for (const Result& result : results) {
    for (const auto& [name, value] : result.outcome.metrics) {
      if (name != options.metric) others.insert(name);
    }
  }
  metric_names.insert(metric_names.end(), others.begin(), others.end());
  std::vector<std::string> header{"trial"};
  for (const Axis& axis : space)
    header.push_back(axis.name);
  if (options.halving) header.push_back("budget");
  header.push_back("status");
  header.insert(header.end(), metric_names.begin(), metric_names.end());
  header.push_back("seconds");
  header.push_back("cost (" + options.currency + ")");
  std::vector<std::vector<std::string>> rows{header};
  std::vector<std::size_t> order(results.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return results[a].trial.id < results[b].trial.id;
  });
  for (const std::size_t i : order) {
    const Result& result = results[i];
    std::vector<std::string> row{result.trial.id + (best == i ? " *" : "")};
    for (const Axis& axis : space) {
      const auto value = result.trial.params.find(axis.name);
      row.push_back(value == result.trial.params.end() ? "" : value_text(value->second));
    }
    if (options.halving) row.push_back(value_text(result.trial.budget));
    row.push_back(result.outcome.ok ? "done" : "failed: " + result.outcome.failure);
    for (const std::string& name : metric_names) {
      const auto metric = result.outcome.metrics.find(name);
      row.push_back(metric == result.outcome.metrics.end() ? "-" : metric_text(metric->second));
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", result.outcome.seconds);
    row.push_back(seconds);
    char cost[32];
    std::snprintf(cost, sizeof cost, "%.3g", result.outcome.cost.value_or(0.0));
    row.push_back(result.outcome.cost ? cost : "-");
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> widths(header.size(), 0);
  for (const auto& row : rows) {
    for (std::size_t column = 0; column < row.size(); ++column)
      widths[column] = std::max(widths[column], row[column].size());
  }
  std::ostringstream text;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t column = 0; column < row.size(); ++column)
      line += padded(row[column], column + 1 < row.size() ? widths[column] + 2 : 0);
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    text << line << "\n";
  }
  if (best) {
    text << "best: " << results[*best].trial.id << ", " << options.metric << " "
         << metric_text(results[*best].outcome.metrics.at(options.metric)) << "\n";
  }
  char line[96];
  std::snprintf(line, sizeof line, "compute: %.2f full trials of %lld configurations (%.0f%%)",
                compute, static_cast<long long>(configurations),
                full_compute > 0 ? 100.0 * compute / full_compute : 0.0);
  text << line << "\n";
  return text.str();
}

}  // namespace tandem::sweep
