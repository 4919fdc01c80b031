#pragma once
// Run files: `tandem train --config run.toml` reads any of the command's options from a TOML
// file, keyed by the long option's name without its dashes (`batch-size = 64`, `lr-schedule =
// "cosine"`, `deterministic = true` for a flag), at the top level or in tables that group them
// (`[optimizer]` holding `lr = 0.01`: the table's name is only for the reader). Options on the
// command line override the file's. Every mistake names the file, the line and the key, with the
// fix. The options a run was given, from wherever, are its resolved configuration: written into
// its log folder and its report, so the run can be repeated exactly.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"

namespace tandem::cli {

// Checks one option's text as the command reads it; throws UsageError saying what is wrong.
using OptionCheck = std::function<void(const std::string& option, const std::string& text)>;

// " (did you mean 'batch-size'?)" for a key within two edits of one of `names`; "" otherwise.
std::string did_you_mean(const std::string& key, const std::vector<std::string>& names);

// `args` with the options of the run file named by --config under them (the command line wins),
// each checked with `check`; `args` itself when there is no --config.
ParsedArgs with_run_file(const CommandSpec& command, const ParsedArgs& args,
                         const OptionCheck& check);

// The options given (run file and command line merged), keyed without dashes: flags true,
// values as text; --config, --help and --resume left out.
nlohmann::ordered_json resolved_configuration(const CommandSpec& command, const ParsedArgs& args);
// The same as a run file that `--config` reads back (a header comment, then `key = value` lines).
std::string resolved_run_file(const CommandSpec& command, const ParsedArgs& args);

}  // namespace tandem::cli
