// Image decoding and encoding (libjpeg-turbo, libpng) and the pixel operations of the input
// pipeline's augmentations.
//
// libjpeg reports errors by calling a function that must not return; the C way is longjmp.
// Each libjpeg call therefore runs in a small function that holds the setjmp and owns nothing
// with a destructor, so the jump never skips C++ clean-up; it returns false on an error and the
// message waits in the error manager.
#include "tandem/image.h"

#include <png.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

extern "C" {
#include <jerror.h>
#include <jpeglib.h>
}

#include "tandem/random.h"

namespace tandem::image {
namespace {

std::string prefix(const std::string& what) {
  return what.empty() ? std::string() : what + ": ";
}

std::span<const std::uint8_t> byte_span(const Tensor& bytes, const char* function) {
  if (!bytes.defined() || bytes.dtype() != DType::u8 || bytes.rank() != 1) {
    throw InvalidArgument(
        std::string("image::") + function + ": expected encoded bytes (u8 of rank 1), got " +
        (bytes.defined() ? std::string(dtype_name(bytes.dtype())) + " " + shape_str(bytes.shape())
                         : std::string("an undefined tensor")));
  }
  return {static_cast<const std::uint8_t*>(bytes.raw_data()),
          static_cast<std::size_t>(bytes.numel())};
}

void require_image(const Tensor& image, const char* function) {
  if (!image.defined() || image.rank() != 3) {
    throw InvalidArgument(
        std::string("image::") + function + ": expected an image (H, W, C), got " +
        (image.defined() ? shape_str(image.shape()) : std::string("an undefined tensor")));
  }
  if (image.device().type != DeviceType::cpu) {
    throw InvalidArgument(std::string("image::") + function + ": the image is on " +
                          image.device().str() + "; image operations run in host memory");
  }
}

void check_pixels(std::int64_t height, std::int64_t width, const DecodeOptions& options,
                  const std::string& what) {
  if (height * width > options.max_pixels) {
    throw IoError(prefix(what) + "the image is " + std::to_string(width) + "x" +
                  std::to_string(height) + " = " + std::to_string(height * width) +
                  " pixels, above the limit of " + std::to_string(options.max_pixels) +
                  " that guards against decompression bombs; a training image is far smaller: "
                  "shrink the file, or leave it out of the data (a program that needs it raises "
                  "image::DecodeOptions::max_pixels)");
  }
}

// ---- JPEG ----

struct JpegErrors {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
  bool truncated = false;
};

void jpeg_fail(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

void jpeg_note(j_common_ptr info, int level) {
  // Warnings (level -1) about data that ends early mean a cut-off image; other warnings (extra
  // bytes between markers, say) are harmless and libjpeg recovers from them.
  if (level >= 0) return;
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  ++info->err->num_warnings;
  if (info->err->msg_code == JWRN_JPEG_EOF) {
    errors->truncated = true;
    (*info->err->format_message)(info, errors->message);
  }
}

class JpegDecoder {
 public:
  JpegDecoder() {
    info.err = jpeg_std_error(&errors.base);
    errors.base.error_exit = jpeg_fail;
    errors.base.emit_message = jpeg_note;
    jpeg_create_decompress(&info);
  }
  ~JpegDecoder() { jpeg_destroy_decompress(&info); }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  jpeg_decompress_struct info{};
  JpegErrors errors;
};

// Points the decoder at `bytes` and reads the header (jpeg_mem_src itself fails on no data).
bool jpeg_header_ok(JpegDecoder& decoder, std::span<const std::uint8_t> bytes) {
  if (setjmp(decoder.errors.jump)) return false;
  jpeg_mem_src(&decoder.info, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&decoder.info, TRUE);
  return true;
}

bool jpeg_start_ok(JpegDecoder& decoder) {
  if (setjmp(decoder.errors.jump)) return false;
  jpeg_start_decompress(&decoder.info);
  return true;
}

bool jpeg_dimensions_ok(JpegDecoder& decoder) {
  if (setjmp(decoder.errors.jump)) return false;
  jpeg_calc_output_dimensions(&decoder.info);
  return true;
}

bool jpeg_crop_ok(JpegDecoder& decoder, JDIMENSION* x, JDIMENSION* width) {
  if (setjmp(decoder.errors.jump)) return false;
  jpeg_crop_scanline(&decoder.info, x, width);
  return true;
}

bool jpeg_skip_ok(JpegDecoder& decoder, JDIMENSION lines) {
  if (setjmp(decoder.errors.jump)) return false;
  if (lines > 0) jpeg_skip_scanlines(&decoder.info, lines);
  return true;
}

// Reads `count` rows into `out`, `stride` bytes apart.
bool jpeg_rows_ok(JpegDecoder& decoder, std::uint8_t* out, std::size_t stride, JDIMENSION count) {
  if (setjmp(decoder.errors.jump)) return false;
  for (JDIMENSION done = 0; done < count;) {
    JSAMPROW row = out + static_cast<std::size_t>(done) * stride;
    const JDIMENSION got = jpeg_read_scanlines(&decoder.info, &row, 1);
    if (got == 0) return false;
    done += got;
  }
  return true;
}

[[noreturn]] void jpeg_error(const JpegDecoder& decoder, const std::string& what) {
  throw IoError(
      prefix(what) + "corrupt or unsupported JPEG data (libjpeg: " +
      std::string(decoder.errors.message[0] != 0 ? decoder.errors.message : "no scanlines") + ")");
}

void check_not_truncated(const JpegDecoder& decoder, const std::string& what) {
  if (decoder.errors.truncated) {
    throw IoError(prefix(what) + "the JPEG data is truncated (libjpeg: " + decoder.errors.message +
                  "); the file was cut short");
  }
}

// Reads the header and sets the output colour space and scale.
void prepare_jpeg(JpegDecoder& decoder, std::span<const std::uint8_t> bytes,
                  const DecodeOptions& options, const std::string& what) {
  if (!jpeg_header_ok(decoder, bytes)) jpeg_error(decoder, what);
  jpeg_decompress_struct& info = decoder.info;
  if (info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK) {
    throw IoError(prefix(what) +
                  "a CMYK JPEG; convert it to RGB (e.g. with ImageMagick's "
                  "`convert -colorspace sRGB`)");
  }
  if (options.channels != 0 && options.channels != 1 && options.channels != 3) {
    throw InvalidArgument(prefix(what) + "a JPEG decodes to 1 or 3 channels, not " +
                          std::to_string(options.channels));
  }
  const bool grey = options.channels == 1 || (options.channels == 0 && info.num_components == 1);
  info.out_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
  if (options.scale_eighths < 1 || options.scale_eighths > 8) {
    throw InvalidArgument(prefix(what) + "scale_eighths must be 1 to 8, got " +
                          std::to_string(options.scale_eighths));
  }
  info.scale_num = static_cast<unsigned>(options.scale_eighths);
  info.scale_denom = 8;
  info.dct_method =
      options.dct_method == DecodeOptions::Dct::integer_fast ? JDCT_IFAST : JDCT_ISLOW;
  info.do_fancy_upsampling = TRUE;
  check_pixels(info.image_height, info.image_width, options, what);
  if (!jpeg_dimensions_ok(decoder)) jpeg_error(decoder, what);
}

// ---- PNG ----

// png_image_free on scope exit (safe when already freed).
struct PngImage {
  png_image image{};
  PngImage() { image.version = PNG_IMAGE_VERSION; }
  ~PngImage() { png_image_free(&image); }
  PngImage(const PngImage&) = delete;
  PngImage& operator=(const PngImage&) = delete;
};

png_uint_32 png_format_for(int channels) {
  switch (channels) {
    case 1:
      return PNG_FORMAT_GRAY;
    case 2:
      return PNG_FORMAT_GA;
    case 3:
      return PNG_FORMAT_RGB;
    default:
      return PNG_FORMAT_RGBA;
  }
}

int png_channels_of(png_uint_32 format) {
  const bool color = (format & PNG_FORMAT_FLAG_COLOR) != 0;
  const bool alpha = (format & PNG_FORMAT_FLAG_ALPHA) != 0;
  return (color ? 3 : 1) + (alpha ? 1 : 0);
}

// Decoded uniform random numbers from (key, salt, seed).
std::array<float, 4> uniforms(std::uint64_t key, std::uint64_t salt, std::uint64_t seed) {
  const auto words = philox4x32(key, salt, seed);
  return {uniform_from_bits(words[0]), uniform_from_bits(words[1]), uniform_from_bits(words[2]),
          uniform_from_bits(words[3])};
}

}  // namespace

Format sniff(const Tensor& bytes) {
  const auto data = byte_span(bytes, "sniff");
  if (data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
    return Format::jpeg;
  static constexpr std::uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (data.size() >= 8 && std::equal(kPngSignature, kPngSignature + 8, data.begin())) {
    return Format::png;
  }
  return Format::unknown;
}

namespace {

[[noreturn]] void not_an_image(std::span<const std::uint8_t> data, const std::string& what) {
  std::string start;
  for (std::size_t i = 0; i < std::min<std::size_t>(4, data.size()); ++i) {
    char hex[4];
    std::snprintf(hex, sizeof hex, "%02X", data[i]);
    start += (i ? " " : "") + std::string(hex);
  }
  throw IoError(prefix(what) + "not a JPEG or PNG image (" +
                (data.empty() ? std::string("no data") : "starts with " + start) +
                "); only JPEG and PNG files can be decoded");
}

}  // namespace

Info read_info(const Tensor& bytes) {
  const auto data = byte_span(bytes, "read_info");
  switch (sniff(bytes)) {
    case Format::jpeg: {
      JpegDecoder decoder;
      if (!jpeg_header_ok(decoder, data)) jpeg_error(decoder, "");
      return {Format::jpeg, decoder.info.image_height, decoder.info.image_width,
              decoder.info.num_components};
    }
    case Format::png: {
      PngImage png;
      if (!png_image_begin_read_from_memory(&png.image, data.data(), data.size())) {
        throw IoError(std::string("corrupt PNG header (libpng: ") + png.image.message + ")");
      }
      return {Format::png, png.image.height, png.image.width, png_channels_of(png.image.format)};
    }
    case Format::unknown:
      break;
  }
  not_an_image(data, "");
}

Tensor decode_jpeg(const Tensor& bytes, const DecodeOptions& options, const std::string& what) {
  const auto data = byte_span(bytes, "decode_jpeg");
  JpegDecoder decoder;
  prepare_jpeg(decoder, data, options, what);
  jpeg_decompress_struct& info = decoder.info;
  Tensor image = Tensor::empty({info.output_height, info.output_width, info.out_color_components},
                               DType::u8);  // (H, W, C)
  if (!jpeg_start_ok(decoder)) jpeg_error(decoder, what);
  const std::size_t stride =
      static_cast<std::size_t>(info.output_width) * info.out_color_components;
  if (!jpeg_rows_ok(decoder, image.data<std::uint8_t>(), stride, info.output_height)) {
    jpeg_error(decoder, what);
  }
  check_not_truncated(decoder, what);
  jpeg_abort_decompress(&info);
  return image;
}

Tensor decode_and_crop_jpeg(const Tensor& bytes, const CropWindow& window,
                            const DecodeOptions& options, const std::string& what) {
  const auto data = byte_span(bytes, "decode_and_crop_jpeg");
  JpegDecoder decoder;
  prepare_jpeg(decoder, data, options, what);
  jpeg_decompress_struct& info = decoder.info;
  if (window.height <= 0 || window.width <= 0 || window.y < 0 || window.x < 0 ||
      window.y + window.height > info.image_height || window.x + window.width > info.image_width) {
    throw InvalidArgument(prefix(what) + "crop window (y " + std::to_string(window.y) + ", x " +
                          std::to_string(window.x) + ", " + std::to_string(window.height) + "x" +
                          std::to_string(window.width) + ") is not inside the " +
                          std::to_string(info.image_height) + "x" +
                          std::to_string(info.image_width) + " image");
  }
  // The window in output pixels: scaled, rounded outwards, clamped to the output.
  const std::int64_t eighths = options.scale_eighths;
  const std::int64_t top = window.y * eighths / 8;
  const std::int64_t left = window.x * eighths / 8;
  const std::int64_t bottom =
      std::min<std::int64_t>(info.output_height, ((window.y + window.height) * eighths + 7) / 8);
  const std::int64_t right =
      std::min<std::int64_t>(info.output_width, ((window.x + window.width) * eighths + 7) / 8);
  const std::int64_t channels = info.out_color_components;
  Tensor image = Tensor::empty({bottom - top, right - left, channels}, DType::u8);  // (h, w, C)
  if (!jpeg_start_ok(decoder)) jpeg_error(decoder, what);
  // libjpeg widens the column range to whole iMCUs; the rows it decodes are that wide.
  auto crop_x = static_cast<JDIMENSION>(left);
  auto crop_width = static_cast<JDIMENSION>(right - left);
  if (!jpeg_crop_ok(decoder, &crop_x, &crop_width)) jpeg_error(decoder, what);
  if (!jpeg_skip_ok(decoder, static_cast<JDIMENSION>(top))) jpeg_error(decoder, what);
  std::vector<std::uint8_t> row(static_cast<std::size_t>(info.output_width) * channels);
  auto* out = image.data<std::uint8_t>();
  const std::size_t out_stride = static_cast<std::size_t>(right - left) * channels;
  const std::size_t column = static_cast<std::size_t>(left - crop_x) * channels;
  for (std::int64_t y = top; y < bottom; ++y) {
    if (!jpeg_rows_ok(decoder, row.data(), row.size(), 1)) jpeg_error(decoder, what);
    std::memcpy(out + static_cast<std::size_t>(y - top) * out_stride, row.data() + column,
                out_stride);
  }
  check_not_truncated(decoder, what);
  jpeg_abort_decompress(&info);
  return image;
}

Tensor decode_png(const Tensor& bytes, const DecodeOptions& options, const std::string& what) {
  const auto data = byte_span(bytes, "decode_png");
  if (options.channels < 0 || options.channels > 4) {
    throw InvalidArgument(prefix(what) + "a PNG decodes to 1 to 4 channels, not " +
                          std::to_string(options.channels));
  }
  PngImage png;
  if (!png_image_begin_read_from_memory(&png.image, data.data(), data.size())) {
    throw IoError(prefix(what) + "corrupt PNG data (libpng: " + png.image.message + ")");
  }
  check_pixels(png.image.height, png.image.width, options, what);
  const int channels = options.channels != 0 ? options.channels : png_channels_of(png.image.format);
  png.image.format = png_format_for(channels);
  Tensor image =
      Tensor::empty({png.image.height, png.image.width, channels}, DType::u8);  // (H, W, C)
  if (!png_image_finish_read(&png.image, nullptr, image.raw_data(), 0, nullptr)) {
    throw IoError(prefix(what) + "corrupt or truncated PNG data (libpng: " + png.image.message +
                  ")");
  }
  return image;
}

Tensor decode(const Tensor& bytes, const DecodeOptions& options, const std::string& what) {
  switch (sniff(bytes)) {
    case Format::jpeg:
      return decode_jpeg(bytes, options, what);
    case Format::png:
      return decode_png(bytes, options, what);
    case Format::unknown:
      break;
  }
  not_an_image(byte_span(bytes, "decode"), what);
}

// ---- Encoding ----

namespace {

struct JpegEncoder {
  JpegEncoder() {
    info.err = jpeg_std_error(&errors.base);
    errors.base.error_exit = jpeg_fail;
    jpeg_create_compress(&info);
  }
  ~JpegEncoder() {
    jpeg_destroy_compress(&info);
    std::free(buffer);
  }
  JpegEncoder(const JpegEncoder&) = delete;
  JpegEncoder& operator=(const JpegEncoder&) = delete;

  jpeg_compress_struct info{};
  JpegErrors errors;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
};

bool jpeg_encode_ok(JpegEncoder& encoder, const std::uint8_t* pixels, std::size_t stride) {
  if (setjmp(encoder.errors.jump)) return false;
  jpeg_start_compress(&encoder.info, TRUE);
  while (encoder.info.next_scanline < encoder.info.image_height) {
    auto* row = const_cast<JSAMPROW>(pixels + encoder.info.next_scanline * stride);
    jpeg_write_scanlines(&encoder.info, &row, 1);
  }
  jpeg_finish_compress(&encoder.info);
  return true;
}

bool jpeg_setup_ok(JpegEncoder& encoder, int quality, bool progressive) {
  if (setjmp(encoder.errors.jump)) return false;
  jpeg_mem_dest(&encoder.info, &encoder.buffer, &encoder.size);
  jpeg_set_defaults(&encoder.info);
  jpeg_set_quality(&encoder.info, quality, TRUE);
  if (progressive) jpeg_simple_progression(&encoder.info);
  return true;
}

Tensor to_bytes(const void* data, std::size_t size) {
  Tensor bytes = Tensor::empty({static_cast<std::int64_t>(size)}, DType::u8);  // (n,)
  if (size > 0) std::memcpy(bytes.raw_data(), data, size);
  return bytes;
}

}  // namespace

Tensor encode_jpeg(const Tensor& image, int quality, bool progressive) {
  require_image(image, "encode_jpeg");
  if (image.dtype() != DType::u8 || (image.dim(2) != 1 && image.dim(2) != 3)) {
    throw InvalidArgument("image::encode_jpeg: expected u8 (H, W, 1 or 3), got " +
                          std::string(dtype_name(image.dtype())) + " " + shape_str(image.shape()));
  }
  if (quality < 1 || quality > 100) {
    throw InvalidArgument("image::encode_jpeg: quality must be in [1, 100], got " +
                          std::to_string(quality));
  }
  if (image.dim(0) == 0 || image.dim(1) == 0 || image.dim(0) > 65500 || image.dim(1) > 65500) {
    throw InvalidArgument("image::encode_jpeg: JPEG images are 1 to 65500 pixels a side, got " +
                          shape_str(image.shape()));
  }
  JpegEncoder encoder;
  encoder.info.image_width = static_cast<JDIMENSION>(image.dim(1));
  encoder.info.image_height = static_cast<JDIMENSION>(image.dim(0));
  encoder.info.input_components = static_cast<int>(image.dim(2));
  encoder.info.in_color_space = image.dim(2) == 1 ? JCS_GRAYSCALE : JCS_RGB;
  if (!jpeg_setup_ok(encoder, quality, progressive) ||
      !jpeg_encode_ok(encoder, image.data<std::uint8_t>(),
                      static_cast<std::size_t>(image.dim(1) * image.dim(2)))) {
    throw Error(std::string("image::encode_jpeg: libjpeg failed: ") + encoder.errors.message);
  }
  return to_bytes(encoder.buffer, encoder.size);
}

Tensor encode_png(const Tensor& image) {
  require_image(image, "encode_png");
  if (image.dtype() != DType::u8 || image.dim(2) < 1 || image.dim(2) > 4) {
    throw InvalidArgument("image::encode_png: expected u8 (H, W, 1 to 4), got " +
                          std::string(dtype_name(image.dtype())) + " " + shape_str(image.shape()));
  }
  PngImage png;
  png.image.width = static_cast<png_uint_32>(image.dim(1));
  png.image.height = static_cast<png_uint_32>(image.dim(0));
  png.image.format = png_format_for(static_cast<int>(image.dim(2)));
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png.image, nullptr, &size, 0, image.raw_data(), 0, nullptr)) {
    throw Error(std::string("image::encode_png: libpng failed: ") + png.image.message);
  }
  std::vector<std::uint8_t> buffer(size);
  if (!png_image_write_to_memory(&png.image, buffer.data(), &size, 0, image.raw_data(), 0,
                                 nullptr)) {
    throw Error(std::string("image::encode_png: libpng failed: ") + png.image.message);
  }
  return to_bytes(buffer.data(), size);
}

// ---- Pixel operations ----

namespace {

// For each output coordinate: the two input coordinates and the weight of the second
// (half-pixel centres, as tf.image.resize with antialias off).
struct Taps {
  std::vector<std::int64_t> low;
  std::vector<std::int64_t> high;
  std::vector<float> weight;
};

Taps taps(std::int64_t in, std::int64_t out) {
  Taps result;
  result.low.resize(static_cast<std::size_t>(out));
  result.high.resize(static_cast<std::size_t>(out));
  result.weight.resize(static_cast<std::size_t>(out));
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    const double source =
        std::clamp((static_cast<double>(o) + 0.5) * scale - 0.5, 0.0, static_cast<double>(in - 1));
    const auto low = static_cast<std::int64_t>(std::floor(source));
    const auto index = static_cast<std::size_t>(o);
    result.low[index] = low;
    result.high[index] = std::min(low + 1, in - 1);
    result.weight[index] = static_cast<float>(source - static_cast<double>(low));
  }
  return result;
}

// One source row interpolated along x to the output width: the horizontal half of a bilinear
// resize. kChannels > 0 fixes the channel count at compile time so the inner loop unrolls.
template <int kChannels, typename T>
void resize_row(const T* row, const Taps& columns, std::int64_t channels, float* out) {
  const std::int64_t c_count = kChannels > 0 ? kChannels : channels;
  const std::size_t width = columns.low.size();
  for (std::size_t x = 0; x < width; ++x) {
    const T* left = row + columns.low[x] * c_count;
    const T* right = row + columns.high[x] * c_count;
    const float w = columns.weight[x];
    float* target = out + static_cast<std::int64_t>(x) * c_count;
    for (std::int64_t c = 0; c < c_count; ++c) {
      const auto a = static_cast<float>(left[c]);
      target[c] = a + w * (static_cast<float>(right[c]) - a);
    }
  }
}

template <typename T>
void store_row(const float* values, std::int64_t count, T* out) {
  for (std::int64_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, std::uint8_t>) {
      out[i] = static_cast<std::uint8_t>(std::clamp(values[i] + 0.5f, 0.0f, 255.0f));
    } else {
      out[i] = values[i];
    }
  }
}

