#include "cli/args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

namespace tandem::cli {
namespace {

std::string help_pointer(const CommandSpec& command) {
  return "; run 'tandem " + command.name + " --help' for the options";
}

const OptionSpec* find_option(const CommandSpec& command, const std::string& name) {
  for (const OptionSpec& option : command.options) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

// `text` broken at spaces into lines of at most kHelpWidth columns, continuation lines indented
// by `indent` (the first line starts there already).
std::string wrap(const std::string& text, std::size_t indent) {
  constexpr std::size_t kHelpWidth = 100;
  std::string wrapped;
  std::size_t column = indent;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (column > indent && column + 1 + word.size() > kHelpWidth) {
      wrapped += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      wrapped += ' ';
      ++column;
    }
    wrapped += word;
    column += word.size();
    start = end + 1;
  }
  return wrapped;
}

}  // namespace

std::string command_help(const CommandSpec& command) {
  std::string text = command.summary + "\n\nUsage: " + command.usage + "\n";
  if (!command.details.empty()) text += "\n" + command.details + "\n";
  std::vector<std::pair<std::string, std::string>> rows;
  for (const OptionSpec& option : command.options) {
    rows.emplace_back(option.name + (option.value_name.empty() ? "" : " " + option.value_name),
                      option.help);
  }
  rows.emplace_back("--help", "show this help and exit");
  std::size_t width = 0;
  for (const auto& row : rows)
    width = std::max(width, row.first.size());
  text += "\nOptions:\n";
  const std::size_t indent = width + 4;
  for (const auto& [left, right] : rows) {
    text += "  " + left + std::string(width - left.size() + 2, ' ') + wrap(right, indent) + "\n";
  }
  return text;
}

std::optional<std::string> ParsedArgs::value(const std::string& name) const {
  const auto found = values_.find(name);
  if (found == values_.end()) return std::nullopt;
  return found->second;
}

ParsedArgs parse_args(const CommandSpec& command, std::span<const std::string> args) {
  ParsedArgs parsed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      parsed.values_["--help"] = "";
      continue;
    }
    if (arg == "--" && command.takes_command) {
      parsed.command_.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    // A command may declare single-dash options too (`tandem launch -n 2`).
    const bool option_like =
        arg.starts_with("--") || find_option(command, arg.substr(0, arg.find('='))) != nullptr;
    if (!option_like && !command.operands.empty()) {
      parsed.operands_.push_back(arg);
      continue;
    }
    if (!option_like) {
      throw UsageError("'tandem " + command.name + "' takes no argument '" + arg + "'" +
                       (command.takes_command ? "; put the command to run after --" : "") +
                       help_pointer(command));
    }
    const std::size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    const OptionSpec* option = find_option(command, name);
    if (option == nullptr) {
      throw UsageError("unknown option '" + name + "' for 'tandem " + command.name + "'" +
                       help_pointer(command));
    }
    if (option->value_name.empty()) {
      if (equals != std::string::npos) {
        throw UsageError(name + " takes no value, got '" + arg + "'" + help_pointer(command));
      }
      parsed.values_[name] = "";
    } else if (equals != std::string::npos) {
      parsed.values_[name] = arg.substr(equals + 1);
    } else if (i + 1 < args.size()) {
      parsed.values_[name] = args[++i];
    } else {
      throw UsageError(name + " needs a value (" + name + " " + option->value_name + ")" +
                       help_pointer(command));
    }
  }
  if (!command.operands.empty() && !command.operands_optional && parsed.operands_.empty() &&
      !parsed.has("--help")) {
    throw UsageError("'tandem " + command.name + "' needs " + command.operands +
                     help_pointer(command));
  }
  return parsed;
}

}  // namespace tandem::cli
