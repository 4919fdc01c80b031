#include "tandem/data_spec.h"

#include <glob.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "core/crc32c.h"
#include "core/files.h"
#include "core/parse.h"
#include "core/text.h"
#include "data/file_io.h"
#include "tandem/data.h"
#include "tandem/image.h"
#include "tandem/tfrecord.h"

namespace tandem::data {
namespace {

namespace fs = std::filesystem;

constexpr std::array<const char*, 5> kReaders{"fashion-mnist", "idx", "cifar10", "images",
                                              "tfrecord"};
constexpr std::array<const char*, 3> kAugmentations{"flip", "translate", "resized-crop"};
// The most classes a run may have: ImageNet-21k has 21,841; a label past this is a stray one.
constexpr std::int64_t kMaxClasses = 1'000'000;

// The names TensorFlow's own writers and tutorials give the features, tried in this order.
constexpr std::array<const char*, 6> kImageFeatureNames{"image",       "image/encoded", "image_raw",
                                                        "image_bytes", "img",           "x"};
constexpr std::array<const char*, 7> kLabelFeatureNames{
    "label", "labels", "image/class/label", "class_id", "class", "target", "y"};

constexpr std::uintmax_t kCifarRecordBytes = 3073;

// The first bytes of the (decompressed) file.
std::vector<std::uint8_t> head_of(const std::string& path, std::size_t count) {
  data::InputFile file(path);
  std::vector<std::uint8_t> head(count);
  head.resize(file.read(head.data(), count));
  return head;
}

const std::vector<std::string>& cifar10_class_names() {
  static const std::vector<std::string> names{"airplane", "automobile", "bird",  "cat",  "deer",
                                              "dog",      "frog",       "horse", "ship", "truck"};
  return names;
}

const std::vector<std::string>& fashion_mnist_class_names() {
  static const std::vector<std::string> names{"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                              "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                              "Bag",         "Ankle boot"};
  return names;
}

// ---- SPEC: [READER:]PATH, PATH a folder, a file, a glob or a comma-separated list ----

struct Spec {
  std::string option;  // the setting as the caller spells it ("--data"), for messages
  std::string reader;  // one of kReaders, or empty: found from the files
  std::string path;
};

Spec parse_spec(const std::string& option, const std::string& text) {
  Spec spec{option, "", text};
  for (const char* reader : kReaders) {
    const std::string prefix = std::string(reader) + ":";
    if (text.starts_with(prefix)) {
      spec.reader = reader;
      spec.path = text.substr(prefix.size());
    }
  }
  if (spec.path.empty()) {
    throw ConfigError(option + " '" + text + "' names no data; pass a folder, a file or a glob");
  }
  return spec;
}

bool has_glob_characters(const std::string& path) {
  return path.find_first_of("*?[") != std::string::npos;
}

// The files of a comma-separated list of paths and globs, each glob's matches sorted.
std::vector<std::string> expand_files(const Spec& spec) {
  std::vector<std::string> files;
  for (const std::string& piece : split_list(spec.path)) {
    if (!has_glob_characters(piece)) {
      files.push_back(piece);
      continue;
    }
    glob_t matches{};
    const int status = ::glob(piece.c_str(), 0, nullptr, &matches);
    const std::unique_ptr<glob_t, void (*)(glob_t*)> release(&matches, globfree);
    if (status != 0 || matches.gl_pathc == 0) {
      throw ConfigError(spec.option + " " + spec.path + ": no file matches '" + piece +
                        "'; check the pattern (quote it so that the shell leaves it alone)");
    }
    for (std::size_t i = 0; i < matches.gl_pathc; ++i)
      files.emplace_back(matches.gl_pathv[i]);
  }
  if (files.empty()) throw ConfigError(spec.option + " '" + spec.path + "' names no file");
  return files;
}

// ---- One split as found: images decoded or still encoded, labels ----

struct Split {
  data::Pipeline examples;  // {"image": u8 (H, W, C) or encoded (n,), "label": i32 ()}
  bool encoded = false;
  std::vector<std::string> class_names;  // empty: the data has none
  std::string description;
  // Every image of the first's shape and dtype (IDX, CIFAR-10: the format says so).
  bool uniform = false;
  // The examples with their labels checked against the classes by the reader itself (IDX),
  // where it can; else by a map.
  std::function<data::Pipeline(std::int64_t num_classes)> checked_labels;
};

struct Found {
  Split training;
  std::optional<Split> validation;
  std::optional<Split> test;
  bool ordered_by_class = false;
};

Split idx_split(const std::string& images, const std::string& labels) {
  return {data::Pipeline::idx(images, labels),
          false,
          {},
          "IDX " + images + " with " + labels,
          true,
          [images, labels](std::int64_t num_classes) {
            return data::Pipeline::idx(images, labels, {.num_classes = num_classes});
          }};
}

Split cifar_split(std::vector<std::string> files, std::vector<std::string> class_names) {
  const std::string description =
      "CIFAR-10 " + (files.size() == 1 ? files.front() : plural(files.size(), "batch file"));
  return {data::Pipeline::cifar10(std::move(files)), false, std::move(class_names), description,
          true};
}

Split image_folder_split(const std::string& root) {
  data::Pipeline folder = data::Pipeline::image_folder(root);
  std::vector<std::string> classes = folder.class_names();
  // Class names go into the saved model, the logs and the report, all UTF-8: a name that is not
  // is refused before training rather than failing the run at its end.
  for (const std::string& name : classes) {
    if (!is_utf8(name)) {
      throw ConfigError("image folder " + root + ": the class folder '" + printable(name) +
                        "' has a name that is not UTF-8; rename it (class names are saved "
                        "with the model, the logs and the report, which are UTF-8)");
    }
  }
  return {std::move(folder), true, std::move(classes), "image folder " + root};
}

bool has_class_folders(const std::string& root) {
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    if (entry.is_directory()) return true;
  }
  return false;
}

// CIFAR-10's binary distribution: data_batch_1.bin .. data_batch_5.bin, test_batch.bin and
// batches.meta.txt (the class names), in the folder or its cifar-10-batches-bin.
std::optional<Found> cifar10_folder(const std::string& root) {
  for (const fs::path folder : {fs::path(root), fs::path(root) / "cifar-10-batches-bin"}) {
    std::vector<std::string> training;
    std::error_code error;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("data_batch_") && name.ends_with(".bin"))
        training.push_back(entry.path().string());
    }
    if (training.empty()) continue;
    std::sort(training.begin(), training.end());
    std::vector<std::string> names;
    std::ifstream meta(folder / "batches.meta.txt");
    for (std::string line; std::getline(meta, line);) {
      if (!line.empty()) names.push_back(line);
    }
    if (names.empty()) names = cifar10_class_names();
    Found found{cifar_split(training, names), std::nullopt, std::nullopt, false};
    if (fs::exists(folder / "test_batch.bin")) {
      found.test = cifar_split({(folder / "test_batch.bin").string()}, names);
    }
    return found;
  }
  return std::nullopt;
}

