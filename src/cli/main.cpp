// The `tandem` command: dispatches to a subcommand and turns every failure into one line on
// stderr, `tandem: error: ...`, with exit status 2 for command-line mistakes and 1 for the rest.
#include <algorithm>
#include <iostream>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tandem/error.h"
#include "tandem/runtime.h"

namespace tandem::cli {
namespace {

constexpr int kExitRuntimeError = 1;
constexpr int kExitUsageError = 2;

const std::vector<Command>& commands() {
  static const std::vector<Command> all{{train_spec, run_train},     {devices_spec, run_devices},
                                        {monitor_spec, run_monitor}, {data_spec, run_data},
                                        {predict_spec, run_predict}, {export_spec, run_export},
                                        {doctor_spec, run_doctor},   {launch_spec, run_launch},
                                        {bench_spec, run_bench},     {sweep_spec, run_sweep}};
  return all;
}

const Command* find_command(const std::string& name) {
  for (const Command& command : commands()) {
    if (command.spec().name == name) return &command;
  }
  return nullptr;
}

std::string command_names() {
  std::string names;
  for (const Command& command : commands())
    names += command.spec().name + ", ";
  return names + "help";
}

std::string top_level_help() {
  std::string text = std::string("tandem ") + version() +
                     ": train neural networks in C++ with Keras-style models on the best device "
                     "available.\n\nUsage: tandem <command> [options]\n       tandem --version\n\n"
                     "Commands:\n";
  for (const Command& command : commands()) {
    const std::string& name = command.spec().name;
    text += "  " + name + std::string(10 - name.size(), ' ') + command.spec().summary + "\n";
  }
  text +=
      "  help      Show a command's options: tandem help <command>\n\n"
      "Run 'tandem <command> --help' for a command's options.\n";
  return text;
}

UsageError unknown_command(const std::string& name) {
  return UsageError("unknown command '" + name + "'; the commands are " + command_names() +
                    " (run 'tandem --help')");
}

int run(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << top_level_help();
    throw UsageError("no command given; run 'tandem --help'");
  }
  const std::string& first = args[0];
  if (first == "--help" || first == "-h") {
    std::cout << top_level_help();
    return 0;
  }
  if (first == "--version") {
    std::cout << "tandem " << version() << "\n";
    return 0;
  }
  if (first == "help") {
    if (args.size() == 1) {
      std::cout << top_level_help();
      return 0;
    }
    if (args.size() > 2) throw UsageError("'tandem help' takes one command name");
    if (args[1] == "help") {
      std::cout << top_level_help();
      return 0;
    }
    const Command* command = find_command(args[1]);
    if (command == nullptr) throw unknown_command(args[1]);
    std::cout << command_help(command->spec());
    return 0;
  }
  if (first.starts_with("-")) {
    throw UsageError("unknown option '" + first +
                     "'; put options after the command (run 'tandem --help')");
  }
  const Command* command = find_command(first);
  if (command == nullptr) throw unknown_command(first);
  const std::span<const std::string> rest(args.begin() + 1, args.end());
  const ParsedArgs parsed = parse_args(command->spec(), rest);
  if (parsed.has("--help")) {
    std::cout << command_help(command->spec());
    return 0;
  }
  return command->run(parsed);
}

// Messages are one line each, whatever a layer below put in them.
std::string one_line(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  return message;
}

int report(const std::string& message, int status) {
  std::cout.flush();
  std::cerr << "tandem: error: " << one_line(message) << "\n";
  return status;
}

}  // namespace
}  // namespace tandem::cli

int main(int argc, char** argv) {
  using namespace tandem::cli;
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& error) {
    return report(error.what(), kExitUsageError);
  } catch (const tandem::Error& error) {
    return report(error.what(), kExitRuntimeError);
  } catch (const std::bad_alloc&) {
    return report(
        "out of memory: the system refused an allocation on the host; free some memory or ask "
        "for less (a smaller batch or model)",
        kExitRuntimeError);
  } catch (const std::exception& error) {
    return report(
        std::string("unexpected failure (a bug in Tandem; please report it): ") + error.what(),
        kExitRuntimeError);
  }
}
