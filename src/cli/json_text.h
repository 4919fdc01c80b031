#pragma once
// JSON as the commands print it.
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::cli {

// Two-space indents, keys in the order they were added (ordered_json), NaN and infinities as
// null, bytes that are not UTF-8 replaced by U+FFFD.
inline std::string json_text(const nlohmann::ordered_json& value) {
  return value.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace tandem::cli
