#pragma once
// A small JSON object writer for `tandem devices --json` and `tandem train --report`.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::cli {

// `text` as a JSON string literal, quotes included.
std::string json_quote(std::string_view text);

// Keys in insertion order, one per line, nested objects indented.
class JsonObject {
 public:
  JsonObject& add_string(std::string_view key, std::string_view value);
  JsonObject& add_number(std::string_view key, double value);  // NaN and infinities: null
  JsonObject& add_integer(std::string_view key, std::int64_t value);
  JsonObject& add_unsigned(std::string_view key, std::uint64_t value);
  JsonObject& add_bool(std::string_view key, bool value);
  JsonObject& add_object(std::string_view key, const JsonObject& value);
  JsonObject& add_string_array(std::string_view key, const std::vector<std::string>& values);
  JsonObject& add_object_array(std::string_view key, const std::vector<JsonObject>& values);

  std::string str() const;

 private:
  std::vector<std::pair<std::string, std::string>> members_;  // key, rendered value
};

}  // namespace tandem::cli
