#pragma once
// How deep a TOML text nests, looked at before a parser sees it. toml++ parses and frees nested
// tables and arrays recursively, so a run or sweep file with a 40,000-part dotted key, or
// arrays nested as deep, overflowed the stack and killed the process; a configuration file needs
// a few levels. The readers (run files, sweep files, price tables) refuse deeper text first.
#include <optional>
#include <string_view>

namespace tandem {

struct TomlDepth {
  int line = 0;   // 1-based, where the nesting passes the limit
  int depth = 0;  // how deep it got there
};

// The most levels a configuration file may nest: dotted key parts, table header parts, arrays
// and inline tables, counted together on the way in.
inline constexpr int kMaxTomlDepth = 32;

// The first place `text` nests deeper than `limit`, or nullopt. Strings (basic, literal and
// multi-line) and comments are skipped, so their dots and brackets do not count.
std::optional<TomlDepth> toml_too_deep(std::string_view text, int limit = kMaxTomlDepth);

}  // namespace tandem