// Shrinking along y: every output row blends two source rows, so blend them first, along the
// whole contiguous source row (a loop the compiler vectorises), and interpolate the one blended
// row along x: one horizontal pass per output row instead of two.
template <int kChannels, typename T>
void shrink_rows_first(const T* in, std::int64_t in_height, std::int64_t in_width, T* out,
                       std::int64_t out_height, std::int64_t out_width, std::int64_t channels) {
  const Taps rows = taps(in_height, out_height);
  const Taps columns = taps(in_width, out_width);
  const std::int64_t in_stride = in_width * channels;
  const std::int64_t row_values = out_width * channels;
  std::vector<float> blended(static_cast<std::size_t>(in_stride));  // (in_width, C)
  std::vector<float> values(static_cast<std::size_t>(row_values));  // (out_width, C)
  for (std::int64_t y = 0; y < out_height; ++y) {
    const auto yi = static_cast<std::size_t>(y);
    const T* top = in + rows.low[yi] * in_stride;
    const T* bottom = in + rows.high[yi] * in_stride;
    const float w = rows.weight[yi];
    for (std::int64_t i = 0; i < in_stride; ++i) {
      const auto a = static_cast<float>(top[i]);
      blended[static_cast<std::size_t>(i)] = a + w * (static_cast<float>(bottom[i]) - a);
    }
    resize_row<kChannels>(blended.data(), columns, channels, values.data());
    store_row(values.data(), row_values, out + y * row_values);
  }
}

