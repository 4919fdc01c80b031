// JPEG decoding: full, at a reduced DCT scale, and cropped (the window from the input's last
// bytes): an image or an error, nothing else.
#include <cstring>

#include "tandem/image.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace image = tandem::image;
  tandem::Tensor bytes =
      tandem::Tensor::empty({static_cast<std::int64_t>(size)}, tandem::DType::u8);
  if (size > 0) std::memcpy(bytes.raw_data(), data, size);
  // Small images only: the bomb guard is what stops a huge claimed size.
  const image::DecodeOptions options{.max_pixels = 4'000'000};
  try {
    (void)image::decode_jpeg(bytes, options);
  } catch (const tandem::Error&) {
  }
  try {
    const image::Info info = image::read_info(bytes);
    const int eighths = size > 0 ? 1 + data[size - 1] % 8 : 8;
    const image::CropWindow window{info.height / 3, info.width / 4, info.height / 2 + 1,
                                   info.width / 2 + 1};
    (void)image::decode_and_crop_jpeg(bytes, window,
                                      {.scale_eighths = eighths, .max_pixels = 4'000'000});
  } catch (const tandem::Error&) {
  }
  return 0;
}
