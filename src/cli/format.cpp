#include "cli/format.h"

#include <charconv>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace tandem::cli {

std::string format_bytes(std::int64_t bytes) {
  return fixed(static_cast<double>(bytes) / (1 << 30), 1) + " GiB";
}

std::string plural(std::int64_t count, const std::string& noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string shortest(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

std::string json_text(const nlohmann::ordered_json& value) {
  return value.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace tandem::cli