// Enlarging along y: each source row is interpolated along x once (consecutive output rows
// share source rows), then pairs of those rows are blended along y.
template <int kChannels, typename T>
void resize_bilinear(const T* in, std::int64_t in_height, std::int64_t in_width, T* out,
                     std::int64_t out_height, std::int64_t out_width, std::int64_t channels) {
  if (out_height < in_height) {
    return shrink_rows_first<kChannels>(in, in_height, in_width, out, out_height, out_width,
                                        channels);
  }
  const Taps rows = taps(in_height, out_height);
  const Taps columns = taps(in_width, out_width);
  const std::int64_t row_values = out_width * channels;
  std::vector<float> low_row(static_cast<std::size_t>(row_values));
  std::vector<float> high_row(low_row.size());
  std::vector<float> low_row_blend(low_row.size());
  std::int64_t low_index = -1;
  std::int64_t high_index = -1;
  const std::int64_t in_stride = in_width * channels;
  for (std::int64_t y = 0; y < out_height; ++y) {
    const auto yi = static_cast<std::size_t>(y);
    const std::int64_t low = rows.low[yi];
    const std::int64_t high = rows.high[yi];
    if (low != low_index) {
      if (low == high_index) {
        std::swap(low_row, high_row);
        std::swap(low_index, high_index);
      } else {
        resize_row<kChannels>(in + low * in_stride, columns, channels, low_row.data());
        low_index = low;
      }
    }
    if (high != high_index) {
      resize_row<kChannels>(in + high * in_stride, columns, channels, high_row.data());
      high_index = high;
    }
    const float w = rows.weight[yi];
    for (std::int64_t i = 0; i < row_values; ++i) {
      const float top = low_row[static_cast<std::size_t>(i)];
      low_row_blend[static_cast<std::size_t>(i)] =
          top + w * (high_row[static_cast<std::size_t>(i)] - top);
    }
    store_row(low_row_blend.data(), row_values, out + y * row_values);
  }
}

