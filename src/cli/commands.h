#pragma once
// The `tandem` subcommands. Each returns the process exit status; user mistakes are thrown as
// UsageError (status 2) and runtime failures as tandem::Error (status 1), and main() prints them.
#include <span>
#include <string>

#include "cli/args.h"

namespace tandem::cli {

struct Command {
  const CommandSpec& (*spec)();
  int (*run)(const ParsedArgs& args);
};

const CommandSpec& devices_spec();
int run_devices(const ParsedArgs& args);

const CommandSpec& train_spec();
int run_train(const ParsedArgs& args);

// Why Tandem runs where it does: the one line `devices` and `train` both print.
std::string gpu_backend_status();

}  // namespace tandem::cli
