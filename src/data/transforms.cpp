// Map functions for common element transformations: label checks, casts and the image
// augmentations. Random ones draw from the element's random key, so their results do not
// depend on which thread runs them or when.
#include <cstring>

#include "data/pipeline_node.h"
#include "tandem/image.h"
#include "tandem/pipeline.h"
#include "tandem/random.h"

namespace tandem::data {
namespace {

// Salts: each random transform draws from its own stream of the element's key.
constexpr std::uint64_t kCropSalt = 0xC0;
constexpr std::uint64_t kFlipSalt = 0xF1;
constexpr std::uint64_t kResizedCropSalt = 0x5C;
constexpr std::uint64_t kTranslateSalt = 0x7A;

std::array<std::uint32_t, 4> draw(const Element& element, std::uint64_t salt, std::uint64_t seed) {
  return philox4x32(element.random_key(), salt, seed);
}

}  // namespace

MapFn check_label(std::int64_t num_classes, std::string key) {
  if (num_classes <= 0) {
    throw InvalidArgument("check_label: num_classes must be positive, got " +
                          std::to_string(num_classes));
  }
  return [num_classes, key = std::move(key)](Element element) {
    const Tensor& label = element.at(key);
    if (label.numel() != 1 || !(label.dtype() == DType::i32 || label.dtype() == DType::i64 ||
                                label.dtype() == DType::u8)) {
      throw InvalidArgument("check_label: '" + key + "' is " + dtype_name(label.dtype()) + " " +
                            shape_str(label.shape()) + ", not one integer class id");
    }
    const auto value = static_cast<std::int64_t>(label.item());
    if (value < 0 || value >= num_classes) {
      throw IoError("label " + std::to_string(value) + " is outside [0, " +
                    std::to_string(num_classes) + "); the data is corrupt or num_classes is wrong");
    }
    return element;
  };
}

MapFn cast(DType dtype, double scale, std::string key) {
  return [dtype, scale, key = std::move(key)](Element element) {
    const Tensor& value = element.at(key);
    Tensor result = Tensor::empty(value.shape(), dtype);
    const std::int64_t count = value.numel();
    visit_dtype(value.dtype(), [&](auto source_tag) {
      using Source = decltype(source_tag);
      const Source* in = static_cast<const Source*>(value.raw_data());
      visit_dtype(dtype, [&](auto target_tag) {
        using Target = decltype(target_tag);
        Target* out = static_cast<Target*>(result.raw_data());
        if constexpr (std::is_same_v<Source, std::uint8_t> && std::is_same_v<Target, float>) {
          // The common case (pixels to floats), kept free of the double round trip.
          const auto factor = static_cast<float>(scale);
          for (std::int64_t i = 0; i < count; ++i)
            out[i] = static_cast<float>(in[i]) * factor;
        } else {
          for (std::int64_t i = 0; i < count; ++i)
            out[i] = convert_element<Target>(convert_element<double>(in[i]) * scale);
        }
      });
    });
    element.set(key, std::move(result));
    return element;
  };
}

MapFn decode_image(image::DecodeOptions options, std::string key) {
  return [options, key = std::move(key)](Element element) {
    element.set(key, image::decode(element.at(key), options));
    return element;
  };
}

MapFn resize(std::int64_t height, std::int64_t width, std::string key) {
  if (height <= 0 || width <= 0) {
    throw InvalidArgument("resize: the size must be positive, got " + std::to_string(height) + "x" +
                          std::to_string(width));
  }
  return [height, width, key = std::move(key)](Element element) {
    element.set(key, image::resize(element.at(key), height, width));
    return element;
  };
}

MapFn random_crop(std::int64_t height, std::int64_t width, std::uint64_t seed, std::string key) {
  if (height <= 0 || width <= 0) {
    throw InvalidArgument("random_crop: the size must be positive, got " + std::to_string(height) +
                          "x" + std::to_string(width));
  }
  return [height, width, seed, key = std::move(key)](Element element) {
    const Tensor& source = element.at(key);
    if (source.rank() != 3 || source.dim(0) < height || source.dim(1) < width) {
      throw InvalidArgument("random_crop: a " + std::to_string(height) + "x" +
                            std::to_string(width) + " window does not fit '" + key + "' " +
                            shape_str(source.shape()) + "; resize it first");
    }
    const auto words = draw(element, kCropSalt, seed);
    const std::int64_t y = static_cast<std::int64_t>(
        words[0] % static_cast<std::uint64_t>(source.dim(0) - height + 1));
    const std::int64_t x =
        static_cast<std::int64_t>(words[1] % static_cast<std::uint64_t>(source.dim(1) - width + 1));
    element.set(key, image::crop(source, {y, x, height, width}));
    return element;
  };
}

MapFn random_translate(std::int64_t pixels, std::uint64_t seed, std::string key) {
  if (pixels < 0) {
    throw InvalidArgument("random_translate: pixels must be >= 0, got " + std::to_string(pixels));
  }
  return [pixels, seed, key = std::move(key)](Element element) {
    const Tensor& source = element.at(key);  // (H, W, C)
    const auto words = draw(element, kTranslateSalt, seed);
    const auto shift = [&](std::size_t word) {
      return static_cast<std::int64_t>(words[word] % static_cast<std::uint64_t>(2 * pixels + 1));
    };
    element.set(key, image::crop(image::pad(source, pixels),
                                 {shift(0), shift(1), source.dim(0), source.dim(1)}));
    return element;
  };
}

MapFn random_flip_left_right(std::uint64_t seed, std::string key) {
  return [seed, key = std::move(key)](Element element) {
    if (draw(element, kFlipSalt, seed)[0] & 1u)
      element.set(key, image::flip_left_right(element.at(key)));
    return element;
  };
}

MapFn normalize(std::vector<float> mean, std::vector<float> stddev, std::string key) {
  return
      [mean = std::move(mean), stddev = std::move(stddev), key = std::move(key)](Element element) {
        element.set(key, image::normalize(element.at(key), mean, stddev));
        return element;
      };
}

MapFn random_resized_crop(std::int64_t height, std::int64_t width, std::uint64_t seed,
                          image::RandomResizedCropOptions options, std::string key) {
  if (height <= 0 || width <= 0) {
    throw InvalidArgument("random_resized_crop: the size must be positive, got " +
                          std::to_string(height) + "x" + std::to_string(width));
  }
  return [height, width, seed, options, key = std::move(key)](Element element) {
    const Tensor& source = element.at(key);
    const std::uint64_t crop_key = mix_keys(element.random_key(), mix_keys(kResizedCropSalt, seed));
    Tensor cropped;  // (h, w, C) u8
    if (source.rank() == 1) {
      const image::Info info = image::read_info(source);
      const image::CropWindow window =
          image::sample_crop(info.height, info.width, options, crop_key);
      if (info.format == image::Format::jpeg) {
        // The smallest DCT scale that still leaves the window at least the target size, among
        // 8/8, 4/8, 2/8 and 1/8: libjpeg-turbo has SIMD inverse DCTs for those only. The others
        // (7/8, 6/8, ...) run in plain C, for chroma at 14x14, 12x12, ..., and cost more than
        // the full-size decode they would spare.
        image::DecodeOptions decode;
        while (decode.scale_eighths > 1 &&
               (window.height * (decode.scale_eighths / 2) + 7) / 8 >= height &&
               (window.width * (decode.scale_eighths / 2) + 7) / 8 >= width) {
          decode.scale_eighths /= 2;
        }
        cropped = image::decode_and_crop_jpeg(source, window, decode);
      } else {
        cropped = image::crop(image::decode(source), window);
      }
    } else {
      const image::CropWindow window =
          image::sample_crop(source.dim(0), source.dim(1), options, crop_key);
      cropped = image::crop(source, window);
    }
    element.set(key, image::resize(cropped, height, width));
    return element;
  };
}

}  // namespace tandem::data
