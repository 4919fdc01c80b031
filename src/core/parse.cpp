#include "core/parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include "tandem/error.h"

namespace tandem {
namespace {

// Parses all of `text` as T (no sign or space tricks), or nothing.
template <typename T>
std::optional<T> parse_whole(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, value);
  if (text.empty() || result.ec != std::errc() || result.ptr != end) return std::nullopt;
  return value;
}

}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::string::size_type start = 0;
  while (start <= text.size()) {
    const std::string::size_type comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (!item.empty()) items.push_back(std::move(item));
  }
  return items;
}

std::vector<std::string> parse_list(const std::string& name, const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const auto first = item.find_first_not_of(' ');
    const auto last = item.find_last_not_of(' ');
    if (first == std::string::npos) {
      throw ConfigError(name + " has an empty item in '" + text + "'; separate items by commas");
    }
    items.push_back(item.substr(first, last - first + 1));
  }
  if (items.empty()) throw ConfigError(name + " needs at least one item");
  return items;
}

std::int64_t parse_positive_integer(const std::string& name, const std::string& text) {
  const std::optional<std::int64_t> value = parse_whole<std::int64_t>(text);
  if (!value || *value <= 0) {
    throw ConfigError(name + " must be a positive integer, got '" + text + "'");
  }
  return *value;
}

std::uint64_t parse_unsigned_integer(const std::string& name, const std::string& text) {
  const std::optional<std::uint64_t> value = parse_whole<std::uint64_t>(text);
  if (!value) throw ConfigError(name + " must be a non-negative integer, got '" + text + "'");
  return *value;
}

double parse_positive_number(const std::string& name, const std::string& text) {
  const std::optional<double> value = parse_whole<double>(text);
  if (!value || !std::isfinite(*value) || *value <= 0.0) {
    throw ConfigError(name + " must be a positive number, got '" + text + "'");
  }
  return *value;
}

double parse_fraction(const std::string& name, const std::string& text) {
  const std::optional<double> value = parse_whole<double>(text);
  if (!value || !(*value >= 0.0 && *value < 1.0)) {
    throw ConfigError(name + " must be a number in [0, 1), got '" + text + "'");
  }
  return *value;
}

std::string parse_directory(const std::string& name, const std::string& text) {
  if (text.empty()) throw ConfigError(name + " needs a directory, got ''");
  return text;
}

std::string parse_output_path(const std::string& name, const std::string& text) {
  if (text.empty()) throw ConfigError(name + " needs a file name, got ''");
  const std::filesystem::path parent = std::filesystem::absolute(text).parent_path();
  if (!std::filesystem::is_directory(parent)) {
    throw ConfigError(name + " '" + text + "': directory " + parent.string() +
                      " does not exist; create it or choose another path");
  }
  return text;
}

std::string parse_choice(const std::string& name, const std::string& text,
                         const std::vector<std::string>& choices, const std::string& what) {
  if (std::find(choices.begin(), choices.end(), text) != choices.end()) return text;
  std::string listed;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    listed += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  throw ConfigError("unknown " + what + " '" + text + "' for " + name + "; choose " + listed);
}

std::size_t parse_memory_size(const std::string& name, const std::string& text) {
  std::size_t consumed = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &consumed);
  } catch (const std::exception&) {
    consumed = 0;
  }
  std::string unit = text.substr(consumed);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  double scale = 1.0;
  if (unit.size() == 1) {
    const std::string units = "KMGT";
    const std::size_t power = units.find(static_cast<char>(std::toupper(unit[0])));
    if (power == std::string::npos) consumed = 0;
    scale = std::pow(1024.0, static_cast<double>(power + 1));
  } else if (!unit.empty()) {
    consumed = 0;
  }
  const double bytes = value * scale;
  if (consumed == 0 || !(bytes >= 1.0) || !std::isfinite(bytes)) {
    throw ConfigError(name + " needs a memory size such as 512M, 8G or 1073741824, got '" + text +
                      "'");
  }
  return static_cast<std::size_t>(bytes);
}

}  // namespace tandem
