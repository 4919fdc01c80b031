// IDX files (the MNIST format): a 4-byte magic number 0x0000TTNN (TT the element type, NN the
// number of dimensions), NN big-endian u32 extents, then the elements, big-endian, row-major.
// InputFile reads gzip and plain files alike, so one path serves both.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/file_io.h"
#include "data/idx.h"
#include "data/nodes.h"
#include "data/rows.h"
#include "tandem/data.h"

namespace tandem::data {
namespace {

struct IdxElementType {
  DType stored;       // what Tandem holds it as (i8 and i16 widen to i32: no narrower dtype)
  std::size_t width;  // bytes per element in the file
};

std::optional<IdxElementType> idx_element_type(std::uint8_t code) {
  switch (code) {
    case 0x08:
      return IdxElementType{DType::u8, 1};
    case 0x09:
      return IdxElementType{DType::i32, 1};
    case 0x0B:
      return IdxElementType{DType::i32, 2};
    case 0x0C:
      return IdxElementType{DType::i32, 4};
    case 0x0D:
      return IdxElementType{DType::f32, 4};
    case 0x0E:
      return IdxElementType{DType::f64, 8};
    default:
      return std::nullopt;
  }
}

std::string hex(std::uint64_t value, int digits) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string text = "0x";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
    text += kDigits[(value >> shift) & 0xF];
  return text;
}

std::uint64_t load_big_endian(const unsigned char* bytes, std::size_t width) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i)
    value = (value << 8) | bytes[i];
  return value;
}

struct IdxHeader {
  Shape shape;
  IdxElementType type;
  std::uint64_t magic = 0;
};

IdxHeader read_header(InputFile& file, const std::string& path) {
  unsigned char magic[4];
  const std::size_t magic_bytes = file.read(magic, 4);
  if (magic_bytes == 0) {
    throw IoError(path + ": is empty (0 bytes" +
                  (file.compressed() ? std::string(" once decompressed") : std::string()) +
                  "); an IDX file starts with a 4-byte magic number: write or download it again");
  }
  if (magic_bytes < 4) {
    throw IoError(path + ": " + std::to_string(magic_bytes) +
                  " bytes is too short for an IDX header (4-byte magic number, then the "
                  "dimensions); the file is empty or truncated: download it again");
  }
  const std::uint64_t magic_number = load_big_endian(magic, 4);
  const std::optional<IdxElementType> type = idx_element_type(magic[2]);
  if (magic[0] != 0 || magic[1] != 0 || !type) {
    throw IoError(path + ": not an IDX file (magic number " + hex(magic_number, 8) +
                  ", expected 0x0000TTNN with element type TT one of 08, 09, 0B, 0C, 0D, 0E and "
                  "NN dimensions); check that this is an IDX file such as "
                  "train-images-idx3-ubyte.gz");
  }
  const IdxElementType element_type = *type;
  const int rank = magic[3];
  if (rank == 0) {
    throw IoError(path + ": impossible shape: the magic number " + hex(magic_number, 8) +
                  " declares 0 dimensions; the header is corrupt: download the file again");
  }
  std::vector<unsigned char> extents_bytes(static_cast<std::size_t>(rank) * 4);
  const std::size_t extents_read = file.read(extents_bytes.data(), extents_bytes.size());
  if (extents_read < extents_bytes.size()) {
    throw IoError(path + ": the header ends after " + std::to_string(4 + extents_read) +
                  " bytes but declares " + std::to_string(rank) + " dimensions (" +
                  std::to_string(4 + extents_bytes.size()) +
                  " header bytes); the file is truncated: download it again");
  }
  Shape shape(static_cast<std::size_t>(rank));
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    shape[axis] = static_cast<std::int64_t>(load_big_endian(&extents_bytes[axis * 4], 4));
  }
  // Every extent is below 2^32, so the running product overflows only through a multiplication
  // we can check before doing it.
  constexpr std::uint64_t kMaxBytes = std::numeric_limits<std::int64_t>::max();
  std::uint64_t bytes = element_type.width;
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    const auto extent = static_cast<std::uint64_t>(shape[axis]);
    if (extent == 0) {
      throw IoError(path + ": impossible shape " + shape_str(shape) + ": dimension " +
                    std::to_string(axis) + " is 0; the header is corrupt: download the file again");
    }
    if (bytes > kMaxBytes / extent) {
      throw IoError(path + ": impossible shape " + shape_str(shape) +
                    ": its size overflows 64-bit byte counts; the header is corrupt: download "
                    "the file again");
    }
    bytes *= extent;
  }
  return {shape, element_type, magic_number};
}

