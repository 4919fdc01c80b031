// Tandem's side of bench/data_pipeline_vs_tfdata.sh: input-pipeline throughput in elements per
// second, printed as one JSON line, and the preparation of its JPEG data set.
//
//   data_pipeline prepare --photos A.jpg,B.jpg,... --out DIR [--count N] [--seed S]
//       re-encodes random crops of the photos at ImageNet-like sizes (longer side 333..500
//       pixels, JPEG quality 90) into DIR/<photo>/<n>.jpg
//   data_pipeline jpeg --dir DIR [--decode crop|full] [--threads T] [--batch-size B] [--passes P]
//       the ImageNet training input: read, decode, random-resized-crop to 224x224, random flip,
//       normalise to f32, batch, prefetch
//   data_pipeline fashion [--data-dir DIR] [--threads T] [--batch-size B] [--passes P]
//       Fashion-MNIST's training images from their IDX files: shuffle (full buffer), batch,
//       scale to f32, prefetch
//
// Every pass is timed; the first is a warm-up (page cache, threads, autotuning) and the
// reported rate is the median over the others.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tandem/tandem.h"

namespace {

using namespace tandem;
namespace fs = std::filesystem;

constexpr std::int64_t kSide = 224;
// ImageNet's per-channel mean and standard deviation on the 0..255 scale.
const std::vector<float> kMean{123.68f, 116.78f, 103.94f};
const std::vector<float> kStddev{58.39f, 57.12f, 57.38f};
constexpr std::uint64_t kSeed = 1234;

struct Options {
  std::string command;
  std::map<std::string, std::string> values;

  std::string get(const std::string& name, const std::string& fallback) const {
    const auto found = values.find(name);
    return found == values.end() ? fallback : found->second;
  }
  std::int64_t integer(const std::string& name, std::int64_t fallback) const {
    const auto found = values.find(name);
    if (found == values.end()) return fallback;
    const std::int64_t value = std::stoll(found->second);
    if (value < 1) throw InvalidArgument(name + " must be at least 1, got " + found->second);
    return value;
  }
};

Options parse(int argc, char** argv) {
  if (argc < 2) {
    throw InvalidArgument("usage: data_pipeline prepare|jpeg|fashion [--option value ...]");
  }
  Options options{argv[1], {}};
  for (int i = 2; i < argc; ++i) {
    const std::string name = argv[i];
    if (!name.starts_with("--") || i + 1 >= argc) {
      throw InvalidArgument("expected --option value pairs, got '" + name + "'");
    }
    options.values[name] = argv[++i];
  }
  return options;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// A file's bytes as a rank-1 u8 tensor.
Tensor load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw IoError(path + ": cannot read");
  return data::Element::bytes(bytes);
}

void save(const fs::path& path, const Tensor& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(bytes.raw_data()), bytes.numel());
  if (!out) throw IoError(path.string() + ": cannot write");
}

// ---- prepare ----

int prepare(const Options& options) {
  const std::vector<std::string> photos = split(options.get("--photos", ""), ',');
  if (photos.empty()) throw InvalidArgument("prepare: give --photos A.jpg,B.jpg,...");
  const fs::path out = options.get("--out", "");
  if (out.empty()) throw InvalidArgument("prepare: give --out DIR");
  const std::int64_t count = options.integer("--count", 512);
  const auto seed = static_cast<std::uint64_t>(options.integer("--seed", 7));
  std::vector<Tensor> decoded;
  std::vector<std::string> classes;
  for (const std::string& photo : photos) {
    decoded.push_back(image::decode(load(photo), {.channels = 3}, photo));
    classes.push_back(fs::path(photo).stem().string());
    fs::create_directories(out / classes.back());
  }
  const image::RandomResizedCropOptions crop{.scale = {0.25, 1.0}};
  for (std::int64_t n = 0; n < count; ++n) {
    const auto source = static_cast<std::size_t>(n) % decoded.size();
    const Tensor& photo = decoded[source];  // (H, W, 3)
    const auto words = philox4x32(static_cast<std::uint64_t>(n), 0, seed);
    const std::uint64_t key = (std::uint64_t{words[0]} << 32) | words[1];
    const image::CropWindow window = image::sample_crop(photo.dim(0), photo.dim(1), crop, key);
    // The longer side between 333 and 500 pixels, as most ImageNet photographs have it.
    const std::int64_t longer = 333 + static_cast<std::int64_t>(philox4x32(key, 1, seed)[0] % 168);
    const double scale =
        static_cast<double>(longer) / static_cast<double>(std::max(window.height, window.width));
    const auto height =
        std::max<std::int64_t>(1, std::lround(static_cast<double>(window.height) * scale));
    const auto width =
        std::max<std::int64_t>(1, std::lround(static_cast<double>(window.width) * scale));
    const Tensor resized = image::resize(image::crop(photo, window), height, width);
    save(out / classes[source] / (std::to_string(n) + ".jpg"), image::encode_jpeg(resized, 90));
  }
  std::cout << "{\"prepared\": " << count << ", \"classes\": " << classes.size() << "}\n";
  return 0;
}

// ---- timing ----

struct PassTimes {
  std::int64_t elements = 0;
  std::vector<double> rates;  // elements per second of each pass, warm-up included
  // Elements per CPU-second of the process (all threads) in each pass: what the work costs,
  // whatever other processes on the machine take.
  std::vector<double> cpu_rates;
};

