#pragma once
// Text helpers shared by the bench layer's files.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace tandem::bench {

// ASCII lower case, for matching device names against table keys.
inline std::string lower(std::string_view text) {
  std::string lowered(text);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lowered;
}

}  // namespace tandem::bench