template <typename T>
void resize_any(const T* in, std::int64_t in_height, std::int64_t in_width, T* out,
                std::int64_t out_height, std::int64_t out_width, std::int64_t channels) {
  switch (channels) {
    case 1:
      return resize_bilinear<1>(in, in_height, in_width, out, out_height, out_width, channels);
    case 3:
      return resize_bilinear<3>(in, in_height, in_width, out, out_height, out_width, channels);
    default:
      return resize_bilinear<0>(in, in_height, in_width, out, out_height, out_width, channels);
  }
}

}  // namespace

Tensor resize(const Tensor& image, std::int64_t height, std::int64_t width) {
  require_image(image, "resize");
  if (height <= 0 || width <= 0) {
    throw InvalidArgument("image::resize: the size must be positive, got " +
                          std::to_string(height) + "x" + std::to_string(width));
  }
  if (image.dim(0) == 0 || image.dim(1) == 0) {
    throw InvalidArgument("image::resize: cannot resize an empty image " +
                          shape_str(image.shape()));
  }
  if (image.dtype() != DType::u8 && image.dtype() != DType::f32) {
    throw InvalidArgument(std::string("image::resize: takes u8 or f32 images, got ") +
                          dtype_name(image.dtype()) + "; cast() it first");
  }
  Tensor result = Tensor::empty({height, width, image.dim(2)}, image.dtype());  // (h, w, C)
  if (image.dtype() == DType::u8) {
    resize_any(image.data<std::uint8_t>(), image.dim(0), image.dim(1), result.data<std::uint8_t>(),
               height, width, image.dim(2));
  } else {
    resize_any(image.data<float>(), image.dim(0), image.dim(1), result.data<float>(), height, width,
               image.dim(2));
  }
  return result;
}

