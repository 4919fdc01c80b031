// Run files: a RunConfig as TOML, `key = value` lines at the top level or in [tables] that group
// them; every mistake named by file, line and key, with the fix.
#include <charconv>
#include <map>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "core/text.h"
#include "io/toml_file.h"
#include "run/settings_table.h"
#include "tandem/run.h"
#include "tandem/runtime.h"

namespace tandem::run {
namespace {

// A number as TOML would write it back (the shortest text that reads as the same double).
std::string number_text(double value) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  return std::string(buffer, end);
}

class RunFileReader {
 public:
  RunFileReader(std::string path, const RunFileKeys& keys, const SettingName& name)
      : path_(std::move(path)), keys_(keys), name_(name) {}

  std::vector<FileSetting> read() {
    read_table(io::detail::read_toml_file(
                   path_, name_("config"),
                   "a run file's keys are one level deep at most ([table] then key = value)"),
               "");
    return std::move(values_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& problem, const std::string& fix) const {
    throw ConfigError(path_ + ":" + std::to_string(line) + ": " + problem + "; " + fix);
  }

  void read_table(const toml::table& table, const std::string& group) {
    for (const auto& [key, node] : table) {
      const std::string name(key.str());
      const int line = static_cast<int>(key.source().begin.line);
      const std::string written = group.empty() ? name : group + "." + name;
      if (const toml::table* inner = node.as_table()) {
        if (!group.empty()) {
          fail(line, "table [" + written + "] is nested",
               "group settings in tables one level deep, e.g. [optimizer]");
        }
        read_table(*inner, name);
        continue;
      }
      read_entry(name, written, line, node);
    }
  }

  // Whether `key` is a flag; nullopt for a key the file may not hold.
  std::optional<bool> kind_of(const std::string& key) const {
    if (const Setting* setting = find_setting(key)) return setting->value_name.empty();
    if (const auto extra = keys_.extra.find(key); extra != keys_.extra.end()) return extra->second;
    return std::nullopt;
  }

  void read_entry(const std::string& key, const std::string& written, int line,
                  const toml::node& node) {
    const std::optional<bool> is_flag = kind_of(key);
    if (!is_flag) {
      if (key == "config") {
        fail(line, "key 'config' names another run file", "a run file cannot include another");
      }
      std::vector<std::string> names = setting_keys();
      for (const auto& [extra, flag] : keys_.extra)
        names.push_back(extra);
      fail(line, "unknown key '" + written + "'" + did_you_mean(key, names),
           "the keys are " + keys_.described_as);
    }
    for (const FileSetting& earlier : values_) {
      if (earlier.key == key) {
        fail(line,
             "key '" + key + "' is given twice (also on line " + std::to_string(earlier.line) +
                 " as '" + earlier.written + "')",
             "keep one");
      }
    }
    std::string text;
    if (*is_flag) {
      const toml::value<bool>* flag = node.as_boolean();
      if (flag == nullptr) {
        fail(line, "key '" + written + "' is a flag", "write " + key + " = true (or false)");
      }
      if (!flag->get()) return;  // a flag left off
      text = "true";
    } else if (const auto* string = node.as_string()) {
      text = string->get();
    } else if (const auto* integer = node.as_integer()) {
      text = std::to_string(integer->get());
    } else if (const auto* floating = node.as_floating_point()) {
      text = number_text(floating->get());
    } else {
      const Setting* setting = find_setting(key);
      const std::string value_name = setting != nullptr ? " " + setting->value_name : "";
      fail(line, "key '" + written + "' needs a value (" + name_(key) + value_name + ")",
           "write " + key + " = a number or a \"string\", as on the command line");
    }
    try {
      if (find_setting(key) != nullptr) {
        RunConfig scratch;
        set_setting(scratch, key, text, name_);
      } else if (keys_.check_extra) {
        keys_.check_extra(key, text);
      }
    } catch (const ConfigError& error) {
      fail(line, "key '" + written + "': " + error.what(), "correct the value in the file");
    }
    values_.push_back({key, text, line, written});
  }

  std::string path_;
  const RunFileKeys& keys_;
  const SettingName& name_;
  std::vector<FileSetting> values_;
};

}  // namespace

std::vector<FileSetting> read_run_file(const std::string& path, const RunFileKeys& keys,
                                       const SettingName& name) {
  return RunFileReader(path, keys, name).read();
}

RunConfig load_run_file(const std::string& path) {
  RunConfig config;
  for (const FileSetting& setting : read_run_file(path))
    set_setting(config, setting.key, setting.text);
  return config;
}

std::string run_file_text(const RunConfig& config, const std::string& header) {
  std::string text =
      header.empty() ? "# A Tandem " + std::string(version()) +
                           " training run; repeat it with: tandem train --config <this file> (or "
                           "run::load_run_file)\n"
                     : header;
  for (const auto& [key, value] : changed_settings(config)) {
    if (key == "resume") continue;
    if (find_setting(key)->value_name.empty()) {
      if (value == "true") text += key + " = true\n";
      continue;
    }
    // Numbers stay numbers (where TOML reads the text as one); everything else is a string.
    bool numeric = false;
    try {
      const toml::table line = toml::parse("value = " + value);
      numeric = line["value"].is_number();
    } catch (const toml::parse_error&) {
      numeric = false;
    }
    text += key + " = " + (numeric ? value : nlohmann::json(value).dump()) + "\n";
  }
  return text;
}

}  // namespace tandem::run
