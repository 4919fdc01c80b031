#pragma once
// Small text helpers every layer uses.
#include <algorithm>
#include <string>
#include <string_view>

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

}  // namespace tandem
