#include "core/text.h"

#include <charconv>
#include <cstdio>

#include "tandem/error.h"

namespace tandem {
namespace {

// Edits to turn a into b (for the closest name).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string setting_identifier(const std::string& key) {
  std::string identifier = key;
  std::replace(identifier.begin(), identifier.end(), '-', '_');
  return identifier;
}

bool is_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    // The length of the sequence, and the smallest code point it may encode (shorter forms of
    // smaller ones are overlong).
    const auto [length, smallest] = byte < 0x80             ? std::pair{1, 0x0u}
                                    : (byte & 0xE0) == 0xC0 ? std::pair{2, 0x80u}
                                    : (byte & 0xF0) == 0xE0 ? std::pair{3, 0x800u}
                                    : (byte & 0xF8) == 0xF0 ? std::pair{4, 0x10000u}
                                                            : std::pair{0, 0u};
    if (length == 0 || i + static_cast<std::size_t>(length) > text.size()) return false;
    unsigned code = length == 1 ? byte : byte & (0xFFu >> (length + 1));
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3Fu);
    }
    if (code < smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += static_cast<std::size_t>(length);
  }
  return true;
}

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string shown;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F) {
      shown += c;
    } else {
      shown += std::string("\\x") + kHex[byte >> 4] + kHex[byte & 0xF];
    }
  }
  return shown;
}

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

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i)
    text += (i == 0 ? "" : separator) + items[i];
  return text;
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_distance = 3;  // farther is no suggestion
  for (const std::string& candidate : names) {
    const std::size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

}  // namespace tandem
