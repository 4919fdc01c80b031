#pragma once
// Small text helpers shared by the `tandem` commands.
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tandem::cli {

// "47.1 GiB"
std::string format_bytes(std::int64_t bytes);
// "1 thread", "2 threads"
std::string plural(std::int64_t count, const std::string& noun);
// `value` with `decimals` digits after the point: fixed(0.91234, 4) is "0.9123".
std::string fixed(double value, int decimals);
// The shortest text that reads back as `value`: shortest(1e-3) is "0.001".
std::string shortest(double value);
// `value` as the commands print JSON: two-space indents, keys in the order they were added
// (ordered_json), NaN and infinities as null, bytes that are not UTF-8 replaced by U+FFFD.
std::string json_text(const nlohmann::ordered_json& value);

}  // namespace tandem::cli
