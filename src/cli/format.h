#pragma once
// Small text helpers shared by the `tandem` commands.
#include <cstdint>
#include <string>

namespace tandem::cli {

// "47.1 GiB"
std::string format_bytes(std::int64_t bytes);
// "1 thread", "2 threads"
std::string plural(std::int64_t count, const std::string& noun);
// `value` with `decimals` digits after the point: fixed(0.91234, 4) is "0.9123".
std::string fixed(double value, int decimals);
// The shortest text that reads back as `value`: shortest(1e-3) is "0.001".
std::string shortest(double value);

}  // namespace tandem::cli
