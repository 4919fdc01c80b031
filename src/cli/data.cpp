// `tandem data`: `inspect PATH` says what a data file or folder holds (format, count, shapes,
// label histogram); `convert SOURCE DEST` writes an IDX or image-folder data set as a TFRecord
// file of tf.train.Example records.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "cli/commands.h"
#include "core/files.h"
#include "core/text.h"
#include "data/file_io.h"
#include "data/idx.h"
#include "tandem/data_spec.h"
#include "tandem/image.h"
#include "tandem/pipeline.h"
#include "tandem/tfrecord.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;
using data::DataKind;
using data::kind_of_file;

// ---- Reporting ----

std::string classes_text(std::int64_t count) {
  return std::to_string(count) + (count == 1 ? " class" : " classes");
}

// Label counts, printed one class a line with its share.
class Histogram {
 public:
  void add(std::int64_t label) { ++counts_[label]; }
  bool empty() const { return counts_.empty(); }

  std::string str(const std::vector<std::string>& class_names = {}) const {
    std::int64_t total = 0;
    std::size_t width = 1;
    for (const auto& [label, count] : counts_) {
      total += count;
      width = std::max(width, name(label, class_names).size());
    }
    std::string text =
        "label histogram (" + classes_text(static_cast<std::int64_t>(counts_.size())) + "):\n";
    for (const auto& [label, count] : counts_) {
      const std::string shown = name(label, class_names);
      text += "  " + shown + std::string(width - shown.size() + 2, ' ') + std::to_string(count) +
              "  " + fixed(100.0 * static_cast<double>(count) / static_cast<double>(total), 1) +
              "%\n";
    }
    return text;
  }

 private:
  static std::string name(std::int64_t label, const std::vector<std::string>& class_names) {
    const auto index = static_cast<std::size_t>(label);
    if (label >= 0 && index < class_names.size()) {
      return std::to_string(label) + " " + class_names[index];
    }
    return std::to_string(label);
  }
  std::map<std::int64_t, std::int64_t> counts_;
};

