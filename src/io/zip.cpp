// Zip reading and writing (io/zip.h), after PKWARE's APPNOTE: local headers, the central
// directory and its end record, little-endian throughout.
#include "io/zip.h"

#include <zlib.h>

#include "tandem/error.h"

namespace tandem::io::detail {
namespace {

std::uint32_t little_endian(const std::uint8_t* bytes, int count) {
  std::uint32_t value = 0;
  for (int i = count - 1; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

// The member `name` of the zip archive `bytes`, found through the central directory; stored or
// deflated (the two methods zip writers use).
}  // namespace

std::string zip_member(const std::vector<std::uint8_t>& bytes, const std::string& name,
                       const std::string& path, std::uint64_t max_bytes) {
  constexpr std::size_t kEndRecordBytes = 22;
  const auto damaged = [&](const std::string& what) {
    return IoError(path + ": " + what + "; the .keras file is damaged (save the model again)");
  };
  if (bytes.size() < kEndRecordBytes) throw damaged("too short for a zip archive");
  // The end-of-central-directory record, after which only a comment of up to 64 KiB follows.
  std::size_t end = bytes.size() - kEndRecordBytes;
  const std::size_t lowest = end > 65535 ? end - 65535 : 0;
  while (little_endian(&bytes[end], 4) != 0x06054b50) {
    if (end == lowest) throw damaged("no zip directory");
    --end;
  }
  const std::uint32_t entries = little_endian(&bytes[end + 10], 2);
  std::size_t at = little_endian(&bytes[end + 16], 4);
  for (std::uint32_t entry = 0; entry < entries; ++entry) {
    if (at + 46 > bytes.size() || little_endian(&bytes[at], 4) != 0x02014b50) {
      throw damaged("a broken zip directory entry");
    }
    const std::uint32_t method = little_endian(&bytes[at + 10], 2);
    const std::uint32_t packed = little_endian(&bytes[at + 20], 4);
    const std::uint32_t size = little_endian(&bytes[at + 24], 4);
    const std::uint32_t name_bytes = little_endian(&bytes[at + 28], 2);
    const std::uint32_t extra_bytes = little_endian(&bytes[at + 30], 2);
    const std::uint32_t comment_bytes = little_endian(&bytes[at + 32], 2);
    const std::uint32_t local = little_endian(&bytes[at + 42], 4);
    if (at + 46 + name_bytes > bytes.size()) throw damaged("a broken zip directory entry");
    const std::string member(reinterpret_cast<const char*>(&bytes[at + 46]), name_bytes);
    at += 46 + name_bytes + extra_bytes + comment_bytes;
    if (member != name) continue;
    if (local + 30 > bytes.size()) throw damaged("a member outside the file");
    const std::size_t data =
        local + 30 + little_endian(&bytes[local + 26], 2) + little_endian(&bytes[local + 28], 2);
    if (data + packed > bytes.size()) throw damaged("member " + name + " runs past the end");
    if (size > max_bytes) {
      throw IoError(path + ": member " + name + " declares " + std::to_string(size) +
                    " bytes uncompressed, more than the " + std::to_string(max_bytes) +
                    " it may hold; the file is damaged or not a Keras model");
    }
    if (method == 0) return {reinterpret_cast<const char*>(&bytes[data]), size};
    if (method != 8) {
      throw IoError(path + ": member " + name + " is compressed with zip method " +
                    std::to_string(method) + "; Tandem reads stored and deflated members");
    }
    std::string text(size, '\0');
    z_stream stream{};
    if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) throw IoError(path + ": zlib failed to start");
    stream.next_in = const_cast<Bytef*>(&bytes[data]);
    stream.avail_in = packed;
    stream.next_out = reinterpret_cast<Bytef*>(text.data());
    stream.avail_out = size;
    const int status = inflate(&stream, Z_FINISH);
    inflateEnd(&stream);
    if (status != Z_STREAM_END) throw damaged("member " + name + " does not inflate");
    return text;
  }
  throw IoError(path + ": a zip archive without " + name + "; it is not a .keras model file");
}

bool is_zip(const std::vector<std::uint8_t>& bytes) {
  return bytes.size() >= 4 && little_endian(bytes.data(), 4) == 0x04034b50;
}

std::vector<std::uint8_t> zip_archive(
    const std::vector<std::pair<std::string, std::string>>& members) {
  std::vector<std::uint8_t> out;
  const auto put = [&](std::uint32_t value, int count) {
    for (int i = 0; i < count; ++i)
      out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  };
  const auto put_text = [&](const std::string& text) {
    out.insert(out.end(), text.begin(), text.end());
  };
  struct Entry {
    std::uint32_t crc;
    std::uint32_t size;
    std::uint32_t offset;
  };
  std::vector<Entry> entries;
  for (const auto& [name, contents] : members) {
    if (contents.size() > 0xFFFFFFFFu || out.size() > 0xFFFFFFFFu) {
      throw InvalidArgument("zip_archive: member " + name + " passes 4 GiB (zip64 is not written)");
    }
    const auto size = static_cast<std::uint32_t>(contents.size());
    const auto crc = static_cast<std::uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(contents.data()), static_cast<uInt>(size)));
    entries.push_back({crc, size, static_cast<std::uint32_t>(out.size())});
    put(0x04034b50, 4);  // local file header
    put(20, 2);          // version needed: 2.0
    put(0, 2);           // flags
    put(0, 2);           // method: stored
    put(0, 4);           // time and date: none
    put(crc, 4);
    put(size, 4);
    put(size, 4);
    put(static_cast<std::uint32_t>(name.size()), 2);
    put(0, 2);  // extra field
    put_text(name);
    put_text(contents);
  }
  const auto directory = static_cast<std::uint32_t>(out.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    put(0x02014b50, 4);  // central directory header
    put(20, 2);          // made by: 2.0
    put(20, 2);          // version needed
    put(0, 2);
    put(0, 2);
    put(0, 4);
    put(entries[i].crc, 4);
    put(entries[i].size, 4);
    put(entries[i].size, 4);
    put(static_cast<std::uint32_t>(members[i].first.size()), 2);
    put(0, 2);  // extra
    put(0, 2);  // comment
    put(0, 2);  // disk
    put(0, 2);  // internal attributes
    put(0, 4);  // external attributes
    put(entries[i].offset, 4);
    put_text(members[i].first);
  }
  const auto directory_size = static_cast<std::uint32_t>(out.size()) - directory;
  put(0x06054b50, 4);  // end of central directory
  put(0, 2);
  put(0, 2);
  put(static_cast<std::uint32_t>(members.size()), 2);
  put(static_cast<std::uint32_t>(members.size()), 2);
  put(directory_size, 4);
  put(directory, 4);
  put(0, 2);  // comment
  return out;
}

}  // namespace tandem::io::detail
