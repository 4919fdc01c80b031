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

}  // namespace tandem
