#pragma once
// Configuration files in TOML (run files, sweep files) read as a table the same way: the file
// bounded (1 MiB), refused past 32 levels of nesting before toml++'s recursive parser sees it
// (core/toml_depth.h), then parsed. The readers interpret the table; this is where a file becomes
// one.
#include <string>

#include <toml++/toml.h>

namespace tandem::io::detail {

// The TOML table in `path`. A file that cannot be read is a ConfigError prefixed by `what` (the
// setting that named it, "--config"; may be empty); text that nests too deep or is not TOML is a
// ConfigError "<path>:<line>: bad TOML (...); <fix>", `depth_fix` the fix for nesting.
toml::table read_toml_file(const std::string& path, const std::string& what,
                           const std::string& depth_fix);

}  // namespace tandem::io::detail