Tensor crop(const Tensor& image, const CropWindow& window) {
  require_image(image, "crop");
  if (window.height <= 0 || window.width <= 0 || window.y < 0 || window.x < 0 ||
      window.y + window.height > image.dim(0) || window.x + window.width > image.dim(1)) {
    throw InvalidArgument("image::crop: window (y " + std::to_string(window.y) + ", x " +
                          std::to_string(window.x) + ", " + std::to_string(window.height) + "x" +
                          std::to_string(window.width) + ") is not inside the image " +
                          shape_str(image.shape()));
  }
  Tensor result = Tensor::empty({window.height, window.width, image.dim(2)}, image.dtype());
  const std::size_t pixel = static_cast<std::size_t>(image.dim(2)) * dtype_size(image.dtype());
  const auto* in = static_cast<const std::uint8_t*>(image.raw_data());
  auto* out = static_cast<std::uint8_t*>(result.raw_data());
  const std::size_t in_stride = static_cast<std::size_t>(image.dim(1)) * pixel;
  const std::size_t out_stride = static_cast<std::size_t>(window.width) * pixel;
  for (std::int64_t y = 0; y < window.height; ++y) {
    std::memcpy(out + static_cast<std::size_t>(y) * out_stride,
                in + static_cast<std::size_t>(window.y + y) * in_stride +
                    static_cast<std::size_t>(window.x) * pixel,
                out_stride);
  }
  return result;
}

