#pragma once
// Small text helpers every layer uses.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

// ASCII lower case (the bytes of other characters unchanged), for matching names that users may
// capitalise: "Adam", "SAME", ".JPG", "NVIDIA H100".
inline std::string lower(std::string_view text) {
  std::string lowered(text);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return lowered;
}

// Text for HTML element content and attribute values: & < > " escaped.
inline std::string html_escape(std::string_view text) {
  std::string escaped;
  for (const char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

// Whether `text` is well-formed UTF-8 (no stray continuation bytes, overlong forms, surrogates or
// code points past U+10FFFF).
bool is_utf8(std::string_view text);
// `text` with every byte outside printable ASCII as \xNN, for naming bad input in a message.
std::string printable(std::string_view text);

// "47.1 GiB"
std::string format_bytes(std::int64_t bytes);
// "1 thread", "2 threads"
std::string plural(std::int64_t count, const std::string& noun);
// `value` with `decimals` digits after the point: fixed(0.91234, 4) is "0.9123".
std::string fixed(double value, int decimals);
// The shortest text that reads back as `value`: shortest(1e-3) is "0.001".
std::string shortest(double value);
// Items joined by `separator`: join({"a", "b"}, ", ") is "a, b".
std::string join(const std::vector<std::string>& items, const std::string& separator);
// " (did you mean 'batch-size'?)" for a name within two edits of one of `names`; "" otherwise.
std::string did_you_mean(const std::string& name, const std::vector<std::string>& names);

}  // namespace tandem
