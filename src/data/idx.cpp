// IDX files (the MNIST format): a 4-byte magic number 0x0000TTNN (TT the element type, NN the
// number of dimensions), NN big-endian u32 extents, then the elements, big-endian, row-major.
// zlib's gz* functions read gzip and plain files alike, so one path serves both.
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tandem/data.h"

namespace tandem::data {
namespace {

struct IdxElementType {
  DType stored;       // what Tandem holds it as (i8 and i16 widen to i32: no narrower dtype)
  std::size_t width;  // bytes per element in the file
};

std::optional<IdxElementType> idx_element_type(std::uint8_t code) {
  switch (code) {
    case 0x08:
      return IdxElementType{DType::u8, 1};
    case 0x09:
      return IdxElementType{DType::i32, 1};
    case 0x0B:
      return IdxElementType{DType::i32, 2};
    case 0x0C:
      return IdxElementType{DType::i32, 4};
    case 0x0D:
      return IdxElementType{DType::f32, 4};
    case 0x0E:
      return IdxElementType{DType::f64, 8};
    default:
      return std::nullopt;
  }
}

std::string hex(std::uint64_t value, int digits) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string text = "0x";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
    text += kDigits[(value >> shift) & 0xF];
  return text;
}

std::uint64_t load_big_endian(const unsigned char* bytes, std::size_t width) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i)
    value = (value << 8) | bytes[i];
  return value;
}

// An open gzip-or-plain file that reads until it has what was asked for or the data ends.
class IdxFile {
 public:
  explicit IdxFile(const std::string& path) : path_(path) {
    std::error_code status_error;
    const auto status = std::filesystem::status(path, status_error);
    if (!std::filesystem::exists(status)) {
      throw IoError(path + ": no such file; check the path");
    }
    if (std::filesystem::is_directory(status)) {
      throw IoError(path + ": is a directory, not an IDX file; pass the path of the file itself");
    }
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      throw IoError(path + ": cannot open (" + std::strerror(errno) +
                    "); check the file's permissions");
    }
    gzbuffer(file_, 1 << 20);
  }
  ~IdxFile() { gzclose(file_); }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  // Reads up to `count` bytes into `destination`; fewer only when the data ends.
  std::size_t read(unsigned char* destination, std::size_t count) {
    constexpr std::size_t kChunk = std::size_t{1} << 30;  // gzread takes an unsigned int
    std::size_t total = 0;
    while (total < count) {
      const auto request = static_cast<unsigned>(std::min(count - total, kChunk));
      const int got = gzread(file_, destination + total, request);
      if (got < 0) {
        int code = Z_OK;
        std::string message = gzerror(file_, &code);
        // zlib prefixes the message with the path, which ours already starts with.
        if (message.starts_with(path_ + ": ")) message.erase(0, path_.size() + 2);
        throw IoError(path_ + ": cannot decompress after " + std::to_string(total_read_ + total) +
                      " bytes (zlib: " + message +
                      "); the file is corrupt or cut short: download it again");
      }
      if (got == 0) break;
      total += static_cast<std::size_t>(got);
    }
    total_read_ += total;
    return total;
  }

  // Reads whatever is left and returns how many bytes that was.
  std::uint64_t count_remaining() {
    std::vector<unsigned char> scratch(1 << 20);
    std::uint64_t remaining = 0;
    while (const std::size_t got = read(scratch.data(), scratch.size()))
      remaining += got;
    return remaining;
  }

  // Reads `count` bytes, growing the buffer only as data actually arrives, so a header that
  // claims a huge shape cannot make us allocate more than the file holds.
  std::vector<unsigned char> read_up_to(std::uint64_t count) {
    constexpr std::uint64_t kStep = std::uint64_t{16} << 20;
    std::vector<unsigned char> bytes;
    bytes.reserve(static_cast<std::size_t>(std::min(count, kStep)));
    while (bytes.size() < count) {
      const std::size_t before = bytes.size();
      const auto step = static_cast<std::size_t>(std::min(count - before, kStep));
      bytes.resize(before + step);
      const std::size_t got = read(bytes.data() + before, step);
      bytes.resize(before + got);
      if (got < step) break;
    }
    return bytes;
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
  std::uint64_t total_read_ = 0;
};