Tensor pad(const Tensor& image, std::int64_t pixels) {
  require_image(image, "pad");
  if (pixels < 0) {
    throw InvalidArgument("image::pad: pixels must be >= 0, got " + std::to_string(pixels));
  }
  const std::int64_t height = image.dim(0);
  const std::int64_t width = image.dim(1);
  // (H + 2p, W + 2p, C)
  Tensor result =
      Tensor::zeros({height + 2 * pixels, width + 2 * pixels, image.dim(2)}, image.dtype());
  const std::size_t pixel = static_cast<std::size_t>(image.dim(2)) * dtype_size(image.dtype());
  const auto* in = static_cast<const std::uint8_t*>(image.raw_data());
  auto* out = static_cast<std::uint8_t*>(result.raw_data());
  const std::size_t in_stride = static_cast<std::size_t>(width) * pixel;
  const std::size_t out_stride = static_cast<std::size_t>(width + 2 * pixels) * pixel;
  for (std::int64_t y = 0; y < height; ++y) {
    std::memcpy(out + static_cast<std::size_t>(y + pixels) * out_stride +
                    static_cast<std::size_t>(pixels) * pixel,
                in + static_cast<std::size_t>(y) * in_stride, in_stride);
  }
  return result;
}

Tensor flip_left_right(const Tensor& image) {
  require_image(image, "flip_left_right");
  Tensor result = Tensor::empty(image.shape(), image.dtype());
  const std::size_t pixel = static_cast<std::size_t>(image.dim(2)) * dtype_size(image.dtype());
  const auto* in = static_cast<const std::uint8_t*>(image.raw_data());
  auto* out = static_cast<std::uint8_t*>(result.raw_data());
  const std::int64_t width = image.dim(1);
  const auto mirror = [&]<std::size_t kPixel>(std::size_t pixel_bytes) {
    const std::size_t bytes = kPixel > 0 ? kPixel : pixel_bytes;
    for (std::int64_t y = 0; y < image.dim(0); ++y) {
      const std::uint8_t* in_row = in + static_cast<std::size_t>(y * width) * bytes;
      std::uint8_t* out_row = out + static_cast<std::size_t>(y * width) * bytes;
      for (std::int64_t x = 0; x < width; ++x) {
        const std::uint8_t* from = in_row + static_cast<std::size_t>(width - 1 - x) * bytes;
        std::uint8_t* to = out_row + static_cast<std::size_t>(x) * bytes;
        for (std::size_t b = 0; b < bytes; ++b)
          to[b] = from[b];
      }
    }
  };
  // The common pixel sizes (grey and RGB bytes, RGB floats) with their size known to the
  // compiler: a call to memcpy per pixel would cost more than the copy.
  switch (pixel) {
    case 1:
      mirror.operator()<1>(pixel);
      break;
    case 3:
      mirror.operator()<3>(pixel);
      break;
    case 12:
      mirror.operator()<12>(pixel);
      break;
    default:
      mirror.operator()<0>(pixel);
  }
  return result;
}

