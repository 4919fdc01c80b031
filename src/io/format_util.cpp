#include "io/format_util.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "core/crc32c.h"
#include "tandem/error.h"

namespace tandem::io::detail {

std::string hex32(std::uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

std::string crc32c_hex(std::span<const std::uint8_t> bytes) {
  return hex32(crc32c(bytes));
}

namespace {

std::string checksum_of(const nlohmann::json& document) {
  const std::string canonical = document.dump();
  return crc32c_hex({reinterpret_cast<const std::uint8_t*>(canonical.data()), canonical.size()});
}

}  // namespace

std::string seal_json(nlohmann::json document) {
  document.erase(kSealKey);
  document[kSealKey] = checksum_of(document);
  // No newline after the closing brace: then losing any byte of the file breaks the JSON.
  return document.dump(2);
}

nlohmann::json open_sealed_json(std::span<const std::uint8_t> bytes, const std::string& what) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& error) {  // malformed, or a number out of range
    throw IoError(what + ": malformed JSON (" + error.what() +
                  "); the file is corrupt or truncated");
  }
  if (!document.is_object()) throw IoError(what + ": not a JSON object; the file is corrupt");
  const auto seal = document.find(kSealKey);
  if (seal == document.end() || !seal->is_string()) {
    throw IoError(what + ": no \"" + kSealKey +
                  "\" member; the file is damaged or was not written by Tandem");
  }
  const std::string recorded = seal->get<std::string>();
  document.erase(kSealKey);
  const std::string actual = checksum_of(document);
  if (recorded != actual) {
    throw IoError(what + ": the content's CRC-32C is " + actual + " but the file records " +
                  recorded + "; the file is corrupt (or was edited by hand)");
  }
  return document;
}

nlohmann::json number_json(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

double number_from_json(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  const std::string text = value.get<std::string>();
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (text == "inf") return std::numeric_limits<double>::infinity();
  if (text == "-inf") return -std::numeric_limits<double>::infinity();
  throw nlohmann::json::other_error::create(501, "'" + text + "' is not a number", &value);
}

nlohmann::json numbers_json(const std::vector<double>& values) {
  nlohmann::json list = nlohmann::json::array();
  for (const double value : values)
    list.push_back(number_json(value));
  return list;
}

std::vector<double> numbers_from_json(const nlohmann::json& values) {
  std::vector<double> numbers;
  for (const nlohmann::json& value : values)
    numbers.push_back(number_from_json(value));
  return numbers;
}

nlohmann::json logs_json(const std::map<std::string, double>& logs) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [key, value] : logs)
    object[key] = number_json(value);
  return object;
}

std::map<std::string, double> logs_from_json(const nlohmann::json& logs) {
  std::map<std::string, double> result;
  for (const auto& [key, value] : logs.items())
    result[key] = number_from_json(value);
  return result;
}

nlohmann::json file_record(std::span<const std::uint8_t> bytes) {
  return {{"bytes", bytes.size()}, {"crc32c", crc32c_hex(bytes)}};
}

void check_file_record(std::span<const std::uint8_t> bytes, const nlohmann::json& record,
                       const std::string& path) {
  const auto expected_bytes = record.at("bytes").get<std::uint64_t>();
  if (bytes.size() != expected_bytes) {
    throw IoError(path + ": " + std::to_string(bytes.size()) + " bytes but " +
                  std::to_string(expected_bytes) + " were written; the file is " +
                  (bytes.size() < expected_bytes ? "truncated" : "damaged (it grew)"));
  }
  const std::string expected = record.at("crc32c").get<std::string>();
  const std::string actual = crc32c_hex(bytes);
  if (actual != expected) {
    throw IoError(path + ": the CRC-32C is " + actual + " but " + expected +
                  " was written; the file is corrupt");
  }
}

}  // namespace tandem::io::detail
