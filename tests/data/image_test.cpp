// Image decoding, encoding and the augmentations, against hand-computed values and against
// each other (a cropped decode against a decode then a crop).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "support/errors.h"
#include "tandem/image.h"

namespace tandem::image {
namespace {

using data::Element;
using data::Pipeline;

// A smooth (H, W, C) u8 image: JPEG keeps such images within a few levels.
Tensor gradient(std::int64_t height, std::int64_t width, std::int64_t channels) {
  std::vector<std::uint8_t> pixels;
  for (std::int64_t y = 0; y < height; ++y) {
    for (std::int64_t x = 0; x < width; ++x) {
      for (std::int64_t c = 0; c < channels; ++c)
        pixels.push_back(static_cast<std::uint8_t>((2 * y + 3 * x + 40 * c) % 256));
    }
  }
  return Tensor::from_vector(pixels, {height, width, channels});
}

double mean_abs_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<double> x = a.to_vector<double>();
  const std::vector<double> y = b.to_vector<double>();
  double sum = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i)
    sum += std::abs(x[i] - y[i]);
  return sum / static_cast<double>(x.size());
}

Tensor truncated(const Tensor& bytes, std::int64_t keep) {
  Tensor cut = Tensor::empty({keep}, DType::u8);
  std::memcpy(cut.raw_data(), bytes.raw_data(), static_cast<std::size_t>(keep));
  return cut;
}

template <typename Body>
std::string io_error_of(Body&& body) {
  try {
    body();
  } catch (const IoError& error) {
    return error.what();
  }
  return "(no IoError thrown)";
}

TEST(ImageCodec, PngRoundTripsExactlyForEveryChannelCount) {
  for (const std::int64_t channels : {1, 2, 3, 4}) {
    const Tensor image = gradient(17, 23, channels);
    const Tensor bytes = encode_png(image);
    EXPECT_EQ(sniff(bytes), Format::png);
    const Info info = read_info(bytes);
    EXPECT_EQ(info.height, 17);
    EXPECT_EQ(info.width, 23);
    EXPECT_EQ(info.channels, channels);
    const Tensor decoded = decode(bytes);
    EXPECT_EQ(decoded.shape(), image.shape());
    EXPECT_EQ(decoded.to_vector<int>(), image.to_vector<int>());
  }
}

TEST(ImageCodec, JpegRoundTripsCloselyAndConvertsChannels) {
  const Tensor image = gradient(32, 36, 3);  // values below 256: no sharp wrap-around edge
  const Tensor bytes = encode_jpeg(image, 95);
  EXPECT_EQ(sniff(bytes), Format::jpeg);
  const Info info = read_info(bytes);
  EXPECT_EQ(info.height, 32);
  EXPECT_EQ(info.width, 36);
  EXPECT_EQ(info.channels, 3);
  const Tensor decoded = decode(bytes);
  EXPECT_EQ(decoded.shape(), (Shape{32, 36, 3}));
  EXPECT_LT(mean_abs_difference(decoded, image), 3.0);
  EXPECT_EQ(decode(bytes, {.channels = 1}).shape(), (Shape{32, 36, 1}));
  const Tensor grey = gradient(16, 16, 1);
  EXPECT_EQ(decode(encode_jpeg(grey)).shape(), (Shape{16, 16, 1}));
  EXPECT_EQ(decode(encode_jpeg(grey), {.channels = 3}).shape(), (Shape{16, 16, 3}));
}

TEST(ImageCodec, ReducedDctScaleAndCroppedDecodeMatchTheFullDecode) {
  const Tensor image = gradient(120, 90, 3);
  const Tensor bytes = encode_jpeg(image, 95);
  const Tensor full = decode(bytes);
  EXPECT_EQ(decode(bytes, {.scale_eighths = 4}).shape(), (Shape{60, 45, 3}));
  EXPECT_EQ(decode(bytes, {.scale_eighths = 1}).shape(), (Shape{15, 12, 3}));
  EXPECT_EQ(decode(bytes, {.scale_eighths = 5}).shape(), (Shape{75, 57, 3}));  // rounded up
  // A window that starts off the 8-pixel grid: libjpeg decodes whole blocks, we cut the rest.
  const CropWindow window{37, 21, 50, 41};
  const Tensor cropped = decode_and_crop_jpeg(bytes, window);
  EXPECT_EQ(cropped.shape(), (Shape{50, 41, 3}));
  EXPECT_LT(mean_abs_difference(cropped, crop(full, window)), 1.0);
  const Tensor small = decode_and_crop_jpeg(bytes, window, {.scale_eighths = 4});
  EXPECT_EQ(small.shape(), (Shape{26, 21, 3}));  // rows 18..43, columns 10..30
  EXPECT_NE(testing::error_of([&] {
              decode_and_crop_jpeg(bytes, {100, 0, 30, 10});
            }).find("is not inside the 120x90 image"),
            std::string::npos);
}

