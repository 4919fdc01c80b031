#include "core/toml_depth.h"

#include <string>

namespace tandem {

std::optional<TomlDepth> toml_too_deep(std::string_view text, int limit) {
  int line = 1;
  std::string open;    // the [ and { open here, innermost last (outside strings)
  int key_parts = 1;   // of the dotted key being read, before its '=' or a header's ']'
  bool in_key = true;  // reading a key: a line's start, a [table] header, an inline table's
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      key_parts = 1;
      in_key = open.empty();
      continue;
    }
    if (c == '#') {  // a comment runs to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      const std::string_view quote = c == '"' ? "\"\"\"" : "'''";
      const std::string_view close = text.substr(i, 3) == quote ? quote : quote.substr(0, 1);
      i += close.size();
      while (i < text.size() && text.substr(i, close.size()) != close) {
        if (text[i] == '\n') ++line;
        if (c == '"' && text[i] == '\\') ++i;  // an escape: the next character is taken as is
        ++i;
      }
      i += close.size() - 1;
      continue;
    }
    if (c == '[') {
      // At a line's start, before any '=', it opens a [table] header (or [[array of tables]]),
      // whose name is a key; after an '=' it opens an array of values.
      const bool header = in_key && (open.empty() || open == "[");
      open += c;
      in_key = header;
      if (!header) key_parts = 1;
    } else if (c == '{') {
      open += c;
      in_key = true;  // an inline table's keys
      key_parts = 1;
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
      in_key = false;
    } else if (c == '=') {
      in_key = false;
    } else if (c == ',' && !open.empty()) {
      in_key = open.back() == '{';  // the next key of an inline table, or the next value
      key_parts = 1;
    } else if (c == '.' && in_key) {
      ++key_parts;
    } else {
      continue;
    }
    const int depth = static_cast<int>(open.size()) + key_parts - 1;
    if (depth > limit) return TomlDepth{line, depth};
  }
  return std::nullopt;
}

}  // namespace tandem
