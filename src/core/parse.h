#pragma once
// Typed values from the text a user wrote (a command-line option, a run file's value, a field
// set from text): each throws ConfigError naming the setting (`name`, as the caller spells it:
// "--batch-size", "batch_size"), the text and what is expected.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

// The non-empty items of a comma-separated list: "a,,b," -> {"a", "b"}.
std::vector<std::string> split_list(const std::string& text);
// A comma-separated list, each item trimmed of spaces: "a, b" -> {"a", "b"}; an empty item or an
// empty list is refused.
std::vector<std::string> parse_list(const std::string& name, const std::string& text);

std::int64_t parse_positive_integer(const std::string& name, const std::string& text);
std::uint64_t parse_unsigned_integer(const std::string& name, const std::string& text);
double parse_positive_number(const std::string& name, const std::string& text);
// A number in [0, 1).
double parse_fraction(const std::string& name, const std::string& text);
// The text as given, refusing "" ("--logdir needs a directory, got ''").
std::string parse_directory(const std::string& name, const std::string& text);
// A file to write: the text as given, when its directory exists ("--report 'x/r.json': directory
// /abs/x does not exist; create it or choose another path").
std::string parse_output_path(const std::string& name, const std::string& text);
// The text as given, when it is one of `choices`; otherwise "unknown <what> 'x' for <name>;
// choose a, b or c".
std::string parse_choice(const std::string& name, const std::string& text,
                         const std::vector<std::string>& choices, const std::string& what);
// "512M", "2G", "1.5GiB", "300000000": bytes (K, M, G, T are powers of 1024).
std::size_t parse_memory_size(const std::string& name, const std::string& text);

}  // namespace tandem