TEST(ImageCodec, ProgressiveJpegsDecodeAndCropLikeBaselineOnes) {
  const Tensor image = gradient(80, 96, 3);
  const Tensor baseline = encode_jpeg(image, 95);
  const Tensor progressive = encode_jpeg(image, 95, /*progressive=*/true);
  EXPECT_NE(progressive.numel(), baseline.numel());
  EXPECT_LT(mean_abs_difference(decode(progressive), decode(baseline)), 1.0);
  const CropWindow window{21, 13, 40, 50};
  EXPECT_LT(mean_abs_difference(decode_and_crop_jpeg(progressive, window),
                                crop(decode(progressive), window)),
            1.0);
  EXPECT_EQ(decode_and_crop_jpeg(progressive, window, {.scale_eighths = 2}).shape(),
            (Shape{11, 13, 3}));  // rows 5..15, columns 3..15
}

TEST(ImageCodec, CorruptTruncatedAndForeignDataAreIoErrors) {
  const Tensor jpeg = encode_jpeg(gradient(64, 64, 3));
  EXPECT_NE(io_error_of([&] {
              decode(truncated(jpeg, jpeg.numel() / 2), {}, "cat.jpg");
            }).find("cat.jpg: the JPEG data is truncated"),
            std::string::npos);
  EXPECT_NE(io_error_of([&] { decode(truncated(jpeg, 20)); }).find("corrupt or unsupported JPEG"),
            std::string::npos);
  const Tensor png = encode_png(gradient(32, 32, 3));
  EXPECT_NE(io_error_of([&] { decode(truncated(png, png.numel() - 30)); }).find("PNG"),
            std::string::npos);
  const std::string text = io_error_of([&] { decode(Element::bytes("GIF89a..."), {}, "x.gif"); });
  EXPECT_NE(text.find("x.gif: not a JPEG or PNG image (starts with 47 49 46 38)"),
            std::string::npos)
      << text;
  EXPECT_NE(io_error_of([&] { decode(Element::bytes("")); }).find("no data"), std::string::npos);
  EXPECT_NE(
      io_error_of([&] { decode(jpeg, {.max_pixels = 1000}); }).find("above the limit of 1000"),
      std::string::npos);
  EXPECT_NE(testing::error_of([&] { decode(jpeg, {.scale_eighths = 9}); }).find("1 to 8"),
            std::string::npos);
}

TEST(ImageOps, ResizeUsesHalfPixelCentres) {
  const Tensor row = Tensor::from_vector<float>({0.0f, 10.0f}, {1, 2, 1});
  EXPECT_EQ(resize(row, 1, 4).to_vector<float>(), (std::vector<float>{0.0f, 2.5f, 7.5f, 10.0f}));
  const Tensor row_u8 = Tensor::from_vector<std::uint8_t>({0, 10}, {1, 2, 1});
  EXPECT_EQ(resize(row_u8, 1, 4).to_vector<int>(), (std::vector<int>{0, 3, 8, 10}));
  // Halving averages pairs: output pixel 0 sits at source 0.5.
  const Tensor square = Tensor::from_vector<float>(
      {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}, {4, 4, 1});
  EXPECT_EQ(resize(square, 2, 2).to_vector<float>(), (std::vector<float>{5, 9, 21, 25}));
  const Tensor image = gradient(9, 7, 3);
  EXPECT_EQ(resize(image, 9, 7).to_vector<int>(), image.to_vector<int>());
}

