#include "cli/run_file.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <vector>

#include <toml++/toml.h>

#include "core/files.h"
#include "tandem/error.h"
#include "tandem/runtime.h"

namespace tandem::cli {
namespace {

const OptionSpec* find_spec(const CommandSpec& command, const std::string& name) {
  for (const OptionSpec& option : command.options)
    if (option.name == name) return &option;
  return nullptr;
}

// Edits to turn a into b (for the closest option name).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Options a run file may not set: the file itself and the help.
bool fileable(const std::string& name) {
  return name != "--config" && name != "--help";
}

// A number as TOML would write it back (the shortest text that reads as the same double).
std::string number_text(double value) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  return std::string(buffer, end);
}

struct FileValue {
  std::string text;
  int line = 0;
  std::string key;  // as written, with its table: "optimizer.lr"
};

class RunFileReader {
 public:
  RunFileReader(const CommandSpec& command, std::string path, const OptionCheck& check)
      : command_(command), path_(std::move(path)), check_(check) {}

  std::map<std::string, FileValue> read() {
    std::vector<std::uint8_t> bytes;
    try {
      bytes = read_whole_file(path_, {.max_bytes = 1 << 20});
    } catch (const IoError& error) {
      throw UsageError(std::string("--config ") + error.what());
    }
    const std::string text(bytes.begin(), bytes.end());
    toml::table document;
    try {
      document = toml::parse(text, std::string_view(path_));
    } catch (const toml::parse_error& error) {
      fail(static_cast<int>(error.source().begin.line),
           "bad TOML (" + std::string(error.description()) + ", column " +
               std::to_string(error.source().begin.column) + ")",
           "see https://toml.io for the syntax");
    }
    read_table(document, "");
    return std::move(values_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& problem, const std::string& fix) const {
    throw UsageError(path_ + ":" + std::to_string(line) + ": " + problem + "; " + fix);
  }

  void read_table(const toml::table& table, const std::string& group) {
    for (const auto& [key, node] : table) {
      const std::string name(key.str());
      const int line = static_cast<int>(key.source().begin.line);
      const std::string written = group.empty() ? name : group + "." + name;
      if (const toml::table* inner = node.as_table()) {
        if (!group.empty()) {
          fail(line, "table [" + written + "] is nested",
               "group options in tables one level deep, e.g. [optimizer]");
        }
        read_table(*inner, name);
        continue;
      }
      read_entry(name, written, line, node);
    }
  }

  void read_entry(const std::string& key, const std::string& written, int line,
                  const toml::node& node) {
    const std::string option = "--" + key;
    const OptionSpec* spec = find_spec(command_, option);
    if (spec == nullptr || !fileable(option)) {
      if (option == "--config") {
        fail(line, "key 'config' names another run file", "a run file cannot include another");
      }
      fail(line, "unknown key '" + written + "'" + suggestion(key),
           "the keys are the long options of 'tandem " + command_.name +
               "' without their dashes (tandem " + command_.name + " --help)");
    }
    if (const auto earlier = values_.find(option); earlier != values_.end()) {
      fail(line,
           "key '" + key + "' is given twice (also on line " +
               std::to_string(earlier->second.line) + " as '" + earlier->second.key + "')",
           "keep one");
    }
    std::string text;
    if (spec->value_name.empty()) {
      const toml::value<bool>* flag = node.as_boolean();
      if (flag == nullptr) {
        fail(line, "key '" + written + "' is a flag", "write " + key + " = true (or false)");
      }
      if (!flag->get()) return;  // a flag left off
    } else if (const auto* string = node.as_string()) {
      text = string->get();
    } else if (const auto* integer = node.as_integer()) {
      text = std::to_string(integer->get());
    } else if (const auto* floating = node.as_floating_point()) {
      text = number_text(floating->get());
    } else {
      fail(line, "key '" + written + "' needs a value (" + option + " " + spec->value_name + ")",
           "write " + key + " = a number or a \"string\", as on the command line");
    }
    try {
      check_(option, text);
    } catch (const UsageError& error) {
      fail(line, "key '" + written + "': " + error.what(), "correct the value in the file");
    }
    values_[option] = {text, line, written};
  }

  std::string suggestion(const std::string& key) const {
    std::vector<std::string> names;
    for (const OptionSpec& option : command_.options) {
      if (fileable(option.name)) names.push_back(option.name.substr(2));
    }
    return did_you_mean(key, names);
  }

  const CommandSpec& command_;
  std::string path_;
  const OptionCheck& check_;
  std::map<std::string, FileValue> values_;
};

}  // namespace

std::string did_you_mean(const std::string& key, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_distance = 3;  // farther is no suggestion
  for (const std::string& name : names) {
    const std::size_t distance = edit_distance(key, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

ParsedArgs with_run_file(const CommandSpec& command, const ParsedArgs& args,
                         const OptionCheck& check) {
  const std::optional<std::string> path = args.value("--config");
  if (!path) return args;
  const std::map<std::string, FileValue> from_file = RunFileReader(command, *path, check).read();
  std::vector<std::string> merged;
  for (const OptionSpec& option : command.options) {
    std::optional<std::string> text = args.value(option.name);
    if (!text) {
      const auto found = from_file.find(option.name);
      if (found == from_file.end()) continue;
      text = found->second.text;
    }
    merged.push_back(option.value_name.empty() ? option.name : option.name + "=" + *text);
  }
  return parse_args(command, merged);
}

nlohmann::ordered_json resolved_configuration(const CommandSpec& command, const ParsedArgs& args) {
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  for (const OptionSpec& option : command.options) {
    const std::optional<std::string> text = args.value(option.name);
    if (!text || !fileable(option.name) || option.name == "--resume") continue;
    const std::string key = option.name.substr(2);
    if (option.value_name.empty()) {
      config[key] = true;
    } else {
      config[key] = *text;
    }
  }
  return config;
}

std::string resolved_run_file(const CommandSpec& command, const ParsedArgs& args) {
  std::string text = "# The options of a `tandem " + command.name + "` run (Tandem " + version() +
                     "); repeat it with: tandem " + command.name + " --config <this file>\n";
  const nlohmann::ordered_json config = resolved_configuration(command, args);
  for (const auto& [key, value] : config.items()) {
    if (value.is_boolean()) {
      text += key + " = true\n";
      continue;
    }
    // Numbers stay numbers (where TOML reads the text as one); everything else is a string.
    const std::string raw = value.get<std::string>();
    bool numeric = false;
    try {
      const toml::table line = toml::parse("value = " + raw);
      numeric = line["value"].is_number();
    } catch (const toml::parse_error&) {
      numeric = false;
    }
    text += key + " = " + (numeric ? raw : nlohmann::json(raw).dump()) + "\n";
  }
  return text;
}

}  // namespace tandem::cli