// The extents of images seen, as "(28, 28, 1)" when all agree, else ranges.
class ShapeSummary {
 public:
  void add(std::int64_t height, std::int64_t width, std::int64_t channels) {
    shapes_.insert({height, width, channels});
  }
  std::string str() const {
    if (shapes_.empty()) return "none";
    if (shapes_.size() == 1) return shape_str(*shapes_.begin());
    std::int64_t low[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
    std::int64_t high[3] = {0, 0, 0};
    for (const Shape& shape : shapes_) {
      for (std::size_t axis = 0; axis < 3; ++axis) {
        low[axis] = std::min(low[axis], shape[axis]);
        high[axis] = std::max(high[axis], shape[axis]);
      }
    }
    auto range = [&](std::size_t axis) {
      return low[axis] == high[axis]
                 ? std::to_string(low[axis])
                 : std::to_string(low[axis]) + ".." + std::to_string(high[axis]);
    };
    return std::to_string(shapes_.size()) + " distinct: height " + range(0) + ", width " +
           range(1) + ", channels " + range(2);
  }

 private:
  std::set<Shape> shapes_;
};

std::string compression_note(const std::string& path) {
  return is_gzip_file(path) ? " (gzip-compressed)" : "";
}

void inspect_idx(const std::string& path) {
  const data::IdxContents contents = data::read_idx_contents(path);
  const Tensor& tensor = contents.tensor;
  const Shape element_shape(tensor.shape().begin() + 1, tensor.shape().end());
  std::cout << path << ": IDX file" << compression_note(path) << ", " << dtype_name(tensor.dtype())
            << " " << shape_str(tensor.shape()) << "\n"
            << "elements: " << tensor.dim(0) << " of shape " << shape_str(element_shape) << "\n";
  if (tensor.rank() == 1 && !is_floating(tensor.dtype())) {
    Histogram histogram;
    for (const std::int64_t label : tensor.to_vector<std::int64_t>())
      histogram.add(label);
    std::cout << histogram.str();
  }
}

void inspect_tfrecord(const std::string& path) {
  data::TFRecordReader reader(path);
  std::int64_t records = 0;
  std::string features;
  std::string image_note;
  Histogram histogram;
  while (std::optional<data::TFRecordReader::Record> record = reader.next()) {
    const std::span<const std::uint8_t> bytes(
        static_cast<const std::uint8_t*>(record->data.raw_data()),
        static_cast<std::size_t>(record->data.numel()));
    std::optional<data::Element> example;
    try {
      example =
          data::parse_example(bytes, nullptr, path + ": record " + std::to_string(record->index));
    } catch (const Error&) {
      // Not every TFRecord file holds tf.train.Example records; count it all the same.
    }
    if (records == 0 && example) {
      for (const auto& [name, value] : *example) {
        const std::string kind = value.dtype() == DType::u8    ? "bytes"
                                 : value.dtype() == DType::f32 ? "float"
                                                               : "int64";
        features +=
            (features.empty() ? "" : ", ") + name + ": " + kind + " " + shape_str(value.shape());
        if (value.dtype() == DType::u8 && value.rank() == 1 &&
            image::sniff(value) != image::Format::unknown) {
          const image::Info info = image::read_info(value);
          image_note = name + ": " + (info.format == image::Format::jpeg ? "JPEG" : "PNG") + " " +
                       shape_str({info.height, info.width, info.channels}) + " (first record)";
        }
      }
    }
    if (example && example->contains("label") && example->at("label").numel() == 1 &&
        example->at("label").dtype() == DType::i64) {
      histogram.add(static_cast<std::int64_t>(example->at("label").item()));
    }
    ++records;
  }
  std::cout << path << ": TFRecord file" << compression_note(path) << ", CRC-32C checked\n"
            << "records: " << records << "\n";
  if (!features.empty()) std::cout << "features (first record): " << features << "\n";
  if (!image_note.empty()) std::cout << "images: " << image_note << "\n";
  if (!histogram.empty()) std::cout << histogram.str();
}

void inspect_cifar10(const std::string& path) {
  Histogram histogram;
  std::int64_t count = 0;
  data::ElementIterator elements = data::Pipeline::cifar10({path}).start();
  while (std::optional<data::Element> element = elements.next()) {
    histogram.add(static_cast<std::int64_t>(element->at("label").item()));
    ++count;
  }
  std::cout << path << ": CIFAR-10 batch, " << count << " records\n"
            << "elements: image u8 (32, 32, 3), label i32 ()\n"
            << histogram.str();
}

void inspect_image(const std::string& path) {
  const image::Info info = image::read_info(read_whole_file_tensor(path));
  std::cout << path << ": " << (info.format == image::Format::jpeg ? "JPEG" : "PNG") << " image, "
            << info.height << "x" << info.width << ", " << plural(info.channels, "channel") << "\n";
}

void inspect_image_folder(const std::string& path) {
  const data::Pipeline folder = data::Pipeline::image_folder(path);
  const std::vector<std::string> classes = folder.class_names();
  Histogram histogram;
  ShapeSummary shapes;
  std::map<std::string, std::int64_t> formats;
  data::ElementIterator elements = folder.start();
  while (std::optional<data::Element> element = elements.next()) {
    histogram.add(static_cast<std::int64_t>(element->at("label").item()));
    try {
      const image::Info info = image::read_info(element->at("image"));
      ++formats[info.format == image::Format::jpeg ? "JPEG" : "PNG"];
      shapes.add(info.height, info.width, info.channels);
    } catch (const IoError&) {
      ++formats["unreadable"];
    }
  }
  std::string format_counts;
  for (const auto& [format, count] : formats)
    format_counts += (format_counts.empty() ? "" : ", ") + std::to_string(count) + " " + format;
  std::cout << path << ": image folder, " << classes_text(static_cast<std::int64_t>(classes.size()))
            << ", " << folder.cardinality() << " images (" << format_counts << ")\n"
            << "image shapes: " << shapes.str() << "\n"
            << histogram.str(classes);
}

// A folder holding Fashion-MNIST's (or MNIST's) IDX files.
bool inspect_idx_folder(const std::string& path) {
  bool found = false;
  for (const std::string split : {"train", "t10k"}) {
    if (!data::has_fashion_mnist_split(path, split)) continue;
    const data::IdxFiles files = data::fashion_mnist_files(path, split);
    found = true;
    const data::Pipeline pairs = data::Pipeline::idx(files.images, files.labels);
    Histogram histogram;
    Shape shape;
    data::ElementIterator elements = pairs.start();
    while (std::optional<data::Element> element = elements.next()) {
      histogram.add(static_cast<std::int64_t>(element->at("label").item()));
      shape = element->at("image").shape();
    }
    std::cout << split << ": " << pairs.cardinality() << " images " << shape_str(shape) << " ("
              << files.images << ", " << files.labels << ")\n"
              << histogram.str();
  }
  return found;
}

void inspect(const std::string& path) {
  if (fs::is_directory(path)) {
    if (inspect_idx_folder(path)) return;
    bool has_class_folders = false;
    for (const fs::directory_entry& entry : fs::directory_iterator(path))
      has_class_folders |= entry.is_directory();
    if (!has_class_folders) {
      throw IoError(path +
                    ": a folder with neither Fashion-MNIST IDX files nor class folders of "
                    "images (root/<class>/<image>); pass a data file or such a folder");
    }
    inspect_image_folder(path);
    return;
  }
  require_regular_file(path);
  if (fs::file_size(path) == 0) {
    throw IoError(path +
                  ": is empty (0 bytes); pass a data file (IDX, TFRecord, CIFAR-10 .bin, "
                  "JPEG, PNG) or write or download it again");
  }
  switch (kind_of_file(path)) {
    case DataKind::idx:
      inspect_idx(path);
      return;
    case DataKind::tfrecord:
      inspect_tfrecord(path);
      return;
    case DataKind::cifar10:
      inspect_cifar10(path);
      return;
    case DataKind::image:
      inspect_image(path);
      return;
    case DataKind::unknown:
      break;
  }
  throw IoError(path +
                ": not a data format Tandem reads (IDX, TFRecord, CIFAR-10 .bin, JPEG, "
                "PNG, or a folder laid out <class>/<image>)");
}

// ---- convert ----

// IDX images and labels: {"image": raw pixels, "label", "height", "width", "channels"}.
data::Pipeline idx_examples(const std::string& images, const std::string& labels) {
  return data::Pipeline::idx(images, labels)
      .map(
          [](data::Element element) {
            const Tensor& image = element.at("image");  // (H, W, C)
            if (image.dtype() != DType::u8) {
              throw InvalidArgument(std::string("convert: the images are ") +
                                    dtype_name(image.dtype()) +
                                    "; only u8 IDX images convert to raw-pixel records");
            }
            data::Element example;
            example.set("image", Tensor::from_storage(image.storage(), image.storage_offset(),
                                                      {image.numel()}, DType::u8));
            example.set("label", Tensor::scalar(element.at("label").item(), DType::i64));
            example.set("height", Tensor::scalar(static_cast<double>(image.dim(0)), DType::i64));
            example.set("width", Tensor::scalar(static_cast<double>(image.dim(1)), DType::i64));
            example.set("channels",
                        Tensor::scalar(static_cast<double>(image.rank() > 2 ? image.dim(2) : 1),
                                       DType::i64));
            return example;
          },
          {.name = "to_example"});
}

// An image folder: {"image": the encoded file, "label", "class", "format", "height", "width",
// "channels"} (the sizes from the file's header).
data::Pipeline folder_examples(const std::string& root) {
  const data::Pipeline folder = data::Pipeline::image_folder(root);
  const std::vector<std::string> classes = folder.class_names();
  return folder.map(
      [classes](data::Element element) {
        const Tensor& bytes = element.at("image");
        const image::Info info = image::read_info(bytes);
        const auto label = static_cast<std::size_t>(element.at("label").item());
        data::Element example;
        example.set("image", bytes);
        example.set("label", Tensor::scalar(static_cast<double>(label), DType::i64));
        example.set("class", data::Element::bytes(classes.at(label)));
        example.set("format",
                    data::Element::bytes(info.format == image::Format::jpeg ? "jpeg" : "png"));
        example.set("height", Tensor::scalar(static_cast<double>(info.height), DType::i64));
        example.set("width", Tensor::scalar(static_cast<double>(info.width), DType::i64));
        example.set("channels", Tensor::scalar(static_cast<double>(info.channels), DType::i64));
        return example;
      },
      {.name = "to_example"});
}

struct DataOptions {
  std::string labels;  // empty: none
  bool gzip = false;
  std::string split;  // a Fashion-MNIST folder's split: "train" or "test"; empty: not given
};

const OptionTable<DataOptions>& data_options() {
  using O = DataOptions;
  static const OptionTable<O> table({
      {"--labels", "FILE", "convert: the IDX label file that goes with IDX images",
       into(&O::labels)},
      {"--gzip", "", "convert: gzip-compress the TFRecord file (TensorFlow's \"GZIP\")",
       flag(&O::gzip)},
      {"--split", "train|test",
       "convert: which split of a Fashion-MNIST (or MNIST) folder to write (default train)",
       into(&O::split, one_of({"train", "test"}, "split"))},
  });
  return table;
}

// Writing over what is being read would destroy it: the destination may be neither the source
// (or a file inside a source folder) nor the labels file, however the paths are spelled.
void require_not_a_source(const std::string& source, const std::string& labels,
                          const std::string& destination) {
  std::error_code error;
  const fs::path target = fs::weakly_canonical(destination, error);
  const auto refuse = [&](const std::string& what) {
    throw UsageError("convert: the destination '" + destination + "' is " + what +
                     "; writing it would destroy what it converts: choose another path");
  };
  for (const auto& [path, what] : {std::pair{source, "the source " + source},
                                   std::pair{labels, "the labels file " + labels}}) {
    if (path.empty()) continue;
    const fs::path read = fs::weakly_canonical(path, error);
    if (read == target || fs::equivalent(path, destination, error)) refuse(what);
    if (fs::is_directory(read, error)) {
      const auto [end, _] = std::mismatch(read.begin(), read.end(), target.begin(), target.end());
      if (end == read.end()) refuse("inside the folder " + path + " being converted");
    }
  }
}

int convert(const std::string& source, const std::string& destination, const DataOptions& options) {
  const auto parent = fs::absolute(destination).parent_path();
  if (!fs::is_directory(parent)) {
    throw UsageError("convert: directory " + parent.string() + " of '" + destination +
                     "' does not exist; create it or choose another path");
  }
  // Before any work: what is there must be a file to replace (a device node is refused, never
  // renamed over).
  require_replaceable(destination, Destination::file, "convert");
  const data::Compression compression =
      options.gzip ? data::Compression::gzip : data::Compression::none;
  // The records, and the spec that reads them back.
  const std::string idx_spec =
      "{\"image\", FeatureSpec::bytes({H, W, C})}, {\"label\", FeatureSpec::int64({}, "
      "DType::i32)}";
  // A Fashion-MNIST folder, as inspect reads it: one split's IDX files.
  const std::string split_files = options.split == "test" ? "t10k" : "train";
  const bool idx_folder =
      fs::is_directory(source) && (data::has_fashion_mnist_split(source, "train") ||
                                   data::has_fashion_mnist_split(source, "t10k"));
  if (!options.split.empty() && !idx_folder) {
    throw UsageError("convert: --split picks a split of a Fashion-MNIST folder; " + source +
                     " is not one (it has no train-/t10k-*-idx*-ubyte files)");
  }
  if (idx_folder && !options.labels.empty()) {
    throw UsageError(
        "convert: --labels is for an IDX image file; a Fashion-MNIST folder has its "
        "labels (pick the split with --split train|test)");
  }
  // From a Fashion-MNIST folder only the split's two files are read: the output may go beside
  // them.
  if (idx_folder) {
    const data::IdxFiles files = data::fashion_mnist_files(source, split_files);
    require_not_a_source(files.images, files.labels, destination);
  } else {
    require_not_a_source(source, options.labels, destination);
  }
  const auto [examples, spec] = [&]() -> std::pair<data::Pipeline, std::string> {
    if (idx_folder) {
      const data::IdxFiles files = data::fashion_mnist_files(source, split_files);
      std::cout << "converting the " << (options.split.empty() ? "train" : options.split)
                << " split: " << files.images << " with " << files.labels << "\n";
      return {idx_examples(files.images, files.labels), idx_spec};
    }
    if (fs::is_directory(source)) {
      if (!options.labels.empty()) {
        throw UsageError(
            "convert: --labels is for IDX images; an image folder's labels are its "
            "class folders");
      }
      return {folder_examples(source),
              "{\"image\", FeatureSpec::bytes()}, {\"label\", FeatureSpec::int64({}, DType::i32)}"};
    }
    require_regular_file(source);
    if (kind_of_file(source) != DataKind::idx) {
      throw IoError(source +
                    ": neither an IDX image file nor a folder of class folders; convert "
                    "takes one of those");
    }
    if (options.labels.empty()) {
      throw UsageError(
          "convert: IDX images need their labels: pass --labels FILE (e.g. "
          "train-labels-idx1-ubyte.gz)");
    }
    return {idx_examples(source, options.labels), idx_spec};
  }();
  // Written beside the destination and renamed over it only once complete: a failure (a bad
  // image halfway) leaves an earlier file of that name as it was, and no partial output.
  const fs::path temporary = fs::path(destination).concat(".partial");
  std::int64_t written = 0;
  try {
    written = data::write_tfrecord(examples, temporary.string(), compression);
    fs::rename(temporary, destination);
  } catch (...) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw;
  }
  std::cout << "wrote " << plural(written, "record") << " to " << destination
            << (compression == data::Compression::gzip ? " (gzip)" : "") << "\n"
            << "read it back with data::Pipeline::tfrecord({\"" << destination
            << "\"}).map(data::parse_examples({" << spec << "}))\n";
  return 0;
}

}  // namespace

