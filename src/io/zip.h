#pragma once
// Zip archives as Keras' .keras files use them: reading one member (stored or deflated) and
// writing an archive of stored members.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tandem::io::detail {

// The member `name` of the zip archive `bytes` (read from `path`, named in errors), found through
// the central directory. Throws IoError when the archive is damaged or lacks the member.
// A member whose declared size is past `max_bytes` is refused before anything is inflated (a
// config.json that would inflate to gigabytes).
std::string zip_member(const std::vector<std::uint8_t>& bytes, const std::string& name,
                       const std::string& path, std::uint64_t max_bytes = UINT32_MAX);
// Whether `bytes` start as a zip archive does.
bool is_zip(const std::vector<std::uint8_t>& bytes);
// An archive of `members` (name, contents), stored uncompressed as Keras' own .keras files are.
std::vector<std::uint8_t> zip_archive(
    const std::vector<std::pair<std::string, std::string>>& members);

}  // namespace tandem::io::detail