// Bilinear interpolation straight from its definition (half-pixel centres, edges clamped), one
// output value at a time.
double bilinear_at(const std::vector<double>& pixels, std::int64_t height, std::int64_t width,
                   std::int64_t channels, std::int64_t out_height, std::int64_t out_width,
                   std::int64_t y, std::int64_t x, std::int64_t c) {
  const auto source = [](std::int64_t o, std::int64_t in, std::int64_t out) {
    const double position =
        (static_cast<double>(o) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
    return std::clamp(position, 0.0, static_cast<double>(in - 1));
  };
  const double sy = source(y, height, out_height);
  const double sx = source(x, width, out_width);
  const auto y0 = static_cast<std::int64_t>(std::floor(sy));
  const auto x0 = static_cast<std::int64_t>(std::floor(sx));
  const std::int64_t y1 = std::min(y0 + 1, height - 1);
  const std::int64_t x1 = std::min(x0 + 1, width - 1);
  const auto at = [&](std::int64_t row, std::int64_t column) {
    return pixels[static_cast<std::size_t>((row * width + column) * channels + c)];
  };
  const double top = at(y0, x0) + (sx - x0) * (at(y0, x1) - at(y0, x0));
  const double bottom = at(y1, x0) + (sx - x0) * (at(y1, x1) - at(y1, x0));
  return top + (sy - y0) * (bottom - top);
}

TEST(ImageOps, ResizeMatchesTheDefinitionWhenShrinkingAndEnlarging) {
  const Tensor image = gradient(37, 53, 3);  // sharp wrap-around edges included
  const std::vector<double> pixels = image.to_vector<double>();
  const Tensor floats = Tensor::from_vector(image.to_vector<float>(), image.shape());
  for (const auto [height, width] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {20, 30}, {20, 80}, {70, 30}, {90, 101}, {37, 53}, {1, 1}}) {
    const std::vector<float> got = resize(floats, height, width).to_vector<float>();
    const std::vector<int> got_u8 = resize(image, height, width).to_vector<int>();
    for (std::int64_t y = 0; y < height; ++y) {
      for (std::int64_t x = 0; x < width; ++x) {
        for (std::int64_t c = 0; c < 3; ++c) {
          const double expected = bilinear_at(pixels, 37, 53, 3, height, width, y, x, c);
          const auto i = static_cast<std::size_t>((y * width + x) * 3 + c);
          ASSERT_NEAR(got[i], expected, 1e-3) << height << "x" << width << " at " << y << "," << x;
          // u8 rounds to the nearest level (float arithmetic may land a half either way).
          ASSERT_LE(std::abs(got_u8[i] - expected), 0.5 + 1e-3)
              << height << "x" << width << " at " << y << "," << x;
        }
      }
    }
  }
}

TEST(ImageOps, CropFlipAndNormalize) {
  const Tensor image =
      Tensor::from_vector<std::uint8_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
  EXPECT_EQ(crop(image, {1, 1, 1, 2}).to_vector<int>(), (std::vector<int>{9, 10, 11, 12}));
  EXPECT_EQ(flip_left_right(image).to_vector<int>(),
            (std::vector<int>{5, 6, 3, 4, 1, 2, 11, 12, 9, 10, 7, 8}));
  const Tensor normalized = normalize(image, {1.0f, 2.0f}, {2.0f, 4.0f});
  EXPECT_EQ(normalized.dtype(), DType::f32);
  EXPECT_EQ(normalized.to_vector<float>()[0], 0.0f);   // (1 - 1) / 2
  EXPECT_EQ(normalized.to_vector<float>()[1], 0.0f);   // (2 - 2) / 4
  EXPECT_EQ(normalized.to_vector<float>()[11], 2.5f);  // (12 - 2) / 4
  // Many pixels (several blocks and a partial one), u8 and f32 alike: each value with its
  // channel's mean and deviation.
  const Tensor rgb = gradient(9, 7, 3);
  const std::vector<float> mean{100.0f, 50.0f, 7.0f};
  const std::vector<float> stddev{2.0f, 4.0f, 0.5f};
  const std::vector<int> values = rgb.to_vector<int>();
  for (const Tensor& input : {rgb, Tensor::from_vector(rgb.to_vector<float>(), rgb.shape())}) {
    const std::vector<float> got = normalize(input, mean, stddev).to_vector<float>();
    ASSERT_EQ(got.size(), values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      ASSERT_FLOAT_EQ(got[i], (static_cast<float>(values[i]) - mean[i % 3]) / stddev[i % 3])
          << "value " << i;
    }
  }
  EXPECT_NE(testing::error_of([&] {
              crop(image, {1, 1, 2, 2});
            }).find("not inside the image"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              normalize(image, {1, 2, 3}, {1});
            }).find("one per channel"),
            std::string::npos);
}