Tensor normalize(const Tensor& image, const std::vector<float>& mean,
                 const std::vector<float>& stddev) {
  require_image(image, "normalize");
  const std::int64_t channels = image.dim(2);
  auto per_channel = [&](const std::vector<float>& values, const char* name) {
    if (values.size() == 1)
      return std::vector<float>(static_cast<std::size_t>(channels), values[0]);
    if (static_cast<std::int64_t>(values.size()) != channels) {
      throw InvalidArgument("image::normalize: " + std::string(name) + " has " +
                            std::to_string(values.size()) + " values for an image with " +
                            std::to_string(channels) + " channels; give one or one per channel");
    }
    return values;
  };
  const std::vector<float> means = per_channel(mean, "mean");
  std::vector<float> scales = per_channel(stddev, "stddev");
  for (float& scale : scales) {
    if (!(scale > 0.0f)) throw InvalidArgument("image::normalize: stddev values must be positive");
    scale = 1.0f / scale;
  }
  Tensor result = Tensor::empty(image.shape(), DType::f32);  // (H, W, C)
  float* out = result.data<float>();
  const std::int64_t pixels = image.dim(0) * image.dim(1);
  if (image.dtype() == DType::u8) {
    // The channel pattern repeats every pixel; laid out over a block of pixels, the mean and
    // scale of each value in a block sit at the same offset, so the loop over a block is
    // contiguous and vectorises (a per-value table look-up would not).
    constexpr std::int64_t kBlockPixels = 16;
    const std::int64_t block = kBlockPixels * channels;
    std::vector<float> block_means(static_cast<std::size_t>(block));
    std::vector<float> block_scales(block_means.size());
    for (std::int64_t j = 0; j < block; ++j) {
      block_means[static_cast<std::size_t>(j)] = means[static_cast<std::size_t>(j % channels)];
      block_scales[static_cast<std::size_t>(j)] = scales[static_cast<std::size_t>(j % channels)];
    }
    const std::uint8_t* in = image.data<std::uint8_t>();
    const std::int64_t values = pixels * channels;
    for (std::int64_t start = 0; start < values; start += block) {
      const std::int64_t count = std::min(block, values - start);
      const float* mean_of = block_means.data();
      const float* scale_of = block_scales.data();
      for (std::int64_t j = 0; j < count; ++j)
        out[start + j] = (static_cast<float>(in[start + j]) - mean_of[j]) * scale_of[j];
    }
    return result;
  }
  visit_dtype(image.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(image.raw_data());
    for (std::int64_t p = 0; p < pixels; ++p) {
      for (std::int64_t c = 0; c < channels; ++c) {
        const auto i = static_cast<std::size_t>(p * channels + c);
        out[i] = (convert_element<float>(in[i]) - means[static_cast<std::size_t>(c)]) *
                 scales[static_cast<std::size_t>(c)];
      }
    }
  });
  return result;
}

