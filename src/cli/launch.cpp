// `tandem launch -n N -- COMMAND`: N workers of a command under Open MPI's mpirun, which starts
// them, wires them together and stops them all when one fails. This process becomes mpirun
// (exec), so signals reach it directly and its exit status is the job's.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "tandem/distribute.h"
#include "tandem/error.h"

extern char** environ;

namespace tandem::cli {
namespace {

// `name` as the shell would find it on PATH, or "" when it is not there.
std::string find_on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string directories = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= directories.size()) {
    const std::size_t end = std::min(directories.find(':', start), directories.size());
    const std::string directory = directories.substr(start, end - start);
    const std::string candidate = (directory.empty() ? "." : directory) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// This very binary, so that every worker runs the same Tandem as the launcher.
std::string own_executable() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? "tandem" : self.string();
}

std::string shell_word(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789-_./=:,") == std::string::npos) {
    return word;
  }
  std::string quoted = "'";
  for (const char c : word)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

struct LaunchOptions {
  std::int64_t workers = 0;  // 0: not given
  std::string hosts;
  std::string hostfile;
  std::string mpirun = "mpirun";
  bool dry_run = false;
};

const OptionTable<LaunchOptions>& launch_options() {
  using O = LaunchOptions;
  static const OptionTable<O> table(
      {
          {"-n", "N", "the number of workers (processes)",
           [](O& options, const std::string& option, const std::string& text) {
             options.workers = parse_positive_integer(option, text);
             if (options.workers > INT_MAX) {
               throw UsageError(option + " " + text + " is too many workers");
             }
           }},
          {"--hosts", "LIST",
           "comma-separated hosts, each host or host:slots (default: this machine)",
           [](O& options, const std::string& option, const std::string& text) {
             if (text.empty()) throw UsageError(option + " needs a list of hosts, got ''");
             options.hosts = text;
           }},
          {"--hostfile", "FILE", "an Open MPI hostfile listing the hosts and their slots",
           [](O& options, const std::string& option, const std::string& text) {
             if (!std::filesystem::is_regular_file(text)) {
               throw UsageError(option + " " + text + " does not exist; give an Open MPI hostfile");
             }
             options.hostfile = text;
           }},
          {"--mpirun", "PATH", "the mpirun to run (default: mpirun on PATH)", into(&O::mpirun)},
          {"--dry-run", "", "print the mpirun command instead of running it", flag(&O::dry_run)},
      },
      {[](O& options, const ParsedArgs&) {
        if (options.workers == 0) {
          throw UsageError("tandem launch needs -n N, the number of workers");
        }
        if (!options.hosts.empty() && !options.hostfile.empty()) {
          throw UsageError("--hosts and --hostfile both list the hosts; pass one of them");
        }
      }});
  return table;
}

}  // namespace

const CommandSpec& launch_spec() {
  static const CommandSpec spec{
      "launch",
      "Start N workers of a command under mpirun, for --strategy multi-worker",
      "tandem launch -n N [options] -- COMMAND [ARGS...]",
      "Runs COMMAND as N worker processes through Open MPI's mpirun, which starts them (on this\n"
      "machine, or on the hosts given), connects them and stops all of them when one fails.\n"
      "A COMMAND of `tandem` runs this same binary on every worker, e.g.\n"
      "  tandem launch -n 2 -- tandem train --strategy multi-worker\n"
      "Adds what Open MPI needs: --oversubscribe when N exceeds this machine's cores (and no\n"
      "hosts are given), --allow-run-as-root when run as root, and -x for every TANDEM_*\n"
      "variable and OMP_NUM_THREADS so remote workers get them. Exits with mpirun's status.",
      launch_options().specs(),
      /*takes_command=*/true,
      /*operands=*/"",
  };
  return spec;
}

int run_launch(const ParsedArgs& args) {
  const LaunchOptions options = launch_options().read(args);
  const std::int64_t workers = options.workers;
  std::vector<std::string> command = args.command();
  if (command.empty()) {
    throw UsageError(
        "no command to launch; give it after --, e.g. tandem launch -n 2 -- tandem "
        "train --strategy multi-worker");
  }
  if (command.front() == "tandem") command.front() = own_executable();

  const std::string& requested = options.mpirun;
  const std::string mpirun = find_on_path(requested);
  if (mpirun.empty()) {
    throw Error(requested + " not found" +
                (requested.find('/') == std::string::npos ? " on PATH" : "") +
                ": install Open MPI (openmpi-bin, in scripts/install-deps.sh) or give --mpirun "
                "PATH");
  }

  std::vector<std::string> argv{mpirun, "-np", std::to_string(workers)};
  const bool open_mpi = distribute::mpi_library_version().starts_with("Open MPI");
  const bool remote = !options.hosts.empty() || !options.hostfile.empty();
  if (open_mpi) {
    if (geteuid() == 0) argv.emplace_back("--allow-run-as-root");
    const unsigned cores = std::thread::hardware_concurrency();
    if (!remote && cores > 0 && workers > static_cast<std::int64_t>(cores)) {
      argv.emplace_back("--oversubscribe");
    }
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string variable(*entry);
      const std::string name = variable.substr(0, variable.find('='));
      if (name.starts_with("TANDEM_") || name == "OMP_NUM_THREADS") {
        argv.emplace_back("-x");
        argv.push_back(name);
      }
    }
  }
  if (!options.hosts.empty()) {
    argv.emplace_back("--host");
    argv.push_back(options.hosts);
  }
  if (!options.hostfile.empty()) {
    argv.emplace_back("--hostfile");
    argv.push_back(options.hostfile);
  }
  argv.insert(argv.end(), command.begin(), command.end());

  if (options.dry_run) {
    std::string line;
    for (const std::string& word : argv) {
      if (!line.empty()) line += ' ';
      line += shell_word(word);
    }
    std::cout << line << "\n";
    return 0;
  }
  std::vector<char*> pointers;
  for (std::string& word : argv)
    pointers.push_back(word.data());
  pointers.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  execv(mpirun.c_str(), pointers.data());
  throw Error("cannot run " + mpirun + ": " + std::strerror(errno));
}

}  // namespace tandem::cli
