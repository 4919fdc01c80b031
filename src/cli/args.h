#pragma once
// Command-line parsing for the `tandem` subcommands: declared options, `--name value` or
// `--name=value`, `--help` on every command, and typed value checks that say what was wrong.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/parse.h"
#include "tandem/error.h"

namespace tandem::cli {

// A mistake on the command line, or in a setting it names; `tandem` prints it on one line and
// exits with status 2. The library's ConfigError: the layers below say the same of a setting.
using UsageError = ConfigError;

struct OptionSpec {
  std::string name;        // "--epochs"
  std::string value_name;  // "N"; empty for a flag that takes no value
  std::string help;        // one line; defaults belong here, e.g. "(default 10)"
};

struct CommandSpec {
  std::string name;     // "train"
  std::string summary;  // one line for `tandem --help`
  std::string usage;    // "tandem train [options]"
  std::string details;  // paragraphs after the usage line; may be empty
  std::vector<OptionSpec> options;
  // Whether the command runs another one given after "--" (`tandem monitor -- CMD ARGS`).
  bool takes_command = false;
  // The plain arguments the command takes, e.g. "INPUT..." (`tandem predict --model DIR
  // INPUT...`): one or more; empty when it takes none.
  std::string operands = {};
  // Whether the operands may be left out (`tandem bench` runs; `tandem bench compare A B`).
  bool operands_optional = false;
};

// The full `--help` text of a command, its options aligned in a column.
std::string command_help(const CommandSpec& command);

class ParsedArgs {
 public:
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  // The value given for `name`, if any (the last one when repeated).
  std::optional<std::string> value(const std::string& name) const;
  // What follows "--" for a command that takes one; empty otherwise.
  const std::vector<std::string>& command() const { return command_; }
  // The plain arguments of a command with operands, in order.
  const std::vector<std::string>& operands() const { return operands_; }

 private:
  friend ParsedArgs parse_args(const CommandSpec&, std::span<const std::string>);
  std::map<std::string, std::string> values_;  // flags map to ""
  std::vector<std::string> command_;
  std::vector<std::string> operands_;
};

// Throws UsageError for an unknown option, a missing value, a value given to a flag or a
// positional argument the command does not take. `--help` is always accepted.
ParsedArgs parse_args(const CommandSpec& command, std::span<const std::string> args);

// The typed values of core/parse.h (parse_positive_integer, parse_choice, ...) read options.

// One option of a command, declared once: its name, the value it takes, its help line and how
// its text is read into the command's `Options` (typed and checked, naming the option in every
// error). An OptionTable holds a command's options in help order; its specs() go into the
// CommandSpec and read() turns the parsed arguments into the command's options, so adding an
// option is one entry in the table (and the field it fills).
template <typename Options>
struct Option {
  std::string name;        // "--epochs"
  std::string value_name;  // "N"; empty for a flag
  std::string help;        // one line; defaults belong here, e.g. "(default 10)"
  // Reads the text given (for a flag: "") into `options`; throws UsageError naming `option`.
  std::function<void(Options& options, const std::string& option, const std::string& text)> read;
};

template <typename Options>
class OptionTable {
 public:
  using Check = std::function<void(Options&, const ParsedArgs&)>;
  // `checks`: rules across options (one that needs another, two that contradict), run after
  // every option given is read; they may also fill in what the options given imply.
  explicit OptionTable(std::vector<Option<Options>> options, std::vector<Check> checks = {})
      : options_(std::move(options)), checks_(std::move(checks)) {}

  // Another table's options (a group shared by commands, read into `member`), after these.
  template <typename Group>
  OptionTable& add(const OptionTable<Group>& group, Group Options::*member) {
    for (const Option<Group>& option : group.options_) {
      options_.push_back({option.name, option.value_name, option.help,
                          [member, read = option.read](Options& options, const std::string& name,
                                                       const std::string& text) {
                            read(options.*member, name, text);
                          }});
    }
    for (const auto& check : group.checks_) {
      checks_.push_back([member, check](Options& options, const ParsedArgs& args) {
        check(options.*member, args);
      });
    }
    return *this;
  }
  // One more check.
  OptionTable& check(Check rule) {
    checks_.push_back(std::move(rule));
    return *this;
  }

  // The declarations for the help and the parser.
  std::vector<OptionSpec> specs() const {
    std::vector<OptionSpec> specs;
    for (const Option<Options>& option : options_)
      specs.push_back({option.name, option.value_name, option.help});
    return specs;
  }
  // Reads one option's text over the defaults, alone (no checks across options): whether the
  // text is good for it. Throws UsageError as reading it with the others would.
  void read_one(const std::string& name, const std::string& text) const {
    Options options;
    for (const Option<Options>& option : options_)
      if (option.name == name) option.read(options, option.name, text);
  }
  // The options given in `args` read over the defaults, in the table's order, then the checks.
  Options read(const ParsedArgs& args) const {
    Options options;
    for (const Option<Options>& option : options_) {
      if (const std::optional<std::string> text = args.value(option.name)) {
        option.read(options, option.name, *text);
      }
    }
    for (const auto& check : checks_)
      check(options, args);
    return options;
  }

 private:
  template <typename>
  friend class OptionTable;
  std::vector<Option<Options>> options_;
  std::vector<Check> checks_;
};

// Readers for Option::read: `field` set from the text by `parse(option, text)` (one of the typed
// values above, or a function of the same shape), to the text as given, or to true for a flag.
template <typename Options, typename T, typename Parse>
auto into(T Options::*field, Parse parse) {
  return [field, parse](Options& options, const std::string& option, const std::string& text) {
    options.*field = static_cast<T>(parse(option, text));
  };
}
template <typename Options>
auto into(std::string Options::*field) {  // the text as given
  return [field](Options& options, const std::string&, const std::string& text) {
    options.*field = text;
  };
}
// A parse for into(): one of `choices` (parse_choice).
inline auto one_of(std::vector<std::string> choices, std::string what) {
  return [choices = std::move(choices), what = std::move(what)](const std::string& option,
                                                                const std::string& text) {
    return parse_choice(option, text, choices, what);
  };
}
template <typename Options>
auto flag(bool Options::*field) {
  return
      [field](Options& options, const std::string&, const std::string&) { options.*field = true; };
}

}  // namespace tandem::cli
