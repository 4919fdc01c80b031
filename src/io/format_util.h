#pragma once
// Small pieces shared by the io files: CRC-32C as hex text, and JSON documents that carry their
// own checksum (checkpoint states, saved-model architectures), so a flipped byte anywhere in
// them is detected rather than read as a different step or shape.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace tandem::io::detail {

// "0a1b2c3d"
std::string hex32(std::uint32_t value);
// The CRC-32C of `bytes` as hex32.
std::string crc32c_hex(std::span<const std::uint8_t> bytes);

// The key of a sealed document's checksum: the CRC-32C of the document's compact dump without
// that key. nlohmann::json keeps object keys sorted, so the dump is canonical.
inline constexpr const char* kSealKey = "checksum";

// `document` with its checksum added, as indented text for people to read (without a final
// newline, so that a truncation by even one byte is malformed JSON).
std::string seal_json(nlohmann::json document);
// Parses text written by seal_json and checks its checksum; returns the document without it.
// Throws IoError naming `what` for malformed JSON, a missing or mismatched checksum.
nlohmann::json open_sealed_json(std::span<const std::uint8_t> bytes, const std::string& what);

// Numbers that may be NaN or infinite (a diverged loss): JSON numbers when finite, else the
// strings "nan", "inf" and "-inf".
nlohmann::json number_json(double value);
double number_from_json(const nlohmann::json& value);
nlohmann::json numbers_json(const std::vector<double>& values);
std::vector<double> numbers_from_json(const nlohmann::json& values);
nlohmann::json logs_json(const std::map<std::string, double>& logs);
std::map<std::string, double> logs_from_json(const nlohmann::json& logs);

// {"bytes": size, "crc32c": hex} of a file's content, and the check of a file read back against
// it: IoError naming `path` for a size (truncated file) or checksum (corrupt file) mismatch.
nlohmann::json file_record(std::span<const std::uint8_t> bytes);
void check_file_record(std::span<const std::uint8_t> bytes, const nlohmann::json& record,
                       const std::string& path);

}  // namespace tandem::io::detail
