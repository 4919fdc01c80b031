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

// `tandem train`: a shell over the run layer (src/cli/train.cpp, tandem/run.h).
const CommandSpec& train_spec();
int run_train(const ParsedArgs& args);
// Checks one option's value as `tandem train` reads it, by key ("batch-size" for --batch-size);
// throws UsageError saying what is wrong.
void check_train_option(const std::string& key, const std::string& text);
// Whether `tandem train`'s option of this key is a flag.
bool is_train_flag(const std::string& key);

// `tandem sweep sweep.toml`: trials of `tandem train` over a space of options (src/cli/sweep.cpp).
const CommandSpec& sweep_spec();
int run_sweep(const ParsedArgs& args);

const CommandSpec& monitor_spec();
int run_monitor(const ParsedArgs& args);

// `tandem data inspect PATH` and `tandem data convert SOURCE DEST` (src/cli/data.cpp).
const CommandSpec& data_spec();
int run_data(const ParsedArgs& args);

// `tandem predict --model DIR INPUT...` and `tandem export --model DIR --format onnx`.
const CommandSpec& predict_spec();
int run_predict(const ParsedArgs& args);
const CommandSpec& export_spec();
int run_export(const ParsedArgs& args);

// `tandem doctor`: the checklist for a fresh machine (src/cli/doctor.cpp).
const CommandSpec& doctor_spec();
int run_doctor(const ParsedArgs& args);

// `tandem launch -n N -- COMMAND`: N workers under mpirun (src/cli/launch.cpp).
const CommandSpec& launch_spec();
int run_launch(const ParsedArgs& args);

// `tandem bench` and `tandem bench compare A.json B.json` (src/cli/bench.cpp).
const CommandSpec& bench_spec();
int run_bench(const ParsedArgs& args);

}  // namespace tandem::cli
