#include "cli/data_formats.h"

#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/crc32c.h"
#include "core/files.h"
#include "data/file_io.h"

namespace tandem::cli {
namespace {

constexpr std::uintmax_t kCifarRecordBytes = 3073;

// The first bytes of the (decompressed) file.
std::vector<std::uint8_t> head_of(const std::string& path, std::size_t count) {
  data::InputFile file(path);
  std::vector<std::uint8_t> head(count);
  head.resize(file.read(head.data(), count));
  return head;
}

}  // namespace

DataKind kind_of_file(const std::string& path) {
  const std::vector<std::uint8_t> head = head_of(path, 12);
  if (head.size() >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF) {
    return DataKind::image;
  }
  if (head.size() >= 8 && head[0] == 0x89 && head[1] == 'P' && head[2] == 'N' && head[3] == 'G') {
    return DataKind::image;
  }
  if (head.size() >= 4 && head[0] == 0 && head[1] == 0 && head[3] >= 1 && head[3] <= 8 &&
      (head[2] == 0x08 || head[2] == 0x09 || (head[2] >= 0x0B && head[2] <= 0x0E))) {
    return DataKind::idx;
  }
  if (head.size() == 12) {
    std::uint32_t stored = 0;
    for (int i = 3; i >= 0; --i)
      stored = (stored << 8) | head[8 + static_cast<std::size_t>(i)];
    if (mask_crc(crc32c({head.data(), 8})) == stored) return DataKind::tfrecord;
  }
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (!error && size > 0 && size % kCifarRecordBytes == 0 && !is_gzip_file(path)) {
    return DataKind::cifar10;
  }
  return DataKind::unknown;
}

}  // namespace tandem::cli