Found open_folder(const Spec& spec) {
  const std::string& root = spec.path;
  const bool any_reader = spec.reader.empty();
  // Named as Fashion-MNIST (--data-dir), a folder without its files is told what is missing.
  if (spec.reader == "fashion-mnist" ||
      ((any_reader || spec.reader == "idx") && data::has_fashion_mnist_split(root, "train"))) {
    const data::IdxFiles train = data::fashion_mnist_files(root, "train");
    Found found{idx_split(train.images, train.labels), std::nullopt, std::nullopt, false};
    found.training.description = "Fashion-MNIST (IDX) from " + root;
    if (data::has_fashion_mnist_split(root, "t10k")) {
      const data::IdxFiles test = data::fashion_mnist_files(root, "t10k");
      found.test = idx_split(test.images, test.labels);
    }
    return found;
  }
  if (any_reader || spec.reader == "cifar10") {
    if (std::optional<Found> found = cifar10_folder(root)) return *found;
  }
  if (any_reader || spec.reader == "images") {
    // root/train/<class>/<image>, with val/ (or validation/) and test/ beside it.
    const fs::path train = fs::path(root) / "train";
    if (fs::is_directory(train) && has_class_folders(train.string())) {
      Found found{image_folder_split(train.string()), std::nullopt, std::nullopt, true};
      for (const char* name : {"val", "validation"}) {
        const fs::path folder = fs::path(root) / name;
        if (fs::is_directory(folder) && !found.validation) {
          found.validation = image_folder_split(folder.string());
        }
      }
      if (fs::is_directory(fs::path(root) / "test")) {
        found.test = image_folder_split((fs::path(root) / "test").string());
      }
      return found;
    }
    if (has_class_folders(root))
      return {image_folder_split(root), std::nullopt, std::nullopt, true};
  }
  throw ConfigError(
      spec.option + " " + spec.path + ": a folder Tandem cannot read as " +
      (any_reader ? std::string("data") : spec.reader) +
      "; it takes a Fashion-MNIST folder (train-images-idx3-ubyte[.gz] ...), a CIFAR-10 folder "
      "(data_batch_1.bin ...), or images in class folders (<class>/<image>, or train/<class>/... "
      "with val/ and test/); files go as FILE, a glob or a comma-separated list");
}

