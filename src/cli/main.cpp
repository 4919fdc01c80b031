// The `tandem` command: dispatches to a subcommand and turns every failure into one line on
// stderr, `tandem: error: ...`, with exit status 2 for command-line mistakes and 1 for the rest.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
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

// A command's status once its output is known to have reached standard output: a pipe closed
// early (`tandem train | head -1`), a closed descriptor or a full disk fail the writes there
// (SIGPIPE is ignored, so the command went on to the end: the model saved, the report written),
// and the status says the output was lost.
int with_output_checked(int status, bool output_closed) {
  std::cout.flush();
  if (std::cout && !output_closed) return status;
  std::cerr << "tandem: error: the output could not all be written to standard output (a pipe "
               "closed early, the descriptor closed, or a full disk); the command itself "
               "finished: its files (reports, saved models, checkpoints) are written\n";
  return status == 0 ? kExitRuntimeError : status;
}

}  // namespace
}  // namespace tandem::cli

int main(int argc, char** argv) {
  using namespace tandem::cli;
  // A reader that goes away (`tandem train ... | head -1`) must not kill a run before it saves:
  // writes to the pipe fail instead, and the end of the command says so.
  std::signal(SIGPIPE, SIG_IGN);
  // A closed standard descriptor would be the next file opened (a report being written as fd 1
  // would get the printing): /dev/null stands in, and a closed output is said at the end.
  const bool output_closed = ::fcntl(STDOUT_FILENO, F_GETFD) == -1;
  for (const int descriptor : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (::fcntl(descriptor, F_GETFD) == -1) {
      const int null = ::open("/dev/null", O_RDWR);
      if (null >= 0 && null != descriptor) {
        ::dup2(null, descriptor);
        ::close(null);
      }
    }
  }
  try {
    return with_output_checked(run(std::vector<std::string>(argv + 1, argv + argc)), output_closed);
  } catch (const UsageError& error) {
    return report(error.what(), kExitUsageError);
  } catch (const tandem::Error& error) {
    return report(error.what(), kExitRuntimeError);
  } catch (const std::bad_alloc&) {
    return report(
        "out of memory: the system refused an allocation on the host; free some memory or ask "
        "for less (a smaller batch or model)",
        kExitRuntimeError);
  } catch (const std::filesystem::filesystem_error& error) {
    // A path the user gave that the system refused (a symbolic link loop, a name too long, a
    // folder that may not be read or written): the user's to fix, not a bug.
    const std::string second = error.path2().empty() ? "" : " and " + error.path2().string();
    return report(error.path1().string() + second + ": " + error.code().message() +
                      "; check the path and its permissions, or pass another",
                  kExitRuntimeError);
  } catch (const std::exception& error) {
    return report(
        std::string("unexpected failure (a bug in Tandem; please report it): ") + error.what(),
        kExitRuntimeError);
  }
}
