#pragma once
// Writing small IDX files (plain or gzip) into a scratch directory, for the data and CLI tests.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tandem::testing {

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tandem-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

using Bytes = std::vector<unsigned char>;

inline void append_big_endian(Bytes& bytes, std::uint64_t value, int width) {
  for (int shift = (width - 1) * 8; shift >= 0; shift -= 8) {
    bytes.push_back(static_cast<unsigned char>(value >> shift));
  }
}

// Magic number 0x0000TTNN and the dimensions, as the IDX format lays them out.
inline Bytes idx_header(std::uint8_t type_code, const std::vector<std::uint32_t>& dims) {
  Bytes bytes{0, 0, type_code, static_cast<unsigned char>(dims.size())};
  for (std::uint32_t extent : dims)
    append_big_endian(bytes, extent, 4);
  return bytes;
}

inline Bytes concat(Bytes first, const Bytes& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

// Writes `bytes` to `path`, gzip-compressed when `path` ends in ".gz".
inline void write_file(const std::string& path, const Bytes& bytes) {
  if (path.ends_with(".gz")) {
    gzFile file = gzopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr) << path;
    if (!bytes.empty()) {
      ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
                static_cast<int>(bytes.size()));
    }
    ASSERT_EQ(gzclose(file), Z_OK);
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
  }
}

inline Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A miniature Fashion-MNIST: `train_count` and `test_count` images of rows x cols pixels whose
// pixel values and labels follow from the index, in the four files load_fashion_mnist expects.
inline void write_tiny_fashion_mnist(const std::filesystem::path& directory,
                                     std::uint32_t train_count, std::uint32_t test_count,
                                     std::uint32_t rows = 4, std::uint32_t cols = 3,
                                     const std::string& suffix = ".gz") {
  auto write_split = [&](const std::string& prefix, std::uint32_t count) {
    Bytes pixels;
    Bytes labels;
    for (std::uint32_t n = 0; n < count; ++n) {
      for (std::uint32_t p = 0; p < rows * cols; ++p) {
        pixels.push_back(static_cast<unsigned char>((n * 7 + p * 13) % 256));
      }
      labels.push_back(static_cast<unsigned char>(n % 10));
    }
    write_file((directory / (prefix + "-images-idx3-ubyte" + suffix)).string(),
               concat(idx_header(0x08, {count, rows, cols}), pixels));
    write_file((directory / (prefix + "-labels-idx1-ubyte" + suffix)).string(),
               concat(idx_header(0x08, {count}), labels));
  };
  write_split("train", train_count);
  write_split("t10k", test_count);
}

}  // namespace tandem::testing