// ---- TFRecord files of tf.train.Example ----

struct TFRecordFeatures {
  std::string image;
  std::string label;
  bool encoded = true;  // JPEG/PNG bytes; else raw pixels with their extents in the features below
  std::string height;
  std::string width;
  std::string channels;  // may be empty: one channel
};

std::string feature_list(const data::Element& example) {
  std::string text;
  for (const auto& [name, value] : example) {
    const std::string kind = value.dtype() == DType::u8    ? "bytes"
                             : value.dtype() == DType::f32 ? "float"
                                                           : "int64";
    text += (text.empty() ? "" : ", ") + name + " (" + kind + ")";
  }
  return text;
}

std::string first_present(const data::Element& example, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (example.names().end() != std::find(example.names().begin(), example.names().end(), name)) {
      return name;
    }
  }
  return "";
}

// The image and label features of the first record of `file`: named by the options, else found
// among the usual names (and, for the image, the only bytes feature), as `tandem data inspect`
// shows them.
TFRecordFeatures find_features(const std::string& file, const ImageDataOptions& options,
                               const std::string& option, const SettingName& name) {
  data::TFRecordReader reader(file);
  const std::optional<data::TFRecordReader::Record> record = reader.next();
  if (!record) throw IoError(option + ": " + file + " holds no record; pass a non-empty file");
  const std::span<const std::uint8_t> bytes(
      static_cast<const std::uint8_t*>(record->data.raw_data()),
      static_cast<std::size_t>(record->data.numel()));
  const data::Element example = data::parse_example(bytes, nullptr, file + ": record 0");
  const std::string features = feature_list(example);
  const auto has = [&](const std::string& name) {
    const std::vector<std::string> names = example.names();
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  TFRecordFeatures found;
  if (!options.image_feature.empty()) {
    if (!has(options.image_feature) || example.at(options.image_feature).dtype() != DType::u8) {
      throw ConfigError(name("image-feature") + " " + options.image_feature + ": " + file +
                        " has no bytes feature of that name; its features: " + features);
    }
    found.image = options.image_feature;
  } else {
    for (const char* name : kImageFeatureNames) {
      if (has(name) && example.at(name).dtype() == DType::u8) {
        found.image = name;
        break;
      }
    }
    if (found.image.empty()) {
      std::vector<std::string> byte_features;
      for (const auto& [name, value] : example) {
        if (value.dtype() == DType::u8) byte_features.push_back(name);
      }
      if (byte_features.size() == 1) found.image = byte_features.front();
    }
    if (found.image.empty()) {
      throw ConfigError(option + ": cannot tell which feature of " + file +
                        " is the image; its features: " + features + "; name it with " +
                        name("image-feature") + " NAME");
    }
  }
  if (!options.label_feature.empty()) {
    if (!has(options.label_feature) || example.at(options.label_feature).dtype() != DType::i64 ||
        example.at(options.label_feature).numel() != 1) {
      throw ConfigError(
          name("label-feature") + " " + options.label_feature + ": " + file +
          " has no int64 feature of that name with one value; its features: " + features);
    }
    found.label = options.label_feature;
  } else {
    for (const char* name : kLabelFeatureNames) {
      if (has(name) && example.at(name).dtype() == DType::i64 && example.at(name).numel() == 1) {
        found.label = name;
        break;
      }
    }
    if (found.label.empty()) {
      throw ConfigError(option + ": cannot tell which feature of " + file +
                        " is the label (an int64 class number); its features: " + features +
                        "; name it with " + name("label-feature") + " NAME");
    }
  }
  const Tensor& image = example.at(found.image);
  found.encoded = image::sniff(image) != image::Format::unknown;
  if (!found.encoded) {
    // Raw pixels, as `tandem data convert` writes IDX images: the extents are features too.
    const std::string prefix = found.image.starts_with("image/") ? "image/" : "";
    found.height = first_present(example, {prefix + "height", "height", "rows"});
    found.width = first_present(example, {prefix + "width", "width", "cols"});
    found.channels = first_present(example, {prefix + "channels", "channels", "depth"});
    if (found.height.empty() || found.width.empty()) {
      throw ConfigError(option + ": the image feature '" + found.image + "' of " + file +
                        " is neither JPEG nor PNG, and without height and width features it "
                        "cannot be read as raw pixels; its features: " +
                        features);
    }
  }
  return found;
}

Split tfrecord_split(const std::vector<std::string>& files, const TFRecordFeatures& features) {
  data::ExampleSpec spec{{features.image, data::FeatureSpec::bytes()},
                         {features.label, data::FeatureSpec::int64({}, DType::i32)}};
  for (const std::string& extent : {features.height, features.width, features.channels}) {
    if (!extent.empty()) spec.emplace(extent, data::FeatureSpec::int64());
  }
  data::Pipeline examples =
      data::Pipeline::tfrecord(files)
          .map(data::parse_examples(spec))
          .map(
              [features](data::Element parsed) {
                data::Element element;
                Tensor image = parsed.at(features.image);
                if (!features.encoded) {
                  const auto extent = [&](const std::string& name) {
                    return name.empty() ? std::int64_t{1}
                                        : static_cast<std::int64_t>(parsed.at(name).item());
                  };
                  const Shape shape{extent(features.height), extent(features.width),
                                    extent(features.channels)};  // (H, W, C)
                  if (shape_numel(shape) != image.numel()) {
                    throw InvalidArgument(
                        "'" + features.image + "' has " + std::to_string(image.numel()) +
                        " bytes, not the " + std::to_string(shape_numel(shape)) +
                        " pixels its height, width and channels say " + shape_str(shape));
                  }
                  image = Tensor::from_storage(image.storage(), image.storage_offset(), shape,
                                               DType::u8);
                }
                element.set("image", image);
                element.set("label", parsed.at(features.label));
                return element;
              },
              {.name = "features"});
  return {std::move(examples),
          features.encoded,
          {},
          "TFRecord " + (files.size() == 1 ? files.front() : plural(files.size(), "file")) +
              " (image '" + features.image + "'" + (features.encoded ? "" : " raw pixels") +
              ", label '" + features.label + "')"};
}

// Files of one kind: TFRecord, CIFAR-10 batches, or an IDX image file and its label file.
Split open_files(const Spec& spec, const ImageDataOptions& options,
                 std::optional<TFRecordFeatures>& features, const SettingName& name) {
  const std::vector<std::string> files = expand_files(spec);
  // A file named twice (a list, or globs that overlap) is read twice an epoch: likely a slip.
  std::set<std::string> seen;
  for (const std::string& file : files) {
    std::error_code error;
    const fs::path canonical = fs::weakly_canonical(file, error);
    if (!seen.insert(error ? file : canonical.string()).second) {
      std::cerr << "warning: " << spec.option << " names " << file
                << " more than once; its examples are read that many times an epoch\n";
    }
  }
  std::map<DataKind, std::vector<std::string>> by_kind;
  for (const std::string& file : files) {
    require_regular_file(file, spec.option);
    const DataKind kind = spec.reader == "tfrecord"  ? DataKind::tfrecord
                          : spec.reader == "cifar10" ? DataKind::cifar10
                                                     : kind_of_file(file);
    by_kind[kind].push_back(file);
  }
  if (by_kind.size() > 1) {
    throw ConfigError(spec.option + " " + spec.path +
                      ": the files are of different formats; pass files of one format");
  }
  const auto& [kind, kind_files] = *by_kind.begin();
  switch (kind) {
    case DataKind::tfrecord:
      if (!features) features = find_features(kind_files.front(), options, spec.option, name);
      return tfrecord_split(kind_files, *features);
    case DataKind::cifar10:
      return cifar_split(kind_files, cifar10_class_names());
    case DataKind::idx: {
      if (kind_files.size() != 2) {
        throw ConfigError(spec.option + " " + spec.path +
                          ": IDX data is two files, the images and their labels: pass "
                          "IMAGES,LABELS (or the Fashion-MNIST folder)");
      }
      return idx_split(kind_files[0], kind_files[1]);
    }
    case DataKind::image:
      throw ConfigError(spec.option + " " + spec.path +
                        ": a single image; pass a folder of class folders (<class>/<image>)");
    case DataKind::unknown:
      break;
  }
  throw ConfigError(spec.option + " " + kind_files.front() +
                    ": not a data format Tandem reads (IDX, TFRecord, CIFAR-10 .bin, or a folder "
                    "of class folders); `tandem data inspect` says what a file holds");
}

Found open_spec(const std::string& option, const std::string& text, const ImageDataOptions& options,
                std::optional<TFRecordFeatures>& features, const SettingName& name) {
  const Spec spec = parse_spec(option, text);
  if (spec.reader == "fashion-mnist" ||
      (fs::is_directory(spec.path) && spec.reader != "tfrecord")) {
    return open_folder(spec);
  }
  if (spec.reader == "images") {
    throw ConfigError(option + " " + text + ": " + spec.reader + ": takes a folder");
  }
  return {open_files(spec, options, features, name), std::nullopt, std::nullopt, false};
}

// ---- From what was found to decoded examples of one shape ----

// The extents of the first training image: from its header when it is still encoded.
Shape first_image_shape(const Split& split) {
  const std::vector<data::Element> first = split.examples.take(1).collect();
  if (first.empty()) throw IoError(split.description + ": holds no example");
  const Tensor& image = first.front().at("image");
  if (!split.encoded) {
    return image.rank() == 2 ? Shape{image.dim(0), image.dim(1), 1} : image.shape();
  }
  const image::Info info = image::read_info(image);
  return {info.height, info.width, info.channels};
}

struct LabelScan {
  std::int64_t count = 0;
  std::int64_t largest = -1;
  std::set<std::int64_t> seen;  // the labels that occur
};

// One pass over the labels (images are not decoded): the element count of a source that does
// not know it, and the number of classes where the data does not name them.
LabelScan scan_labels(const Split& split) {
  LabelScan scan;
  data::ElementIterator elements = split.examples.start();
  while (const std::optional<data::Element> element = elements.next()) {
    ++scan.count;
    const auto label = static_cast<std::int64_t>(element->at("label").item());
    scan.largest = std::max(scan.largest, label);
    scan.seen.insert(label);
  }
  return scan;
}

// {"image": u8 (H, W, C) of `shape`, "label": i32 ()}, labels checked against the classes.
// Images of another size are resized, except in data of one fixed size (IDX, CIFAR-10) whose
// splits disagree without --image-size: those files come from different data sets.
data::Pipeline decoded(const Split& split, const std::string& role, const Shape& shape,
                       std::int64_t num_classes, bool resize_uniform, const SettingName& name) {
  data::Pipeline examples =
      split.checked_labels
          ? split.checked_labels(num_classes)
          : split.examples.map(data::check_label(num_classes), {.name = "check_label"});
  if (examples.cardinality() == data::kUnknownCardinality) {
    examples = examples.assert_cardinality(scan_labels(split).count);
  }
  if (split.uniform) {
    const Tensor first = split.examples.take(1).collect().front().at("image");
    if (first.dtype() == DType::u8 && first.shape() == shape) return examples;
    if (!resize_uniform && first.shape() != shape) {
      throw InvalidArgument("the " + role + " images " + split.description + " are " +
                            shape_str(first.shape()) + ", the training images " + shape_str(shape) +
                            "; the files come from different data sets (or pass " +
                            name("image-size") + " HxW to resize them all)");
    }
  }
  const std::string description = split.description;
  const bool encoded = split.encoded;
  return examples.map(
      [shape, encoded, description, channels = name("channels")](data::Element element) {
        Tensor image = element.at("image");
        if (encoded) {
          image = image::decode(image, {.channels = static_cast<int>(shape[2])});
        } else {
          if (image.dtype() != DType::u8) {
            throw InvalidArgument(description + ": the images are " +
                                  std::string(dtype_name(image.dtype())) +
                                  "; Tandem trains on u8 pixels (0-255)");
          }
          if (image.rank() == 2) {
            image = Tensor::from_storage(image.storage(), image.storage_offset(),
                                         {image.dim(0), image.dim(1), 1}, image.dtype());
          }
          if (image.dim(2) != shape[2]) {
            throw InvalidArgument(description + ": an image has " +
                                  plural(image.dim(2), "channel") + ", the run takes " +
                                  std::to_string(shape[2]) + "; pass " + channels + " " +
                                  std::to_string(image.dim(2)) + " or convert the data");
          }
        }
        if (image.dim(0) != shape[0] || image.dim(1) != shape[1]) {
          image = image::resize(image, shape[0], shape[1]);
        }
        element.set("image", image);
        return element;
      },
      {.num_parallel_calls = encoded ? data::kAutotune : 1, .name = encoded ? "decode" : "image"});
}

}  // namespace

