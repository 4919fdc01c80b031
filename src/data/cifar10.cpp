// CIFAR-10 binary batches (data_batch_1.bin ... data_batch_5.bin, test_batch.bin): records of
// one label byte and 3072 pixel bytes, the red, green and blue 32x32 planes in turn. Elements
// come out as NHWC images.
#include <filesystem>

#include "core/files.h"
#include "data/file_io.h"
#include "data/nodes.h"

namespace tandem::data {
namespace {

constexpr std::int64_t kSide = 32;
constexpr std::int64_t kChannels = 3;
constexpr std::int64_t kPixels = kSide * kSide * kChannels;
constexpr std::int64_t kRecordBytes = 1 + kPixels;
constexpr std::int32_t kClasses = 10;

class Cifar10Node final : public Node {
 public:
  Cifar10Node(std::vector<std::string> files, ReaderOptions options) : options_(options) {
    if (files.empty()) {
      throw InvalidArgument(
          "Pipeline::cifar10: give at least one batch file, e.g. "
          "data_batch_1.bin");
    }
    std::int64_t records = 0;
    for (std::string& file : files) {
      std::error_code error;
      const auto size = std::filesystem::file_size(file, error);
      // Plain files tell their record count by their size; gzip ones only by reading them.
      if (error || is_gzip_file(file)) records = kUnknownCardinality;
      if (records >= 0) records += static_cast<std::int64_t>(size) / kRecordBytes;
      files_.push_back(std::make_shared<const std::string>(std::move(file)));
    }
    cardinality_ = records;
  }
  std::string name() const override { return "cifar10"; }
  std::int64_t cardinality() const override { return cardinality_; }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class Cifar10Stream final : public Stream {
     public:
      Cifar10Stream(const Cifar10Node& node, std::uint64_t pass, StageCounters& self)
          : node_(node), pass_(pass), self_(self) {}

      std::optional<Element> next() override {
        while (file_ < node_.files_.size()) {
          try {
            if (std::optional<Element> element = read()) return element;
          } catch (const IoError& error) {
            if (node_.options_.on_error == OnError::raise) throw;
            self_.record_skip(error.what());
            if (input_) continue;  // a bad label: the next record is intact
          }
          input_.reset();
          ++file_;
          index_ = 0;
        }
        return std::nullopt;
      }

     private:
      // The next record of the current file; nothing at its end. Leaves input_ empty when the
      // file cannot go on.
      std::optional<Element> read() {
        const auto& path = node_.files_[file_];
        if (!input_) {
          input_ = std::make_unique<InputFile>(*path);
          file_key_ = stream_key(pass_, *path);
        }
        const std::int64_t index = index_;
        const auto offset = static_cast<std::int64_t>(input_->offset());
        std::uint8_t record[kRecordBytes];
        std::size_t got = 0;
        try {
          got = input_->read(record, kRecordBytes);
        } catch (const IoError&) {
          input_.reset();  // undecodable gzip data: the rest of the file is lost
          throw;
        }
        if (got == 0) {
          input_.reset();
          return std::nullopt;
        }
        ++index_;
        const std::string where =
            *path + ": record " + std::to_string(index) + " at byte " + std::to_string(offset);
        if (got < static_cast<std::size_t>(kRecordBytes)) {
          input_.reset();
          throw IoError(where + " is truncated: " + std::to_string(got) + " of " +
                        std::to_string(kRecordBytes) +
                        " bytes; the file was cut short: download it again");
        }
        if (record[0] >= kClasses) {
          throw IoError(where + ": label " + std::to_string(record[0]) +
                        " is outside [0, 10); the file is corrupt or not a CIFAR-10 batch "
                        "(CIFAR-100's records have two label bytes)");
        }
        Tensor image = Tensor::empty({kSide, kSide, kChannels}, DType::u8);  // (32, 32, 3)
        auto* out = image.data<std::uint8_t>();
        const std::uint8_t* planes = record + 1;  // (3, 32, 32)
        for (std::int64_t pixel = 0; pixel < kSide * kSide; ++pixel) {
          for (std::int64_t channel = 0; channel < kChannels; ++channel)
            out[pixel * kChannels + channel] = planes[channel * kSide * kSide + pixel];
        }
        Element element{{"image", std::move(image)},
                        {"label", Tensor::scalar(record[0], DType::i32)}};
        element.set_origin(Origin{path, index, offset});
        element.set_random_key(mix_keys(file_key_, static_cast<std::uint64_t>(index)));
        return element;
      }

      const Cifar10Node& node_;
      std::uint64_t pass_;
      std::uint64_t file_key_ = 0;
      StageCounters& self_;
      std::size_t file_ = 0;
      std::int64_t index_ = 0;
      std::unique_ptr<InputFile> input_;
    };
    return std::make_unique<Cifar10Stream>(*this, context.pass, self);
  }

 private:
  std::vector<std::shared_ptr<const std::string>> files_;
  ReaderOptions options_;
  std::int64_t cardinality_ = kUnknownCardinality;
};

}  // namespace

NodePtr make_cifar10_node(std::vector<std::string> files, const ReaderOptions& options) {
  return std::make_shared<Cifar10Node>(std::move(files), options);
}

}  // namespace tandem::data
