#include "io/toml_file.h"

#include <cstdint>
#include <vector>

#include "core/files.h"
#include "core/toml_depth.h"
#include "tandem/error.h"

namespace tandem::io::detail {

toml::table read_toml_file(const std::string& path, const std::string& what,
                           const std::string& depth_fix) {
  std::vector<std::uint8_t> bytes;
  try {
    bytes = read_whole_file(path, {.max_bytes = 1 << 20});
  } catch (const IoError& error) {
    throw ConfigError((what.empty() ? "" : what + " ") + error.what());
  }
  const std::string text(bytes.begin(), bytes.end());
  const auto bad = [&](std::int64_t line, const std::string& problem, const std::string& fix) {
    return ConfigError(path + ":" + std::to_string(line) + ": bad TOML (" + problem + "); " + fix);
  };
  if (const std::optional<TomlDepth> deep = toml_too_deep(text)) {
    throw bad(deep->line,
              "nested " + std::to_string(deep->depth) + " levels deep, more than " +
                  std::to_string(kMaxTomlDepth),
              depth_fix);
  }
  try {
    return toml::parse(text, std::string_view(path));
  } catch (const toml::parse_error& error) {
    throw bad(error.source().begin.line,
              std::string(error.description()) + ", column " +
                  std::to_string(error.source().begin.column),
              "see https://toml.io for the syntax");
  }
}

}  // namespace tandem::io::detail
