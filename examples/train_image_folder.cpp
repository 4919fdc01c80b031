// Trains a Keras model, as TensorFlow writes it (model.to_json()), on a folder of images sorted
// into class folders, through the run layer: what `tandem train --model MODEL.json --data
// PHOTOS` does, in a program. The run picks the device, shuffles, augments, validates on a
// seeded fifth of the images, logs to TensorBoard and reports.
//
//   train_image_folder PHOTOS MODEL.json [EPOCHS]
//
// PHOTOS holds a folder per class (<class>/<image>.png or .jpg), or train/ val/ test/ folders of
// them. Without arguments the program writes a small demonstration (two classes of 32x32 PNG
// images, stripes across or down, and a small Keras CNN) into a temporary folder and trains on
// that, so it runs anywhere.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tandem/image.h"
#include "tandem/run.h"

namespace {

namespace fs = std::filesystem;

// keras.Sequential([Input((32, 32, 3)), Conv2D(8, 3, activation="relu"), MaxPooling2D(),
// Flatten(), Dense(2, activation="softmax")]).to_json(), abridged to what it decides.
constexpr const char* kModelJson = R"({"class_name": "Sequential", "config": {"name": "stripes",
  "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 32, 32, 3]}},
    {"class_name": "Conv2D", "config": {"name": "conv2d", "filters": 8, "kernel_size": [3, 3],
      "activation": "relu"}},
    {"class_name": "MaxPooling2D", "config": {"name": "max_pooling2d", "pool_size": [2, 2]}},
    {"class_name": "Flatten", "config": {"name": "flatten"}},
    {"class_name": "Dense", "config": {"name": "dense", "units": 2, "activation": "softmax"}}]},
  "keras_version": "2.15.0", "backend": "tensorflow"})";

// 40 PNG images a class: stripes across (class "across") or down ("down"), of varying width.
void write_demonstration(const fs::path& photos, const fs::path& model) {
  for (const char* name : {"across", "down"}) {
    fs::create_directories(photos / name);
    for (int index = 0; index < 40; ++index) {
      tandem::Tensor image = tandem::Tensor::empty({32, 32, 3}, tandem::DType::u8);  // (H, W, C)
      auto* pixels = image.data<std::uint8_t>();
      const int width = 2 + index % 4;
      for (int y = 0; y < 32; ++y) {
        for (int x = 0; x < 32; ++x) {
          const int along = std::string(name) == "across" ? y : x;
          const bool bright = (along / width) % 2 == 0;
          for (int c = 0; c < 3; ++c)
            pixels[(y * 32 + x) * 3 + c] = bright ? 200 + 10 * c : 30 + (index * 7 + c) % 40;
        }
      }
      const tandem::Tensor png = tandem::image::encode_png(image);
      std::ofstream(photos / name / (std::to_string(index) + ".png"), std::ios::binary)
          .write(static_cast<const char*>(png.raw_data()),
                 static_cast<std::streamsize>(png.numel()));
    }
  }
  std::ofstream(model) << kModelJson;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 1 && argc != 3 && argc != 4) {
    std::cerr << "usage: train_image_folder [PHOTOS MODEL.json [EPOCHS]]\n";
    return 2;
  }
  std::string photos;
  std::string model;
  if (argc == 1) {
    const fs::path folder = fs::temp_directory_path() / "tandem-train-image-folder";
    photos = (folder / "photos").string();
    model = (folder / "stripes.json").string();
    write_demonstration(photos, model);
  } else {
    photos = argv[1];
    model = argv[2];
  }
  try {
    tandem::run::RunConfig config;
    config.model = model;
    config.data.images.training = photos;
    config.data.images.image_height = config.data.images.image_width = 32;
    config.data.images.channels = 3;
    config.data.validation_split = 0.2;
    config.data.augment = {"flip"};
    config.epochs = argc == 4 ? std::atoi(argv[3]) : 15;
    config.batch_size = 16;
    const tandem::run::Report report = tandem::run::Run(config).run();
    const double accuracy = report.history.at("val_accuracy").back();
    std::cout << "final validation accuracy: " << accuracy << "\n";
    // The demonstration's stripes are easy: a run that does not learn them is broken.
    return argc == 1 && accuracy < 0.9 ? 1 : 0;
  } catch (const tandem::Error& error) {
    std::cerr << "train_image_folder: " << error.what() << "\n";
    return 1;
  }
}
