// `tandem monitor -- CMD ARGS`: runs a command and samples its CPU, memory and the GPUs while it
// runs; the samples go to a CSV and/or TensorBoard, a summary to stderr. Exits with the
// command's status.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli/commands.h"
#include "tandem/observe.h"

extern char** environ;

namespace tandem::cli {
namespace {

// The running command, for the signal handler that passes SIGINT and SIGTERM on to it.
std::atomic<pid_t> running_child{0};

void forward_signal(int signal_number) {
  const pid_t child = running_child.load();
  if (child > 0) kill(child, signal_number);
}

// Installs forward_signal for SIGINT and SIGTERM while alive, restoring the old handlers after.
class ForwardSignals {
 public:
  ForwardSignals() {
    struct sigaction action {};
    action.sa_handler = forward_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_interrupt_);
    sigaction(SIGTERM, &action, &old_terminate_);
  }
  ~ForwardSignals() {
    sigaction(SIGINT, &old_interrupt_, nullptr);
    sigaction(SIGTERM, &old_terminate_, nullptr);
  }
  ForwardSignals(const ForwardSignals&) = delete;
  ForwardSignals& operator=(const ForwardSignals&) = delete;

 private:
  struct sigaction old_interrupt_ {};
  struct sigaction old_terminate_ {};
};

pid_t spawn(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const std::string& arg : command)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t child = 0;
  const int error = posix_spawnp(&child, argv[0], nullptr, nullptr, argv.data(), environ);
  if (error != 0) {
    throw Error("cannot run '" + command[0] + "': " + std::strerror(error) +
                "; check the command's name and that it is on PATH");
  }
  return child;
}

// Waits until `child` has exited but leaves it unreaped, so that its last CPU times can still be
// read from /proc.
void wait_for_exit(pid_t child) {
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) != 0) {
    if (errno != EINTR)
      throw Error(std::string("waiting for the command failed: ") + std::strerror(errno));
  }
}

// The command's exit status as a shell reports it: its code, or 128 + the signal that ended it.
int reap(pid_t child) {
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR)
      throw Error(std::string("waiting for the command failed: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

struct MonitorOptions {
  observe::ResourceMonitorOptions monitor;
  std::string logdir;  // empty: no TensorBoard scalars
  bool quiet = false;
};

const OptionTable<MonitorOptions>& monitor_options() {
  using O = MonitorOptions;
  static const OptionTable<O> table({
      {"--interval", "S", "seconds between samples (default 1)",
       [](O& options, const std::string& option, const std::string& text) {
         options.monitor.interval_seconds = parse_positive_number(option, text);
       }},
      {"--csv", "FILE", "write every sample as a CSV row",
       [](O& options, const std::string& option, const std::string& text) {
         options.monitor.csv_path = parse_output_path(option, text);
       }},
      {"--logdir", "DIR", "write the samples as TensorBoard scalars (monitor/*) to DIR",
       into(&O::logdir, parse_directory)},
      {"--quiet", "", "no summary", flag(&O::quiet)},
  });
  return table;
}

}  // namespace

const CommandSpec& monitor_spec() {
  static const CommandSpec spec{
      "monitor",
      "Run a command and record its CPU, memory and GPU use",
      "tandem monitor [options] -- COMMAND [ARGS...]",
      "Samples the command and every process it starts: CPU time (in percent of one core),\n"
      "resident memory, the machine's CPU use and, through NVIDIA's NVML where a driver is\n"
      "installed, each GPU's utilisation, memory, power and temperature. Prints a summary to\n"
      "stderr when the command ends and exits with the command's status.",
      monitor_options().specs(),
      /*takes_command=*/true,
  };
  return spec;
}

int run_monitor(const ParsedArgs& args) {
  const std::vector<std::string>& command = args.command();
  if (command.empty()) {
    throw UsageError(
        "no command to monitor; give it after --, e.g. tandem monitor -- tandem train");
  }
  const MonitorOptions given = monitor_options().read(args);
  observe::ResourceMonitorOptions options = given.monitor;
  if (!given.logdir.empty())
    options.writer = std::make_shared<observe::SummaryWriter>(given.logdir);

  const ForwardSignals forwarding;
  const pid_t child = spawn(command);
  running_child.store(child);
  options.pid = static_cast<int>(child);
  std::unique_ptr<observe::ResourceMonitor> monitor;
  try {
    monitor = std::make_unique<observe::ResourceMonitor>(options);
    monitor->start();
  } catch (...) {
    kill(child, SIGTERM);
    reap(child);
    throw;
  }
  wait_for_exit(child);
  monitor->stop();
  const int status = reap(child);
  running_child.store(0);
  if (!given.quiet) {
    std::cerr << observe::monitor_summary_line(monitor->summary(), monitor->gpu_status()) << "\n";
  }
  return status;
}

}  // namespace tandem::cli