Shape read_header(IdxFile& file, const std::string& path, IdxElementType& element_type) {
  unsigned char magic[4];
  const std::size_t magic_bytes = file.read(magic, 4);
  if (magic_bytes < 4) {
    throw IoError(path + ": " + std::to_string(magic_bytes) +
                  " bytes is too short for an IDX header (4-byte magic number, then the "
                  "dimensions); the file is empty or truncated: download it again");
  }
  const std::uint64_t magic_number = load_big_endian(magic, 4);
  const std::optional<IdxElementType> type = idx_element_type(magic[2]);
  if (magic[0] != 0 || magic[1] != 0 || !type) {
    throw IoError(path + ": not an IDX file (magic number " + hex(magic_number, 8) +
                  ", expected 0x0000TTNN with element type TT one of 08, 09, 0B, 0C, 0D, 0E and "
                  "NN dimensions); check that this is an IDX file such as "
                  "train-images-idx3-ubyte.gz");
  }
  element_type = *type;
  const int rank = magic[3];
  if (rank == 0) {
    throw IoError(path + ": impossible shape: the magic number " + hex(magic_number, 8) +
                  " declares 0 dimensions; the header is corrupt: download the file again");
  }
  std::vector<unsigned char> extents_bytes(static_cast<std::size_t>(rank) * 4);
  const std::size_t extents_read = file.read(extents_bytes.data(), extents_bytes.size());
  if (extents_read < extents_bytes.size()) {
    throw IoError(path + ": the header ends after " + std::to_string(4 + extents_read) +
                  " bytes but declares " + std::to_string(rank) + " dimensions (" +
                  std::to_string(4 + extents_bytes.size()) +
                  " header bytes); the file is truncated: download it again");
  }
  Shape shape(static_cast<std::size_t>(rank));
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    shape[axis] = static_cast<std::int64_t>(load_big_endian(&extents_bytes[axis * 4], 4));
  }
  // Every extent is below 2^32, so the running product overflows only through a multiplication
  // we can check before doing it.
  constexpr std::uint64_t kMaxBytes = std::numeric_limits<std::int64_t>::max();
  std::uint64_t bytes = element_type.width;
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    const auto extent = static_cast<std::uint64_t>(shape[axis]);
    if (extent == 0) {
      throw IoError(path + ": impossible shape " + shape_str(shape) + ": dimension " +
                    std::to_string(axis) + " is 0; the header is corrupt: download the file again");
    }
    if (bytes > kMaxBytes / extent) {
      throw IoError(path + ": impossible shape " + shape_str(shape) +
                    ": its size overflows 64-bit byte counts; the header is corrupt: download "
                    "the file again");
    }
    bytes *= extent;
  }
  return shape;
}

template <typename T>
void decode_elements(const unsigned char* bytes, const IdxElementType& type, T* out,
                     std::int64_t count) {
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    std::memcpy(out, bytes, static_cast<std::size_t>(count));
  } else {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::uint64_t raw =
          load_big_endian(bytes + static_cast<std::size_t>(i) * type.width, type.width);
      if constexpr (std::is_same_v<T, float>) {
        out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(raw));
      } else if constexpr (std::is_same_v<T, double>) {
        out[i] = std::bit_cast<double>(raw);
      } else {
        // i8, i16 and i32 all land in i32: shift the sign bit to the top, then back.
        const int unused_bits = 64 - static_cast<int>(type.width) * 8;
        out[i] =
            static_cast<std::int32_t>(static_cast<std::int64_t>(raw << unused_bits) >> unused_bits);
      }
    }
  }
}

}  // namespace

Tensor read_idx(const std::string& path) {
  IdxFile file(path);
  IdxElementType type{};
  const Shape shape = read_header(file, path, type);
  const std::uint64_t expected = static_cast<std::uint64_t>(shape_numel(shape)) * type.width;
  const std::vector<unsigned char> payload = file.read_up_to(expected);
  if (payload.size() < expected) {
    throw IoError(path + ": expected " + std::to_string(expected) +
                  " bytes of data after the header, found " + std::to_string(payload.size()) +
                  " (shape " + shape_str(shape) + "); the file is truncated: download it again");
  }
  if (const std::uint64_t extra = file.count_remaining(); extra > 0) {
    throw IoError(path + ": expected " + std::to_string(expected) +
                  " bytes of data after the header, found " + std::to_string(expected + extra) +
                  " (shape " + shape_str(shape) +
                  "); the header does not match the data: download the file again");
  }
  Tensor tensor = Tensor::empty(shape, type.stored);
  visit_dtype(type.stored, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int32_t> ||
                  std::is_same_v<T, float> || std::is_same_v<T, double>) {
      decode_elements(payload.data(), type, tensor.data<T>(), tensor.numel());
    }
  });
  return tensor;
}

}  // namespace tandem::data
