#include "cli/json.h"

#include <charconv>
#include <cmath>

namespace tandem::cli {

std::string json_quote(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string quoted = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        quoted += "\\\"";
        break;
      case '\\':
        quoted += "\\\\";
        break;
      case '\n':
        quoted += "\\n";
        break;
      case '\t':
        quoted += "\\t";
        break;
      case '\r':
        quoted += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          quoted += "\\u00";
          quoted += kHex[(c >> 4) & 0xF];
          quoted += kHex[c & 0xF];
        } else {
          quoted += c;
        }
    }
  }
  return quoted + "\"";
}

JsonObject& JsonObject::add_string(std::string_view key, std::string_view value) {
  members_.emplace_back(key, json_quote(value));
  return *this;
}

JsonObject& JsonObject::add_number(std::string_view key, double value) {
  if (!std::isfinite(value)) {
    members_.emplace_back(key, "null");
    return *this;
  }
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  members_.emplace_back(key, std::string(buffer, result.ptr));
  return *this;
}

JsonObject& JsonObject::add_integer(std::string_view key, std::int64_t value) {
  members_.emplace_back(key, std::to_string(value));
  return *this;
}

JsonObject& JsonObject::add_unsigned(std::string_view key, std::uint64_t value) {
  members_.emplace_back(key, std::to_string(value));
  return *this;
}

JsonObject& JsonObject::add_bool(std::string_view key, bool value) {
  members_.emplace_back(key, value ? "true" : "false");
  return *this;
}

JsonObject& JsonObject::add_object(std::string_view key, const JsonObject& value) {
  members_.emplace_back(key, value.str());
  return *this;
}

JsonObject& JsonObject::add_string_array(std::string_view key,
                                         const std::vector<std::string>& values) {
  std::string rendered = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) rendered += ", ";
    rendered += json_quote(values[i]);
  }
  members_.emplace_back(key, rendered + "]");
  return *this;
}

JsonObject& JsonObject::add_object_array(std::string_view key,
                                         const std::vector<JsonObject>& values) {
  std::string rendered = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) rendered += ", ";
    rendered += values[i].str();
  }
  members_.emplace_back(key, rendered + "]");
  return *this;
}

std::string JsonObject::str() const {
  if (members_.empty()) return "{}";
  std::string text = "{";
  for (std::size_t i = 0; i < members_.size(); ++i) {
    text += i ? ",\n  " : "\n  ";
    text += json_quote(members_[i].first) + ": ";
    // Nested objects were rendered on their own; shift their lines under this one.
    for (const char c : members_[i].second) {
      text += c;
      if (c == '\n') text += "  ";
    }
  }
  return text + "\n}";
}

}  // namespace tandem::cli
