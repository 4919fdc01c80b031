#pragma once
// Images for the input pipeline: decoding (JPEG through libjpeg-turbo, PNG through libpng),
// encoding, and the augmentations of an ImageNet-style pipeline. Images are (H, W, C) tensors,
// u8 as decoded or f32 after normalisation; encoded images are rank-1 u8 byte strings.
// The tensor functions are in tandem::image; the map functions that apply them to one component
// of a pipeline element are in tandem::data.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/pipeline.h"
#include "tandem/tensor.h"

namespace tandem::image {

enum class Format { jpeg, png, unknown };

// What the header says, without decoding the pixels.
struct Info {
  Format format = Format::unknown;
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t channels = 0;
};

struct DecodeOptions {
  // 0 keeps the file's channels; 1 gives grey, 3 RGB (4 RGBA: PNG only).
  int channels = 0;
  // JPEG only: decode at scale_eighths/8 of the full size (1 to 8). libjpeg-turbo scales in the
  // inverse DCT, which is much faster than decoding in full and shrinking afterwards, and
  // filters as well as a good resize.
  int scale_eighths = 8;
  // A decompression-bomb guard: larger images are refused before any pixel memory is taken.
  std::int64_t max_pixels = 100'000'000;
  // JPEG only: the inverse DCT. TensorFlow's decode_jpeg defaults to the fast integer one,
  // trading a little accuracy for speed; so does Tandem. integer_accurate is libjpeg's default.
  enum class Dct { integer_fast, integer_accurate };
  Dct dct_method = Dct::integer_fast;
};

// A region of the image, in pixels of the full-size image.
struct CropWindow {
  std::int64_t y = 0;
  std::int64_t x = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
};

// The format from the first bytes.
Format sniff(const Tensor& bytes);
// Throws IoError for data that is neither JPEG nor PNG or whose header is corrupt.
Info read_info(const Tensor& bytes);

// A netpbm grey map (PGM: P2 or P5, 8 or 16 bits a sample, 16-bit ones big-endian) as (H, W, 1)
// f32 in [0, 1]. Throws IoError naming `what` for a truncated or malformed file.
Tensor decode_pgm(const std::vector<std::uint8_t>& bytes, const std::string& what);

// (H, W, C) u8. Throws IoError for corrupt or truncated data, naming what libjpeg or libpng
// said; `what` names the data in the message (a file, a record).
Tensor decode(const Tensor& bytes, const DecodeOptions& options = {}, const std::string& what = "");
Tensor decode_jpeg(const Tensor& bytes, const DecodeOptions& options = {},
                   const std::string& what = "");
Tensor decode_png(const Tensor& bytes, const DecodeOptions& options = {},
                  const std::string& what = "");
// Decodes only the rows and the columns (to the nearest iMCU) that `window` needs, as
// tf.image.decode_and_crop_jpeg does; with scale_eighths < 8 the result is the window at that
// reduced size (its edges scaled and rounded outwards).
Tensor decode_and_crop_jpeg(const Tensor& bytes, const CropWindow& window,
                            const DecodeOptions& options = {}, const std::string& what = "");

// u8 (H, W, C) with C 1 or 3 to JPEG; quality 1..100; progressive: scans of increasing detail
// (as many photographs on the web are stored) instead of one baseline scan.
Tensor encode_jpeg(const Tensor& image, int quality = 90, bool progressive = false);
// u8 (H, W, C) with C 1, 2, 3 or 4 to PNG.
Tensor encode_png(const Tensor& image);

// Bilinear, half-pixel centres (tf.image.resize's default); u8 stays u8 (rounded), f32 stays f32.
Tensor resize(const Tensor& image, std::int64_t height, std::int64_t width);
Tensor crop(const Tensor& image, const CropWindow& window);
Tensor flip_left_right(const Tensor& image);
// `pixels` zeros added on every side: (H + 2p, W + 2p, C).
Tensor pad(const Tensor& image, std::int64_t pixels);
// f32 (value - mean[c]) / stddev[c]; one value broadcasts to every channel.
Tensor normalize(const Tensor& image, const std::vector<float>& mean,
                 const std::vector<float>& stddev);

struct RandomResizedCropOptions {
  // Fraction of the image's area the crop covers, and its aspect ratio (width / height): the
  // Inception / ImageNet recipe.
  std::array<double, 2> scale{0.08, 1.0};
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};
  // Tries before falling back to a centre crop of the whole image.
  int attempts = 10;
};
// A crop window drawn as RandomResizedCrop draws it, from the 64-bit `key`.
CropWindow sample_crop(std::int64_t height, std::int64_t width,
                       const RandomResizedCropOptions& options, std::uint64_t key);

}  // namespace tandem::image

namespace tandem::data {

// Encoded bytes -> (H, W, C) u8.
MapFn decode_image(image::DecodeOptions options = {}, std::string key = "image");
MapFn resize(std::int64_t height, std::int64_t width, std::string key = "image");
// A random (height, width) window; the image must be at least that large.
MapFn random_crop(std::int64_t height, std::int64_t width, std::uint64_t seed,
                  std::string key = "image");
// Shifts the image by up to `pixels` in each direction, filling with zeros: a random window of
// its own size from the image padded by `pixels` (the CIFAR-10 training recipe, 4 pixels).
MapFn random_translate(std::int64_t pixels, std::uint64_t seed, std::string key = "image");
// Mirrors half of the images, chosen at random.
MapFn random_flip_left_right(std::uint64_t seed, std::string key = "image");
MapFn normalize(std::vector<float> mean, std::vector<float> stddev, std::string key = "image");
// The ImageNet training crop: a random window (sample_crop) resized to (height, width), u8.
// Given encoded JPEG bytes it decodes only the window, at the smallest of the DCT scales 8/8,
// 4/8, 2/8 and 1/8 (those libjpeg-turbo has SIMD code for) that keeps it at least
// (height, width): a lighter decode than decoding everything and cropping after.
// Given a decoded image it crops and resizes it.
MapFn random_resized_crop(std::int64_t height, std::int64_t width, std::uint64_t seed,
                          image::RandomResizedCropOptions options = {}, std::string key = "image");

}  // namespace tandem::data