const CommandSpec& data_spec() {
  static const CommandSpec spec{
      "data",
      "Inspect a data file or folder, or convert a data set to TFRecords",
      "tandem data inspect PATH\n       tandem data convert SOURCE DEST [--labels FILE] "
      "[--split train|test] [--gzip]",
      "inspect: says what PATH holds: its format (IDX, TFRecord, CIFAR-10 batch, JPEG, PNG, a\n"
      "folder of <class>/<image> files or of Fashion-MNIST's IDX files), the element count and\n"
      "shapes, and the label histogram.\n"
      "convert: writes SOURCE, an IDX image file (with --labels), a Fashion-MNIST folder (one\n"
      "split: --split train|test) or a folder of <class>/<image> files, to DEST as a TFRecord file "
      "of tf.train.Example records: image (raw pixels or the\n"
      "encoded file), label, height, width, channels (and class and format for image folders).",
      data_options().specs(),
      false,
      "inspect PATH, or convert SOURCE DEST",
  };
  return spec;
}

int run_data(const ParsedArgs& args) {
  const std::vector<std::string>& operands = args.operands();
  const std::string& action = operands.front();
  const DataOptions options = data_options().read(args);
  if (action == "inspect") {
    if (operands.size() != 2) {
      throw UsageError("'tandem data inspect' takes one PATH, got " +
                       std::to_string(operands.size() - 1));
    }
    if (!options.labels.empty() || options.gzip || !options.split.empty()) {
      throw UsageError(
          "--labels, --split and --gzip are options of 'tandem data convert', not inspect");
    }
    inspect(operands[1]);
    return 0;
  }
  if (action == "convert") {
    if (operands.size() != 3) {
      throw UsageError("'tandem data convert' takes SOURCE and DEST, got " +
                       plural(static_cast<std::int64_t>(operands.size() - 1), "argument"));
    }
    return convert(operands[1], operands[2], options);
  }
  throw UsageError("unknown action '" + action +
                   "' for 'tandem data'; choose inspect or convert (run 'tandem data --help')");
}

}  // namespace tandem::cli
