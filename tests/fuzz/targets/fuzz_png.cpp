// PNG decoding, to the file's channels and to each fixed count: an image or an error.
#include <cstring>

#include "tandem/image.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace image = tandem::image;
  tandem::Tensor bytes =
      tandem::Tensor::empty({static_cast<std::int64_t>(size)}, tandem::DType::u8);
  if (size > 0) std::memcpy(bytes.raw_data(), data, size);
  const int channels = size > 0 ? data[size - 1] % 5 : 0;
  try {
    (void)image::decode_png(bytes, {.channels = channels, .max_pixels = 4'000'000});
  } catch (const tandem::Error&) {
  }
  return 0;
}
