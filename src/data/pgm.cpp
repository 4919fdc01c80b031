// Netpbm grey maps (PGM, P2 ASCII and P5 binary, 8 or 16 bits a sample), as `tandem predict`
// reads single images beside PNG and JPEG.
#include <algorithm>
#include <cctype>

#include "tandem/error.h"
#include "tandem/image.h"

namespace tandem::image {
namespace {

// The next whitespace-separated token of a PGM header, skipping '#' comments.
std::string pgm_token(const std::vector<std::uint8_t>& bytes, std::size_t& at,
                      const std::string& path) {
  while (at < bytes.size()) {
    if (bytes[at] == '#') {
      while (at < bytes.size() && bytes[at] != '\n')
        ++at;
    } else if (std::isspace(bytes[at])) {
      ++at;
    } else {
      break;
    }
  }
  std::string token;
  while (at < bytes.size() && !std::isspace(bytes[at]) && bytes[at] != '#')
    token += static_cast<char>(bytes[at++]);
  if (token.empty()) throw IoError(path + ": the PGM header is truncated");
  return token;
}

// A header number or an ASCII pixel: an integer of at least `minimum`.
std::int64_t pgm_number(const std::vector<std::uint8_t>& bytes, std::size_t& at,
                        const std::string& path, const char* what, std::int64_t minimum = 1) {
  const std::string token = pgm_token(bytes, at, path);
  if (!std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      token.size() > 9 || std::stoll(token) < minimum) {
    throw IoError(path + ": the PGM " + what + " '" + token +
                  "' is not an integer >= " + std::to_string(minimum));
  }
  return std::stoll(token);
}

}  // namespace

Tensor decode_pgm(const std::vector<std::uint8_t>& bytes, const std::string& path) {
  if (bytes.size() < 2 || bytes[0] != 'P' || (bytes[1] != '2' && bytes[1] != '5')) {
    throw IoError(path + ": not a PGM image (it starts with neither P2 nor P5)");
  }
  const bool ascii = bytes[1] == '2';
  std::size_t at = 2;
  const std::int64_t width = pgm_number(bytes, at, path, "width");
  const std::int64_t height = pgm_number(bytes, at, path, "height");
  const std::int64_t maxval = pgm_number(bytes, at, path, "maximum value");
  if (maxval > 65535)
    throw IoError(path + ": PGM maximum value " + std::to_string(maxval) + " is over 65535");
  if (width * height > 100'000'000) {
    throw IoError(path + ": a " + std::to_string(width) + "x" + std::to_string(height) +
                  " image is too large");
  }
  Tensor image = Tensor::empty({height, width, 1}, DType::f32);  // (H, W, 1)
  float* pixels = image.data<float>();
  const std::int64_t count = width * height;
  if (ascii) {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t value = pgm_number(bytes, at, path, "pixel", 0);
      if (value > maxval) {
        throw IoError(path + ": PGM pixel " + std::to_string(i) + " is " + std::to_string(value) +
                      ", over the maximum " + std::to_string(maxval));
      }
      pixels[i] = static_cast<float>(value) / static_cast<float>(maxval);
    }
    return image;
  }
  ++at;  // the single whitespace byte after the maximum value
  const std::int64_t sample_bytes = maxval > 255 ? 2 : 1;
  if (bytes.size() < at + static_cast<std::size_t>(count * sample_bytes)) {
    throw IoError(path + ": the PGM data is truncated (" + std::to_string(bytes.size() - at) +
                  " bytes for " + std::to_string(count) + " pixels)");
  }
  for (std::int64_t i = 0; i < count; ++i) {
    const std::size_t offset = at + static_cast<std::size_t>(i * sample_bytes);
    // 16-bit samples are big-endian.
    const unsigned value =
        sample_bytes == 2 ? (bytes[offset] << 8 | bytes[offset + 1]) : bytes[offset];
    pixels[i] = static_cast<float>(value) / static_cast<float>(maxval);
  }
  return image;
}

}  // namespace tandem::image
