// A folder of images laid out root/<class>/<file>, as Keras' image_dataset_from_directory reads
// it: classes are the sub-folders in sorted order, files are listed once when the pipeline is
// built, and each pass reads them (the bytes; decode_image decodes).
#include <algorithm>
#include <filesystem>

#include "core/files.h"
#include "core/text.h"
#include "data/nodes.h"

namespace tandem::data {
namespace {

class ImageFolderNode final : public Node {
 public:
  ImageFolderNode(const std::string& root, const ImageFolderOptions& options)
      : root_(root), on_error_(options.on_error) {
    namespace fs = std::filesystem;
    if (!fs::is_directory(root)) {
      throw IoError(root +
                    ": no such directory; Pipeline::image_folder reads root/<class>/<image>");
    }
    std::vector<std::string> extensions;
    for (const std::string& extension : options.extensions)
      extensions.push_back(lower(extension));
    for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
      if (entry.is_directory()) class_names_.push_back(entry.path().filename().string());
    }
    std::sort(class_names_.begin(), class_names_.end());
    if (class_names_.empty()) {
      throw IoError(root + ": no class folders; lay the images out as " + root +
                    "/<class>/<image>, one folder per class");
    }
    for (std::size_t label = 0; label < class_names_.size(); ++label) {
      std::vector<std::string> files;
      for (const fs::directory_entry& entry :
           fs::recursive_directory_iterator(fs::path(root) / class_names_[label])) {
        if (!entry.is_regular_file()) continue;
        const std::string extension = lower(entry.path().extension().string());
        if (std::find(extensions.begin(), extensions.end(), extension) != extensions.end()) {
          files.push_back(entry.path().string());
        }
      }
      std::sort(files.begin(), files.end());
      for (std::string& file : files) {
        files_.push_back(std::make_shared<const std::string>(std::move(file)));
        labels_.push_back(static_cast<std::int32_t>(label));
      }
    }
    if (files_.empty()) {
      throw IoError(root +
                    ": the class folders hold no images (files ending in one of the "
                    "extensions taken); check the path and ImageFolderOptions::extensions");
    }
  }

  std::string name() const override { return "image_folder"; }
  std::int64_t cardinality() const override { return static_cast<std::int64_t>(files_.size()); }
  std::vector<std::string> class_names() const override { return class_names_; }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class FolderStream final : public Stream {
     public:
      FolderStream(const ImageFolderNode& node, std::uint64_t pass, StageCounters& self)
          : node_(node), key_(stream_key(pass, node.root_)), self_(self) {}
      std::optional<Element> next() override {
        while (index_ < node_.files_.size()) {
          const std::size_t index = index_++;
          const auto& path = node_.files_[index];
          Tensor bytes;
          try {
            bytes = read_whole_file_tensor(
                *path, {.context = "it was listed when the pipeline was built"});
          } catch (const IoError& error) {
            if (node_.on_error_ == OnError::raise) throw;
            self_.record_skip(error.what());
            continue;
          }
          Element element{{"image", std::move(bytes)},
                          {"label", Tensor::scalar(node_.labels_[index], DType::i32)}};
          element.set_origin(Origin{path, -1, -1});
          element.set_random_key(mix_keys(key_, index));
          return element;
        }
        return std::nullopt;
      }

     private:
      const ImageFolderNode& node_;
      std::uint64_t key_;
      StageCounters& self_;
      std::size_t index_ = 0;
    };
    return std::make_unique<FolderStream>(*this, context.pass, self);
  }

 private:
  std::string root_;
  OnError on_error_;
  std::vector<std::string> class_names_;
  std::vector<std::shared_ptr<const std::string>> files_;
  std::vector<std::int32_t> labels_;
};

}  // namespace

NodePtr make_image_folder_node(const std::string& root, const ImageFolderOptions& options) {
  return std::make_shared<ImageFolderNode>(root, options);
}

}  // namespace tandem::data