// A header of the other kind of file than the one asked for: an images file given as labels,
// or the other way round. Said before the data is read, so it is not mistaken for a short file.
void check_role(const IdxHeader& header, const std::string& path, IdxRole role) {
  const auto rank = static_cast<int>(header.shape.size());
  const std::string declared = ": its IDX header (magic number " + hex(header.magic, 8) +
                               ") declares " + std::to_string(rank) + " dimension" +
                               (rank == 1 ? "" : "s") + " " + shape_str(header.shape);
  if (role == IdxRole::labels && rank != 1) {
    throw IoError(path + declared + (rank >= 2 ? ", as an images file's does" : "") +
                  "; a labels file has 1 (magic 0x00000801): pass the *-labels-idx1-ubyte "
                  "file as the labels");
  }
  if (role == IdxRole::images && rank < 2) {
    throw IoError(path + declared +
                  ", as a labels file's does; an images file has 3 (magic 0x00000803): pass "
                  "the *-images-idx3-ubyte file as the images");
  }
}

template <typename T>
void decode_elements(const unsigned char* bytes, const IdxElementType& type, T* out,
                     std::int64_t count) {
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    std::memcpy(out, bytes, static_cast<std::size_t>(count));
  } else {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::uint64_t raw =
          load_big_endian(bytes + static_cast<std::size_t>(i) * type.width, type.width);
      if constexpr (std::is_same_v<T, float>) {
        out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(raw));
      } else if constexpr (std::is_same_v<T, double>) {
        out[i] = std::bit_cast<double>(raw);
      } else {
        // i8, i16 and i32 all land in i32: shift the sign bit to the top, then back.
        const int unused_bits = 64 - static_cast<int>(type.width) * 8;
        out[i] =
            static_cast<std::int32_t>(static_cast<std::int64_t>(raw << unused_bits) >> unused_bits);
      }
    }
  }
}

}  // namespace

IdxContents read_idx_contents(const std::string& path, IdxRole role) {
  InputFile file(path);
  const IdxHeader header = read_header(file, path);
  check_role(header, path, role);
  const Shape& shape = header.shape;
  const IdxElementType& type = header.type;
  const std::uint64_t expected = static_cast<std::uint64_t>(shape_numel(shape)) * type.width;
  const std::vector<std::uint8_t> payload = file.read_up_to(expected);
  if (payload.size() < expected) {
    throw IoError(path + ": its header declares shape " + shape_str(shape) + ", " +
                  std::to_string(expected) + " bytes of data, but only " +
                  std::to_string(payload.size()) +
                  " follow; the file is cut short (download it again) or its header is not "
                  "its own");
  }
  if (const std::uint64_t extra = file.count_remaining(); extra > 0) {
    throw IoError(path + ": expected " + std::to_string(expected) +
                  " bytes of data after the header, found " + std::to_string(expected + extra) +
                  " (shape " + shape_str(shape) +
                  "); the header does not match the data: download the file again");
  }
  Tensor tensor = Tensor::empty(shape, type.stored);
  visit_dtype(type.stored, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int32_t> ||
                  std::is_same_v<T, float> || std::is_same_v<T, double>) {
      decode_elements(payload.data(), type, tensor.data<T>(), tensor.numel());
    }
  });
  return IdxContents{std::move(tensor), 4 + 4 * static_cast<std::int64_t>(shape.size()),
                     static_cast<std::int64_t>(type.width)};
}

Tensor read_idx(const std::string& path) {
  return read_idx_contents(path).tensor;
}

// ---- The Pipeline source: an image file and its label file ----

namespace {

class IdxNode final : public Node {
 public:
  IdxNode(const std::string& images_path, const std::string& labels_path, IdxOptions options)
      : options_(options),
        images_source_(std::make_shared<const std::string>(images_path)),
        labels_path_(labels_path) {
    if (options.num_classes < 0) {
      throw InvalidArgument("Pipeline::idx: num_classes must be >= 0 (0: no check), got " +
                            std::to_string(options.num_classes));
    }
    IdxContents images = read_idx_contents(images_path, IdxRole::images);
    IdxContents labels = read_idx_contents(labels_path, IdxRole::labels);
    if (!(labels.tensor.dtype() == DType::u8 || labels.tensor.dtype() == DType::i32)) {
      throw IoError(labels_path + ": holds " + dtype_name(labels.tensor.dtype()) + " " +
                    shape_str(labels.tensor.shape()) +
                    ", not integer labels (N,); pass the label file as the second argument");
    }
    if (images.tensor.dim(0) != labels.tensor.dim(0)) {
      throw IoError(images_path + " holds " + std::to_string(images.tensor.dim(0)) +
                    " images but " + labels_path + " holds " +
                    std::to_string(labels.tensor.dim(0)) +
                    " labels; the files come from different data sets");
    }
    images_ = std::move(images.tensor);
    image_header_bytes_ = images.header_bytes;
    image_record_bytes_ = images.element_width * (images_.numel() / images_.dim(0));
    labels_ = Tensor::from_vector(labels.tensor.to_vector<std::int32_t>(), labels.tensor.shape());
    label_header_bytes_ = labels.header_bytes;
    label_width_ = labels.element_width;
    image_shape_.assign(images_.shape().begin() + 1, images_.shape().end());
    if (options.add_channel_axis && images_.rank() == 3) image_shape_.push_back(1);
    const std::span<const std::int32_t> values(labels_.data<std::int32_t>(),
                                               static_cast<std::size_t>(labels_.numel()));
    labels_in_range_ =
        std::ranges::all_of(values, [&](std::int32_t value) { return label_in_range(value); });
  }