DataKind kind_of_file(const std::string& path) {
  const std::vector<std::uint8_t> head = head_of(path, 12);
  if (head.size() >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF) {
    return DataKind::image;
  }
  if (head.size() >= 8 && head[0] == 0x89 && head[1] == 'P' && head[2] == 'N' && head[3] == 'G') {
    return DataKind::image;
  }
  if (head.size() >= 4 && head[0] == 0 && head[1] == 0 && head[3] >= 1 && head[3] <= 8 &&
      (head[2] == 0x08 || head[2] == 0x09 || (head[2] >= 0x0B && head[2] <= 0x0E))) {
    return DataKind::idx;
  }
  if (head.size() == 12) {
    std::uint32_t stored = 0;
    for (int i = 3; i >= 0; --i)
      stored = (stored << 8) | head[8 + static_cast<std::size_t>(i)];
    if (mask_crc(crc32c({head.data(), 8})) == stored) return DataKind::tfrecord;
  }
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (!error && size > 0 && size % kCifarRecordBytes == 0 && !is_gzip_file(path)) {
    return DataKind::cifar10;
  }
  return DataKind::unknown;
}

const std::vector<std::string>& augmentation_names() {
  static const std::vector<std::string> names(kAugmentations.begin(), kAugmentations.end());
  return names;
}

