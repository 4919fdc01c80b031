// Fashion-MNIST (and MNIST, which uses the same four file names): 28x28 grey images as IDX u8,
// labels as IDX u8 class ids.
#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/files.h"
#include "data/file_io.h"
#include "data/idx.h"
#include "tandem/data.h"

namespace tandem::data {
namespace {

constexpr const char* kExpectedFiles =
    "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and "
    "t10k-labels-idx1-ubyte (each gzipped or plain)";

// Whether two files hold the same bytes once decompressed (each gzipped or plain).
bool same_contents(const std::string& first_path, const std::string& second_path) {
  InputFile first(first_path);
  InputFile second(second_path);
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::vector<std::uint8_t> first_bytes(kChunk);
  std::vector<std::uint8_t> second_bytes(kChunk);
  while (true) {
    const std::size_t got = first.read(first_bytes.data(), kChunk);
    if (second.read(second_bytes.data(), kChunk) != got ||
        !std::equal(first_bytes.begin(), first_bytes.begin() + static_cast<std::ptrdiff_t>(got),
                    second_bytes.begin())) {
      return false;
    }
    if (got == 0) return true;
  }
}

// `stem` with ".gz" when that exists, else `stem` itself. Something of either name that is not
// a regular file (a folder, a FIFO, a device) is refused by name; both present with different
// data is refused too, rather than one picked silently.
std::string locate(const std::filesystem::path& directory, const std::string& stem) {
  std::vector<std::string> found;
  for (const std::string& name : {stem + ".gz", stem}) {
    const std::filesystem::path candidate = directory / name;
    std::error_code error;
    if (!std::filesystem::exists(candidate, error)) continue;
    require_regular_file(candidate.string(), "Fashion-MNIST's " + stem);
    found.push_back(candidate.string());
  }
  if (found.size() == 2 && !same_contents(found[0], found[1])) {
    throw IoError("Fashion-MNIST: " + found[0] + " and " + found[1] +
                  " both exist and hold different data; remove (or rename) the one you do not "
                  "mean, so that it is clear which is read");
  }
  if (!found.empty()) return found.front();
  throw IoError("Fashion-MNIST: " + directory.string() + " has neither " + stem + ".gz nor " +
                stem + "; it needs " + kExpectedFiles +
                ": install the Debian package dataset-fashion-mnist or pass --data-dir");
}

// (N, H, W) u8 -> (N, H, W, 1) f32 in [0, 1].
Tensor images_to_unit_floats(const Tensor& images, const std::string& path) {
  if (images.dtype() != DType::u8 || images.rank() != 3) {
    throw IoError(path + ": expected u8 images of shape (N, rows, cols), found " +
                  dtype_name(images.dtype()) + " " + shape_str(images.shape()) +
                  "; pass the image file (*-images-idx3-ubyte)");
  }
  Tensor result =  // (N, H, W, 1)
      Tensor::empty({images.dim(0), images.dim(1), images.dim(2), 1}, DType::f32);
  const std::uint8_t* in = images.data<std::uint8_t>();
  float* out = result.data<float>();
  const std::int64_t count = images.numel();
  for (std::int64_t i = 0; i < count; ++i)
    out[i] = static_cast<float>(in[i]) / 255.0f;
  return result;
}

// (N,) u8 class ids -> (N,) i32, each checked to lie in [0, num_classes).
Tensor checked_labels(const Tensor& labels, const std::string& path, std::int64_t num_classes) {
  if (labels.rank() != 1 || (labels.dtype() != DType::u8 && labels.dtype() != DType::i32)) {
    throw IoError(path + ": expected integer labels of shape (N,), found " +
                  dtype_name(labels.dtype()) + " " + shape_str(labels.shape()) +
                  "; pass the label file (*-labels-idx1-ubyte)");
  }
  const std::vector<std::int32_t> values = labels.to_vector<std::int32_t>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= num_classes) {
      throw IoError(path + ": label " + std::to_string(values[i]) + " at index " +
                    std::to_string(i) + " is outside [0, " + std::to_string(num_classes) +
                    "); the file is corrupt: download it again");
    }
  }
  return Tensor::from_vector(values, labels.shape());
}

void require_directory(const std::string& directory) {
  if (!std::filesystem::is_directory(directory)) {
    throw IoError("Fashion-MNIST: no directory " + directory + " (it should hold " +
                  kExpectedFiles +
                  "); install the Debian package dataset-fashion-mnist "
                  "(scripts/install-deps.sh does) or pass --data-dir DIR");
  }
}

std::pair<Tensor, Tensor> load_split(const std::filesystem::path& directory,
                                     const std::string& prefix, std::int64_t num_classes) {
  const IdxFiles files = fashion_mnist_files(directory.string(), prefix);
  const std::string& images_path = files.images;
  const std::string& labels_path = files.labels;
  Tensor images = images_to_unit_floats(  // (N, 28, 28, 1)
      read_idx_contents(images_path, IdxRole::images).tensor, images_path);
  Tensor labels = checked_labels(  // (N,)
      read_idx_contents(labels_path, IdxRole::labels).tensor, labels_path, num_classes);
  if (images.dim(0) != labels.dim(0)) {
    throw IoError("Fashion-MNIST: " + images_path + " holds " + std::to_string(images.dim(0)) +
                  " images but " + labels_path + " holds " + std::to_string(labels.dim(0)) +
                  " labels; the files come from different datasets: reinstall "
                  "dataset-fashion-mnist or download both again");
  }
  return {std::move(images), std::move(labels)};
}

}  // namespace

IdxFiles fashion_mnist_files(const std::string& directory, const std::string& split) {
  require_directory(directory);
  const std::filesystem::path root(directory);
  return {locate(root, split + "-images-idx3-ubyte"), locate(root, split + "-labels-idx1-ubyte")};
}

bool has_fashion_mnist_split(const std::string& directory, const std::string& split) {
  const std::filesystem::path root(directory);
  for (const std::string kind : {"-images-idx3-ubyte", "-labels-idx1-ubyte"}) {
    for (const std::string suffix : {"", ".gz"}) {
      std::error_code error;
      const std::filesystem::path candidate = root / (split + kind + suffix);
      if (std::filesystem::exists(std::filesystem::symlink_status(candidate, error))) return true;
    }
  }
  return false;
}

ImageClassificationData load_fashion_mnist(const std::string& directory) {
  const std::filesystem::path root(directory);
  require_directory(directory);
  ImageClassificationData data;
  data.num_classes = 10;
  std::tie(data.train_images, data.train_labels) = load_split(root, "train", data.num_classes);
  std::tie(data.test_images, data.test_labels) = load_split(root, "t10k", data.num_classes);
  if (data.train_images.dim(1) != data.test_images.dim(1) ||
      data.train_images.dim(2) != data.test_images.dim(2)) {
    throw IoError("Fashion-MNIST: the training images are " +
                  std::to_string(data.train_images.dim(1)) + "x" +
                  std::to_string(data.train_images.dim(2)) + " but the test images are " +
                  std::to_string(data.test_images.dim(1)) + "x" +
                  std::to_string(data.test_images.dim(2)) + " in " + directory +
                  "; the files come from different datasets: reinstall dataset-fashion-mnist");
  }
  return data;
}

}  // namespace tandem::data
