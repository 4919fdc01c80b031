#pragma once
// Command-line parsing for the `tandem` subcommands: declared options, `--name value` or
// `--name=value`, `--help` on every command, and typed value checks that say what was wrong.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace tandem::cli {

// A mistake on the command line; `tandem` prints it on one line and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

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

// Typed values; each throws UsageError naming the option, the text and what is expected.
std::int64_t parse_positive_integer(const std::string& option, const std::string& text);
std::uint64_t parse_unsigned_integer(const std::string& option, const std::string& text);
double parse_positive_number(const std::string& option, const std::string& text);
// A number in [0, 1).
double parse_fraction(const std::string& option, const std::string& text);

}  // namespace tandem::cli
