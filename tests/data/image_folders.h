#pragma once
// Image folders for the tests: <class>/<image> trees of PNG and JPEG files whose two classes
// ("top", "bottom") differ in where the light is, as real classes do in what they show.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/idx_files.h"
#include "tandem/image.h"
#include "tandem/tensor.h"

namespace tandem::testing {

inline void save(const std::filesystem::path& path, const Tensor& bytes) {
  std::filesystem::create_directories(path.parent_path());
  const auto* data = static_cast<const std::uint8_t*>(bytes.raw_data());
  write_file(path.string(), Bytes(data, data + bytes.numel()));
}

// An RGB image of class "top" (its upper half bright) or "bottom", noisy, of the given size: the
// classes differ in where the light is, not in how much, as real classes do.
inline Tensor class_image(bool top, std::int64_t height, std::int64_t width, std::uint32_t seed) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(height * width * 3));
  std::uint32_t state = seed * 2654435761u + 12345u;
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    const bool upper = static_cast<std::int64_t>(i) < height / 2 * width * 3;
    pixels[i] = static_cast<std::uint8_t>(10 + (state >> 24) % 60 + (upper == top ? 160 : 0));
  }
  return Tensor::from_vector(pixels, {height, width, 3});  // (H, W, 3)
}

// root/top/*.png|jpg and root/bottom/*: PNGs and JPEGs, most 12x10, every fifth 16x14.
inline void write_class_folders(const std::filesystem::path& root, int per_class,
                                std::uint32_t seed) {
  for (const bool top : {true, false}) {
    for (int i = 0; i < per_class; ++i) {
      const bool large = i % 5 == 4;
      const Tensor image = class_image(top, large ? 16 : 12, large ? 14 : 10,
                                       seed + static_cast<std::uint32_t>(i) + (top ? 0u : 1000u));
      const std::filesystem::path folder = root / (top ? "top" : "bottom");
      if (i % 2 == 0) {
        save(folder / ("img" + std::to_string(i) + ".png"), image::encode_png(image));
      } else {
        save(folder / ("img" + std::to_string(i) + ".jpg"), image::encode_jpeg(image, 95));
      }
    }
  }
}

}  // namespace tandem::testing
