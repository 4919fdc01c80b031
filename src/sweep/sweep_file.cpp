// Sweep files (tandem sweep SWEEP.toml): [sweep] how it runs, [base] the settings every trial
// shares, [space] what varies, [halving] successive halving; every mistake named by file, line
// and key, with the fix.
#include <algorithm>
#include <filesystem>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "core/text.h"
#include "io/toml_file.h"
#include "tandem/error.h"
#include "tandem/sweep.h"

namespace tandem::sweep {
namespace {

namespace fs = std::filesystem;

class SweepFileReader {
 public:
  SweepFileReader(std::string path, const SettingKeys& settings)
      : path_(std::move(path)), settings_(settings) {}

  SweepFile read() {
    const toml::table document = io::detail::read_toml_file(
        path_, "", "a sweep file's keys are in its four sections, a range one table deeper");
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
    if (file_.options.method == Method::random && file_.options.trials == 0) {
      fail(1, "a random search needs its number of trials", "add trials = N to [sweep]");
    }
    return std::move(file_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& problem, const std::string& fix) const {
    throw ConfigError(path_ + ":" + std::to_string(line) + ": " + problem + "; " + fix);
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
        file_.options.method =
            text(node, name, {"grid", "random"}) == "grid" ? Method::grid : Method::random;
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

  // A setting's key: known, not one the sweep sets, not given twice.
  std::string setting_of(const std::string& key, int line, const std::string& section) {
    if (settings_.reserved.contains(key)) {
      fail(line, "'" + key + "' in [" + section + "] is set by the sweep for every trial",
           "remove it (each trial logs, reports and checkpoints into its own folder)");
    }
    if (!settings_.is_flag(key)) {
      fail(line, "unknown key '" + section + "." + key + "'" + did_you_mean(key, settings_.keys),
           "the keys of [base] and [space] are " + settings_.described_as);
    }
    if (!given_.insert(key).second) {
      fail(line, "'" + key + "' is given twice (in [base] and [space]?)", "keep one");
    }
    return key;
  }

  // The setting's text for a TOML value, checked as a run checks it.
  std::string setting_text(const std::string& key, const toml::node& node,
                           const std::string& written) const {
    std::string value;
    if (*settings_.is_flag(key)) {
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
      value = value_text(floating->get());
    } else {
      fail(line_of(node), "'" + written + "' needs a value",
           "write a number or a \"string\", as on the command line");
    }
    try {
      settings_.check(key, value);
    } catch (const ConfigError& error) {
      fail(line_of(node), "'" + written + "': " + error.what(), "correct the value in the file");
    }
    return value;
  }

  void read_base(const toml::table& table) {
    for (const auto& [key, node] : table) {
      const std::string name(key.str());
      const std::string setting =
          setting_of(name, static_cast<int>(key.source().begin.line), "base");
      file_.base.emplace_back(setting, setting_text(setting, node, "base." + name));
    }
  }

  Value value_of(const toml::node& node) const {
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
      const std::string setting = setting_of(name, line, "space");
      Axis axis;
      axis.name = name;
      if (const toml::array* values = node.as_array()) {
        if (values->empty())
          fail(line, "'space." + name + "' lists no values", "give at least one");
        for (const toml::node& value : *values) {
          setting_text(setting, value, "space." + name);
          axis.values.push_back(value_of(value));
        }
      } else if (const toml::table* range = node.as_table()) {
        axis.range = read_range(*range, "space." + name, line);
        if (file_.options.method != Method::random) {
          fail(line, "'space." + name + "' is a range, which only a random search draws from",
               "list its values, or set method = \"random\" in [sweep]");
        }
        setting_text(setting, toml::value<double>(axis.range->low), "space." + name + ".low");
        setting_text(setting, toml::value<double>(axis.range->high), "space." + name + ".high");
      } else {
        fail(line, "'space." + name + "' is neither a list nor a range",
             "write " + name + " = [a, b, c] or " + name +
                 " = { low = a, high = b, scale = \"log\" }");
      }
      file_.space.push_back(std::move(axis));
    }
  }

  Range read_range(const toml::table& table, const std::string& written, int line) const {
    Range range;
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
    Halving halving;
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
    if (file_.resource == "data" && given_.contains("data-fraction")) {
      fail(line, "halving on the data sets data-fraction for each rung",
           "remove data-fraction from [base]/[space], or set resource = \"epochs\"");
    }
    file_.options.halving = halving;
  }

  std::string path_;
  const SettingKeys& settings_;
  SweepFile file_;
  std::set<std::string> given_;
};

}  // namespace

SweepFile read_sweep_file(const std::string& path, const SettingKeys& settings) {
  SweepFile file = SweepFileReader(path, settings).read();
  file.options.definition = sweep_definition(file);
  return file;
}

std::string sweep_definition(const SweepFile& file) {
  nlohmann::ordered_json definition;
  // Keyed as the sweeps before run-file keys were (with their dashes), so that their folders
  // resume.
  for (const auto& [key, text] : file.base)
    definition["base"]["--" + key] = text;
  for (const Axis& axis : file.space) {
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (const Value& value : axis.values)
      values.push_back(value_text(value));
    definition["space"][axis.name] = values;
    if (axis.range) {
      definition["space"][axis.name] = {axis.range->low, axis.range->high, axis.range->log,
                                        axis.range->integer};
    }
  }
  definition["method"] = file.options.method == Method::grid ? "grid" : "random";
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

}  // namespace tandem::sweep