// User and system CPU time of this process, all threads.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& time) {
    return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

PassTimes time_passes(const data::Pipeline& pipeline, std::int64_t passes,
                      const std::string& count_key) {
  PassTimes times;
  for (std::int64_t pass = 0; pass < passes; ++pass) {
    const double cpu_before = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    std::int64_t elements = 0;
    data::ElementIterator iterator = pipeline.start(pass);
    while (std::optional<data::Element> batch = iterator.next())
      elements += batch->at(count_key).dim(0);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    times.elements = elements;
    times.rates.push_back(static_cast<double>(elements) / seconds);
    times.cpu_rates.push_back(static_cast<double>(elements) / (cpu_seconds() - cpu_before));
    if (pass == passes - 1) std::cerr << iterator.stats().table();
  }
  return times;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2.0;
}

int report(const Options& options, const std::string& workload, const std::string& variant,
           const PassTimes& times, std::int64_t threads, std::int64_t batch_size) {
  const std::vector<double> timed(times.rates.begin() + 1, times.rates.end());
  const std::vector<double> timed_cpu(times.cpu_rates.begin() + 1, times.cpu_rates.end());
  std::ostringstream line;
  line << "{\"framework\": \"tandem\", \"version\": \"" << version() << "\", \"workload\": \""
       << workload << "\", \"variant\": \"" << variant << "\", \"threads\": " << threads
       << ", \"batch_size\": " << batch_size << ", \"elements\": " << times.elements
       << ", \"elements_per_sec\": " << median(timed) << ", \"pass_elements_per_sec\": [";
  for (std::size_t i = 0; i < times.rates.size(); ++i)
    line << (i ? ", " : "") << times.rates[i];
  line << "], \"elements_per_cpu_sec\": " << median(timed_cpu) << "}";
  std::cout << line.str() << "\n";
  if (const std::string path = options.get("--report", ""); !path.empty()) {
    std::ofstream(path) << line.str() << "\n";
  }
  return 0;
}

// ---- jpeg ----

// Decode, crop, resize, flip and normalise as one map function, run on `threads` threads.
int jpeg(const Options& options) {
  const std::string dir = options.get("--dir", "");
  if (dir.empty()) throw InvalidArgument("jpeg: give --dir DIR (from `data_pipeline prepare`)");
  const std::string decode = options.get("--decode", "crop");
  if (decode != "crop" && decode != "full") {
    throw InvalidArgument("jpeg: --decode is crop (decode only the crop window) or full");
  }
  const std::int64_t threads =
      options.integer("--threads", static_cast<std::int64_t>(std::thread::hardware_concurrency()));
  const std::int64_t batch_size = options.integer("--batch-size", 32);
  const std::int64_t passes = options.integer("--passes", 4);
  set_num_threads(static_cast<int>(threads));
  // "full" decodes the whole image first; random_resized_crop then crops the decoded pixels.
  const data::MapFn decode_full = data::decode_image({.channels = 3});
  const data::MapFn crop = data::random_resized_crop(kSide, kSide, kSeed);
  const data::MapFn flip = data::random_flip_left_right(kSeed);
  const data::MapFn normalize = data::normalize(kMean, kStddev);
  const bool full = decode == "full";
  const data::Pipeline pipeline =
      data::Pipeline::image_folder(dir)
          .map(
              [=](data::Element element) {
                if (full) element = decode_full(std::move(element));
                return normalize(flip(crop(std::move(element))));
              },
              {.num_parallel_calls = static_cast<int>(threads), .name = "augment"})
          .batch(batch_size)
          .prefetch(data::kAutotune)
          .with_options({.cpu_budget = static_cast<int>(threads)});
  return report(options, "jpeg", decode, time_passes(pipeline, passes, "label"), threads,
                batch_size);
}

// ---- fashion ----

int fashion(const Options& options) {
  const std::string dir = options.get("--data-dir", data::kFashionMnistDefaultDir);
  const std::int64_t threads =
      options.integer("--threads", static_cast<std::int64_t>(std::thread::hardware_concurrency()));
  const std::int64_t batch_size = options.integer("--batch-size", 32);
  const std::int64_t passes = options.integer("--passes", 4);
  set_num_threads(static_cast<int>(threads));
  const data::IdxFiles files = data::fashion_mnist_files(dir, "train");
  const data::Pipeline examples = data::Pipeline::idx(files.images, files.labels);
  const data::Pipeline pipeline =
      examples.shuffle(examples.cardinality(), kSeed)
          .batch(batch_size)
          .map(data::cast(DType::f32, 1.0 / 255.0),
               {.num_parallel_calls = static_cast<int>(threads), .name = "scale"})
          .prefetch(data::kAutotune)
          .with_options({.cpu_budget = static_cast<int>(threads)});
  return report(options, "fashion", "idx", time_passes(pipeline, passes, "label"), threads,
                batch_size);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    if (options.command == "prepare") return prepare(options);
    if (options.command == "jpeg") return jpeg(options);
    if (options.command == "fashion") return fashion(options);
    throw InvalidArgument("unknown command '" + options.command +
                          "'; use prepare, jpeg or fashion");
  } catch (const std::exception& error) {
    std::cerr << "data_pipeline: " << error.what() << "\n";
    return 1;
  }
}