  std::string name() const override { return "idx"; }
  std::int64_t cardinality() const override { return images_.dim(0); }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class IdxStream final : public Stream {
     public:
      IdxStream(const IdxNode& node, std::uint64_t pass, StageCounters& self)
          : node_(node), key_(stream_key(pass, *node.images_source_)), self_(self) {}
      std::optional<Element> next() override {
        const IdxNode& node = node_;
        while (index_ < node.images_.dim(0)) {
          const std::int64_t index = index_++;
          const std::int32_t value = node.labels_.data<std::int32_t>()[index];
          if (!node.label_in_range(value)) {
            const std::string message =
                node.labels_path_ + ": label " + std::to_string(value) + " of element " +
                std::to_string(index) + " (byte " +
                std::to_string(node.label_header_bytes_ + index * node.label_width_) +
                ") is outside [0, " + std::to_string(node.options_.num_classes) +
                "); the file is corrupt or num_classes is wrong";
            if (node.options_.on_error == OnError::raise) throw IoError(message);
            self_.record_skip(message);
            continue;
          }
          return element_at(index);
        }
        return std::nullopt;
      }

      // By position where no label is out of range (else reading in order raises or skips).
      std::optional<std::int64_t> positions() override {
        if (index_ > 0 || !node_.labels_in_range_) return std::nullopt;
        return node_.images_.dim(0);
      }

      Element element_at(std::int64_t index) override {
        const Tensor image = row(node_.images_, index);  // (H, W) as stored
        Element element{{"image", Tensor::from_storage(image.storage(), image.storage_offset(),
                                                       node_.image_shape_, image.dtype())},
                        {"label", row(node_.labels_, index)}};
        stamp(element, index);
        return element;
      }

      Element gather(std::span<const std::int64_t> indices) override {
        const Tensor images = gather_rows(node_.images_, indices);  // (B, H, W) as stored
        Shape image_shape{images.dim(0)};                           // (B, H, W, 1)
        image_shape.insert(image_shape.end(), node_.image_shape_.begin(), node_.image_shape_.end());
        Element stacked{{"image", Tensor::from_storage(images.storage(), images.storage_offset(),
                                                       image_shape, images.dtype())},
                        {"label", gather_rows(node_.labels_, indices)}};
        stamp(stacked, indices.front());
        return stacked;
      }

     private:
      void stamp(Element& element, std::int64_t index) const {
        element.set_origin(Origin{node_.images_source_, index,
                                  node_.image_header_bytes_ + index * node_.image_record_bytes_});
        element.set_random_key(mix_keys(key_, static_cast<std::uint64_t>(index)));
      }

      const IdxNode& node_;
      std::uint64_t key_;
      StageCounters& self_;
      std::int64_t index_ = 0;
    };
    return std::make_unique<IdxStream>(*this, context.pass, self);
  }

 private:
  IdxOptions options_;
  std::shared_ptr<const std::string> images_source_;
  std::string labels_path_;
  Tensor images_;  // (N, H, W, ...) as stored
  Tensor labels_;  // (N,) i32
  Shape image_shape_;
  std::int64_t image_header_bytes_ = 0;
  std::int64_t image_record_bytes_ = 0;  // one image in the file
  std::int64_t label_header_bytes_ = 0;
  std::int64_t label_width_ = 1;
  bool labels_in_range_ = true;

  bool label_in_range(std::int32_t value) const {
    return options_.num_classes == 0 || (value >= 0 && value < options_.num_classes);
  }
};

}  // namespace

NodePtr make_idx_node(const std::string& images_path, const std::string& labels_path,
                      const IdxOptions& options) {
  return std::make_shared<IdxNode>(images_path, labels_path, options);
}

}  // namespace tandem::data