TEST(ImageOps, SampledCropsStayInsideAndFollowTheKey) {
  const RandomResizedCropOptions options;
  std::set<std::int64_t> heights;
  for (std::uint64_t key = 0; key < 500; ++key) {
    const CropWindow window = sample_crop(375, 500, options, key);
    ASSERT_GT(window.height, 0);
    ASSERT_GT(window.width, 0);
    ASSERT_GE(window.y, 0);
    ASSERT_GE(window.x, 0);
    ASSERT_LE(window.y + window.height, 375);
    ASSERT_LE(window.x + window.width, 500);
    const double area = static_cast<double>(window.height * window.width) / (375.0 * 500.0);
    EXPECT_GE(area, 0.07);
    heights.insert(window.height);
    const CropWindow again = sample_crop(375, 500, options, key);
    EXPECT_EQ(again.y, window.y);
    EXPECT_EQ(again.height, window.height);
  }
  EXPECT_GT(heights.size(), 100u);
}

TEST(ImageTransforms, AnImageNetStylePipelineOnJpegBytes) {
  std::vector<Element> jpegs;
  for (int i = 0; i < 6; ++i) {
    Element element{{"image", encode_jpeg(gradient(300 + 10 * i, 400, 3))},
                    {"label", Tensor::scalar(i, DType::i32)}};
    jpegs.push_back(element);
  }
  auto source = std::make_shared<std::vector<Element>>(jpegs);
  const Pipeline pipeline =
      Pipeline::from_generator(
          [source] {
            auto next = std::make_shared<std::size_t>(0);
            return Pipeline::Generator([source, next]() -> std::optional<Element> {
              if (*next == source->size()) return std::nullopt;
              return (*source)[(*next)++];
            });
          },
          6)
          .map(data::random_resized_crop(64, 64, 7), {.num_parallel_calls = 2})
          .map(data::random_flip_left_right(7))
          .map(data::normalize({127.5f}, {127.5f}))
          .batch(3);
  const std::vector<Element> epoch0 = pipeline.collect(0);
  ASSERT_EQ(epoch0.size(), 2u);
  EXPECT_EQ(epoch0[0].at("image").shape(), (Shape{3, 64, 64, 3}));
  EXPECT_EQ(epoch0[0].at("image").dtype(), DType::f32);
  for (const float value : epoch0[1].at("image").to_vector<float>()) {
    ASSERT_GE(value, -1.0f);
    ASSERT_LE(value, 1.0f);
  }
  // The same pass gives the same crops; another pass other ones.
  EXPECT_EQ(pipeline.collect(0)[1].at("image").to_vector<float>(),
            epoch0[1].at("image").to_vector<float>());
  EXPECT_NE(pipeline.collect(1)[1].at("image").to_vector<float>(),
            epoch0[1].at("image").to_vector<float>());
}

TEST(ImageTransforms, RandomResizedCropOfJpegBytesMatchesCroppingTheDecodedImage) {
  // A smooth photograph-like image, large enough that many windows are decoded at a reduced
  // DCT scale: the fast path (window only, scaled) must land on the same pixels as decoding
  // everything, cropping and resizing.
  std::vector<std::uint8_t> pixels;  // (H, W, 3)
  const std::int64_t height = 480;
  const std::int64_t width = 640;
  for (std::int64_t y = 0; y < height; ++y) {
    for (std::int64_t x = 0; x < width; ++x) {
      for (std::int64_t c = 0; c < 3; ++c) {
        const double value = 128.0 + 90.0 * std::sin(static_cast<double>(x) / 37.0 + c) *
                                         std::cos(static_cast<double>(y) / 53.0);
        pixels.push_back(static_cast<std::uint8_t>(std::lround(value)));
      }
    }
  }
  const Tensor bytes = encode_jpeg(Tensor::from_vector(pixels, {height, width, 3}), 95);
  const Tensor decoded = decode(bytes);
  const data::MapFn crop = data::random_resized_crop(64, 64, 11);
  for (std::uint64_t key = 0; key < 24; ++key) {
    Element encoded_element{{"image", bytes}};
    Element decoded_element{{"image", decoded}};
    encoded_element.set_random_key(key);
    decoded_element.set_random_key(key);
    const Tensor fast = crop(encoded_element).at("image");  // (64, 64, 3)
    const Tensor reference = crop(decoded_element).at("image");
    EXPECT_EQ(fast.shape(), (Shape{64, 64, 3}));
    EXPECT_LT(mean_abs_difference(fast, reference), 3.0) << "key " << key;
  }
}