void check_data_spec(const std::string& name, const std::string& text) {
  const Spec spec = parse_spec(name, text);
  if (fs::is_directory(spec.path)) return;
  for (const std::string& file : expand_files(spec)) {
    if (!fs::exists(file)) {
      throw ConfigError(name + " " + text + ": " + file +
                        " does not exist; pass a data folder, a file or a glob of files");
    }
  }
}

ImageData open_image_data(const ImageDataOptions& options, const SettingName& name) {
  std::optional<TFRecordFeatures> features;
  Found found = options.training.empty()
                    ? open_spec(name("data-dir"), "fashion-mnist:" + options.fashion_mnist_dir,
                                options, features, name)
                    : open_spec(name("data"), options.training, options, features, name);
  if (!options.validation.empty()) {
    found.validation =
        open_spec(name("validation-data"), options.validation, options, features, name).training;
  }
  if (!options.test.empty()) {
    found.test = open_spec(name("test-data"), options.test, options, features, name).training;
  }

  Shape shape = first_image_shape(found.training);  // (H, W, C)
  if (options.image_height > 0) shape = {options.image_height, options.image_width, shape[2]};
  if (options.channels > 0) shape[2] = options.channels;
  if (shape[2] != 1 && shape[2] != 3) {
    if (!found.training.encoded) {
      throw InvalidArgument(found.training.description + ": the images have " +
                            plural(shape[2], "channel") + "; Tandem trains on 1 or 3");
    }
    shape[2] = 3;  // RGBA or grey+alpha PNGs: the colour without the alpha
  }

  // The classes: named by the data (class folders; CIFAR-10's names), else counted.
  const std::vector<std::string>& names = found.training.class_names;
  for (const std::optional<Split>* other : {&found.validation, &found.test}) {
    if (*other && !(*other)->class_names.empty() && !names.empty() &&
        (*other)->class_names != names) {
      throw InvalidArgument((*other)->description + " has the classes " +
                            join((*other)->class_names, ", ") + ", the training data " +
                            found.training.description + " " + join(names, ", ") +
                            "; give both the same class folders");
    }
  }
  std::int64_t num_classes = options.num_classes;
  if (num_classes == 0 && names.size() == 1) {
    throw ConfigError(found.training.description + " has 1 class folder (" + names.front() +
                      "); a classifier needs two classes or more: put each class's images in a "
                      "folder of its own");
  }
  if (num_classes == 0 && !names.empty()) {
    num_classes = static_cast<std::int64_t>(names.size());
  } else if (num_classes == 0) {
    const LabelScan scan = scan_labels(found.training);
    if (scan.count == 0) throw IoError(found.training.description + ": holds no example");
    // Counted now: decoded() need not count again.
    if (found.training.examples.cardinality() == data::kUnknownCardinality) {
      found.training.examples = found.training.examples.assert_cardinality(scan.count);
    }
    num_classes = scan.largest + 1;
    if (num_classes < 2) {
      throw InvalidArgument(
          found.training.description + ": every label is " + std::to_string(scan.largest) +
          "; a classifier needs two classes or more (or pass " + name("num-classes") + " N)");
    }
    if (num_classes > kMaxClasses) {
      throw InvalidArgument(found.training.description + ": the largest label is " +
                            std::to_string(scan.largest) + ", which makes " +
                            std::to_string(num_classes) + " classes, more than the " +
                            std::to_string(kMaxClasses) +
                            " a run may have; labels are 0 .. N-1: check the data (or pass " +
                            name("num-classes") + " N)");
    }
    // One stray label (a 1,000,000 among 0 .. 9) makes a model of that many outputs.
    const auto present = static_cast<std::int64_t>(scan.seen.size());
    if (present * 2 < num_classes) {
      std::cerr << "warning: " << found.training.description << ": only " << present << " of "
                << num_classes << " classes (labels 0 .. " << scan.largest
                << ") have a training example; the largest label, " << scan.largest
                << ", decides the model's outputs: check the labels (or pass "
                << name("num-classes") << " N)\n";
    }
  }
  std::vector<std::string> class_names;
  if (names.size() == static_cast<std::size_t>(num_classes)) {
    class_names = names;
  } else if (options.training.empty() && num_classes == 10) {
    class_names = fashion_mnist_class_names();
  } else {
    for (std::int64_t label = 0; label < num_classes; ++label)
      class_names.push_back(std::to_string(label));
  }
  const bool resize = options.image_height > 0;
  const auto decoded_split = [&](const std::optional<Split>& split,
                                 const std::string& role) -> std::optional<data::Pipeline> {
    if (!split) return std::nullopt;
    return decoded(*split, role, shape, num_classes, resize, name);
  };
  return {found.training.description + ", " + std::to_string(num_classes) + " classes",
          decoded(found.training, "training", shape, num_classes, resize, name),
          decoded_split(found.validation, "validation"),
          decoded_split(found.test, "test"),
          shape,
          num_classes,
          std::move(class_names),
          found.ordered_by_class,
          found.training.encoded};
}

data::Pipeline augmented(const data::Pipeline& examples, const std::vector<std::string>& augment,
                         const Shape& image_shape, std::uint64_t seed) {
  data::Pipeline result = examples;
  for (const std::string& name : augment) {
    const data::MapOptions parallel{.num_parallel_calls = data::kAutotune, .name = name};
    if (name == "flip") {
      result = result.map(data::random_flip_left_right(seed), parallel);
    } else if (name == "translate") {
      const std::int64_t pixels = std::max<std::int64_t>(1, image_shape[0] / 8);
      result = result.map(data::random_translate(pixels, seed), parallel);
    } else if (name == "resized-crop") {
      result =
          result.map(data::random_resized_crop(image_shape[0], image_shape[1], seed), parallel);
    } else {
      throw ConfigError("unknown augmentation '" + name + "'; choose " +
                        join(augmentation_names(), ", "));
    }
  }
  return result;
}

}  // namespace tandem::data
