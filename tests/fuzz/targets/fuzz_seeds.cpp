// Writes valid inputs for one fuzz target into a folder, for libFuzzer to mutate from:
//   fuzz_seeds <idx|cifar10|tfrecord|example|jpeg|png> DIR
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tandem/image.h"
#include "tandem/tfrecord.h"

namespace {

using Bytes = std::vector<std::uint8_t>;
namespace td = tandem::data;

void save(const std::string& path, const Bytes& bytes, bool gzip = false) {
  if (gzip) {
    gzFile file = gzopen(path.c_str(), "wb");
    gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(file);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

Bytes to_bytes(const tandem::Tensor& tensor) {
  const auto* data = static_cast<const std::uint8_t*>(tensor.raw_data());
  return Bytes(data, data + tensor.numel());
}

tandem::Tensor gradient(std::int64_t height, std::int64_t width, std::int64_t channels) {
  std::vector<std::uint8_t> pixels;
  for (std::int64_t i = 0; i < height * width * channels; ++i)
    pixels.push_back(static_cast<std::uint8_t>(i * 7 % 251));
  return tandem::Tensor::from_vector(pixels, {height, width, channels});
}

Bytes idx(std::uint8_t type, const std::vector<std::uint32_t>& dims, std::size_t width) {
  Bytes bytes{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  std::size_t count = 1;
  for (const std::uint32_t extent : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<std::uint8_t>(extent >> shift));
    count *= extent;
  }
  for (std::size_t i = 0; i < count * width; ++i)
    bytes.push_back(static_cast<std::uint8_t>(i));
  return bytes;
}

td::Element example(int index) {
  td::Element element;
  element.set("image", tandem::Tensor::full({2, 2}, index, tandem::DType::u8));
  element.set("label", tandem::Tensor::scalar(index, tandem::DType::i64));
  element.set("scores", tandem::Tensor::from_vector<float>({0.5f, -1.0f, 3.0f}, {3}));
  return element;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz_seeds <idx|cifar10|tfrecord|example|jpeg|png> DIR\n");
    return 2;
  }
  const std::string reader = argv[1];
  const std::string dir = argv[2];
  if (reader == "idx") {
    save(dir + "/images", idx(0x08, {3, 2, 2}, 1));
    save(dir + "/images.gz", idx(0x08, {3, 2, 2}, 1), true);
    save(dir + "/labels", idx(0x08, {3}, 1));
    save(dir + "/floats", idx(0x0D, {2, 3}, 4));
    save(dir + "/shorts", idx(0x0B, {4}, 2));
  } else if (reader == "cifar10") {
    Bytes batch;
    for (int record = 0; record < 2; ++record) {
      batch.push_back(static_cast<std::uint8_t>(record * 7));
      for (int i = 0; i < 3072; ++i)
        batch.push_back(static_cast<std::uint8_t>(i + record));
    }
    save(dir + "/batch.bin", batch);
    save(dir + "/batch.bin.gz", batch, true);
  } else if (reader == "tfrecord") {
    for (const bool gzip : {false, true}) {
      td::TFRecordWriter writer(dir + (gzip ? "/records.gz" : "/records"),
                                gzip ? td::Compression::gzip : td::Compression::none);
      for (int i = 0; i < 3; ++i)
        writer.write(td::serialize_example(example(i)));
      writer.close();
    }
  } else if (reader == "example") {
    for (int i = 0; i < 3; ++i)
      save(dir + "/example" + std::to_string(i), td::serialize_example(example(i)));
  } else if (reader == "jpeg") {
    save(dir + "/rgb.jpg", to_bytes(tandem::image::encode_jpeg(gradient(24, 40, 3), 90)));
    save(dir + "/grey.jpg", to_bytes(tandem::image::encode_jpeg(gradient(17, 9, 1), 50)));
  } else if (reader == "png") {
    for (int channels = 1; channels <= 4; ++channels) {
      save(dir + "/image" + std::to_string(channels) + ".png",
           to_bytes(tandem::image::encode_png(gradient(9, 13, channels))));
    }
  } else {
    std::fprintf(stderr, "fuzz_seeds: unknown reader '%s'\n", reader.c_str());
    return 2;
  }
  return 0;
}