TEST(ImageTransforms, RandomCropFlipAndCastOnDecodedImages) {
  const Tensor image = gradient(10, 12, 1);
  const Pipeline images = Pipeline::from_tensor_slices(
      {{"image", Tensor::from_storage(image.storage(), 0, {1, 10, 12, 1}, DType::u8)}});
  const Pipeline many = images.repeat(200);
  int flipped = 0;
  for (const Element& element : many.map(data::random_flip_left_right(3)).collect()) {
    flipped += element.at("image").to_vector<int>()[0] != image.to_vector<int>()[0] ? 1 : 0;
  }
  EXPECT_GT(flipped, 60);
  EXPECT_LT(flipped, 140);
  for (const Element& element : many.take(20).map(data::random_crop(4, 5, 1)).collect()) {
    const std::vector<int> pixels = element.at("image").to_vector<int>();
    ASSERT_EQ(pixels.size(), 20u);
    // Neighbours in a window differ as in the source image: +3 along x, +2 along y.
    EXPECT_EQ((pixels[1] - pixels[0] + 256) % 256, 3);
    EXPECT_EQ((pixels[5] - pixels[0] + 256) % 256, 2);
  }
  const Element scaled = images.map(data::cast(DType::f32, 1.0 / 255.0)).collect()[0];
  EXPECT_FLOAT_EQ(scaled.at("image").to_vector<float>()[1], 3.0f / 255.0f);
  const Element resized = images.map(data::resize(5, 6)).collect()[0];
  EXPECT_EQ(resized.at("image").to_vector<int>(), resize(image, 5, 6).to_vector<int>());
  EXPECT_THROW(data::resize(0, 6), InvalidArgument);
  EXPECT_NE(testing::error_of([&] {
              images.map(data::random_crop(20, 5, 1)).collect();
            }).find("does not fit"),
            std::string::npos);
}

// Padding surrounds the image with zeros; a random translation is a window of the padded image
// of the original size: every pixel moves by the same (dy, dx), at most `pixels` each way, and
// what comes in from outside is zero.
TEST(ImageTransforms, PadAndRandomTranslate) {
  const Tensor image = gradient(6, 5, 1);
  const Tensor padded = pad(image, 2);
  ASSERT_EQ(padded.shape(), (Shape{10, 9, 1}));
  const std::vector<int> padded_pixels = padded.to_vector<int>();
  const std::vector<int> pixels = image.to_vector<int>();
  EXPECT_EQ(padded_pixels[0], 0);
  EXPECT_EQ(padded_pixels[2 * 9 + 2], pixels[0]);
  EXPECT_EQ(padded_pixels[7 * 9 + 6], pixels[5 * 5 + 4]);
  EXPECT_THROW(pad(image, -1), InvalidArgument);

  const Pipeline images = Pipeline::from_tensor_slices(
      {{"image", Tensor::from_storage(image.storage(), 0, {1, 6, 5, 1}, DType::u8)}});
  std::set<std::pair<int, int>> shifts;
  for (const Element& element : images.repeat(100).map(data::random_translate(2, 4)).collect()) {
    const std::vector<int> moved = element.at("image").to_vector<int>();
    ASSERT_EQ(moved.size(), pixels.size());
    // Find the shift that explains every pixel.
    std::optional<std::pair<int, int>> found;
    for (int dy = -2; dy <= 2 && !found; ++dy) {
      for (int dx = -2; dx <= 2 && !found; ++dx) {
        bool all = true;
        for (int y = 0; y < 6 && all; ++y) {
          for (int x = 0; x < 5 && all; ++x) {
            const int sy = y - dy;
            const int sx = x - dx;
            const int expected = sy >= 0 && sy < 6 && sx >= 0 && sx < 5 ? pixels[sy * 5 + sx] : 0;
            all = moved[y * 5 + x] == expected;
          }
        }
        if (all) found = std::pair{dy, dx};
      }
    }
    ASSERT_TRUE(found.has_value());
    shifts.insert(*found);
  }
  EXPECT_GT(shifts.size(), 15u);  // of the 25 shifts, most appear in 100 draws
}

}  // namespace
}  // namespace tandem::image