CropWindow sample_crop(std::int64_t height, std::int64_t width,
                       const RandomResizedCropOptions& options, std::uint64_t key) {
  if (height <= 0 || width <= 0) {
    throw InvalidArgument("image::sample_crop: the image is empty (" + std::to_string(height) +
                          "x" + std::to_string(width) + ")");
  }
  if (!(0.0 < options.scale[0] && options.scale[0] <= options.scale[1] &&
        options.scale[1] <= 1.0) ||
      !(0.0 < options.ratio[0] && options.ratio[0] <= options.ratio[1])) {
    throw InvalidArgument(
        "image::sample_crop: need 0 < scale[0] <= scale[1] <= 1 and 0 < ratio[0] "
        "<= ratio[1]");
  }
  const double area = static_cast<double>(height * width);
  const double log_low = std::log(options.ratio[0]);
  const double log_high = std::log(options.ratio[1]);
  for (int attempt = 0; attempt < options.attempts; ++attempt) {
    const auto u = uniforms(key, static_cast<std::uint64_t>(attempt), 0x5A3D1E);
    const double target = area * (options.scale[0] + (options.scale[1] - options.scale[0]) * u[0]);
    const double ratio = std::exp(log_low + (log_high - log_low) * u[1]);
    const auto w = static_cast<std::int64_t>(std::lround(std::sqrt(target * ratio)));
    const auto h = static_cast<std::int64_t>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const auto y = static_cast<std::int64_t>(u[2] * static_cast<float>(height - h + 1));
      const auto x = static_cast<std::int64_t>(u[3] * static_cast<float>(width - w + 1));
      return {std::min(y, height - h), std::min(x, width - w), h, w};
    }
  }
  // A centre crop at the nearest allowed aspect ratio.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  std::int64_t w = width;
  std::int64_t h = height;
  if (in_ratio < options.ratio[0]) {
    h = std::max<std::int64_t>(1, std::lround(static_cast<double>(width) / options.ratio[0]));
  } else if (in_ratio > options.ratio[1]) {
    w = std::max<std::int64_t>(1, std::lround(static_cast<double>(height) * options.ratio[1]));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

}  // namespace tandem::image
