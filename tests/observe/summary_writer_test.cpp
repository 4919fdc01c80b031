// The TensorBoard event writer, checked with the tests' own reader (event_decoder.h): CRC-32C
// against the published test vectors, TFRecord framing, and every summary kind decoded field by
// field with TensorBoard's field numbers; buffering, the flush timer, and what survives a crash.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <regex>
#include <thread>

#include "core/crc32c.h"
#include "data/idx_files.h"
#include "observe/event_decoder.h"
#include "observe/event_file.h"
#include "observe/histogram.h"
#include "support/errors.h"
#include "tandem/observe.h"

namespace tandem::testing {
namespace {

using observe::SummaryWriter;

std::string bytes_from(std::initializer_list<int> values) {
  std::string bytes;
  for (int value : values)
    bytes += static_cast<char>(value);
  return bytes;
}

std::uint32_t library_crc(const std::string& data) {
  return crc32c({reinterpret_cast<const std::uint8_t*>(data.data()), data.size()});
}

// RFC 3720 (iSCSI), appendix B.4, and the CRC catalogue's check value.
TEST(Crc32c, MatchesThePublishedVectors) {
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending += static_cast<char>(i);
    descending += static_cast<char>(31 - i);
  }
  const std::vector<std::pair<std::string, std::uint32_t>> vectors{
      {std::string(32, '\0'), 0x8A9136AAu},
      {std::string(32, '\xFF'), 0x62A8AB43u},
      {ascending, 0x46DD794Eu},
      {descending, 0x113FDB5Cu},
      {"123456789", 0xE3069283u},
  };
  for (const auto& [data, expected] : vectors) {
    EXPECT_EQ(reference_crc32c(data), expected);
    EXPECT_EQ(library_crc(data), expected);
  }
  // Lengths that exercise every tail of the 8-byte loops.
  std::string text = "The quick brown fox jumps over the lazy dog, 0123456789";
  for (std::size_t length = 0; length <= text.size(); ++length) {
    EXPECT_EQ(library_crc(text.substr(0, length)), reference_crc32c(text.substr(0, length)));
  }
}

TEST(TfRecord, FramesLengthDataAndMaskedCrcs) {
  const std::string data = "hello, tensorboard";
  std::string framed;
  observe::append_tfrecord(framed, data);
  ASSERT_EQ(framed.size(), 8 + 4 + data.size() + 4);
  EXPECT_EQ(little_endian(framed, 0, 8), data.size());
  EXPECT_EQ(little_endian(framed, 8, 4), reference_mask(reference_crc32c(framed.substr(0, 8))));
  EXPECT_EQ(framed.substr(12, data.size()), data);
  EXPECT_EQ(little_endian(framed, 12 + data.size(), 4), reference_mask(reference_crc32c(data)));
  // The mask is TensorFlow's: rotate right by 15 and add a constant.
  EXPECT_EQ(reference_mask(0), 0xa282ead8u);
  EXPECT_EQ(reference_mask(0x00008000u), 0xa282ead9u);
}

TEST(TfRecord, AnEmptyRecordIsSixteenBytes) {
  std::string framed;
  observe::append_tfrecord(framed, "");
  ASSERT_EQ(framed.size(), 16u);
  EXPECT_EQ(little_endian(framed, 12, 4), reference_mask(reference_crc32c("")));
}

TEST(SummaryWriter, FileNameAndHeaderAreTensorFlows) {
  ScratchDir dir;
  std::string path;
  {
    SummaryWriter writer(dir.file("run"));
    path = writer.path();
    EXPECT_EQ(writer.log_dir(), dir.file("run"));
  }
  const std::string name = std::filesystem::path(path).filename().string();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_TRUE(
      std::regex_match(name, std::regex("events\\.out\\.tfevents\\.\\d{10}\\." + std::string(host) +
                                        "\\." + std::to_string(getpid()) + "\\.\\d+")))
      << name;
  const std::vector<std::string> records = read_records(path);
  ASSERT_EQ(records.size(), 1u);
  const Message header(records[0]);
  EXPECT_EQ(header.string(tb::kFileVersion), "brain.Event:2");
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(header.double_value(tb::kWallTime), now, 60.0);
}

TEST(SummaryWriter, TwoWritersInOneFolderWriteTwoFiles) {
  ScratchDir dir;
  SummaryWriter first(dir.path().string());
  SummaryWriter second(dir.path().string());
  EXPECT_NE(first.path(), second.path());
}

TEST(SummaryWriter, ScalarsCarryTagStepValueAndWallTime) {
  ScratchDir dir;
  {
    SummaryWriter writer(dir.path().string());
    writer.add_scalar("loss", 0.25, 7);
    writer.add_scalar("loss", 0.125, 8, /*wall_time=*/1.5e9);
    writer.add_scalar("train/accuracy", 0.875, 8);
  }
  const auto values = read_summaries(dir.path());
  ASSERT_EQ(values.size(), 3u);
  const auto losses = with_tag(values, "loss");
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_EQ(losses[0].step, 7);
  EXPECT_EQ(losses[0].value.float_value(tb::kSimpleValue), 0.25f);
  EXPECT_EQ(losses[0].value.field(tb::kSimpleValue).wire_type, 5);  // a float, fixed32
  EXPECT_EQ(losses[1].step, 8);
  EXPECT_EQ(losses[1].wall_time, 1.5e9);
  EXPECT_EQ(with_tag(values, "train/accuracy").at(0).value.float_value(tb::kSimpleValue), 0.875f);
}

TEST(SummaryWriter, HistogramsHaveTheStatisticsAndBuckets) {
  ScratchDir dir;
  {
    SummaryWriter writer(dir.path().string());
    // 0..9 in 5 buckets of width 1.8: two values each.
    std::vector<float> values;
    for (int i = 0; i < 10; ++i)
      values.push_back(static_cast<float>(i));
    writer.add_histogram("weights", Tensor::from_vector(values, {2, 5}), 3, 5);
  }
  const auto values = with_tag(read_summaries(dir.path()), "weights");
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].step, 3);
  const Message histogram = values[0].value.message(tb::kHisto);
  EXPECT_EQ(histogram.double_value(tb::kMin), 0.0);
  EXPECT_EQ(histogram.double_value(tb::kMax), 9.0);
  EXPECT_EQ(histogram.double_value(tb::kNum), 10.0);
  EXPECT_EQ(histogram.double_value(tb::kSum), 45.0);
  EXPECT_EQ(histogram.double_value(tb::kSumSquares), 285.0);
  const std::vector<double> limits = histogram.packed_doubles(tb::kBucketLimit);
  const std::vector<double> counts = histogram.packed_doubles(tb::kBucket);
  ASSERT_EQ(limits.size(), 5u);
  EXPECT_NEAR(limits[0], 1.8, 1e-12);
  EXPECT_NEAR(limits[3], 7.2, 1e-12);
  EXPECT_EQ(limits[4], 9.0);
  EXPECT_EQ(counts, std::vector<double>(5, 2.0));
}

TEST(Histogram, LeavesOutNonFiniteValuesAndHandlesOneValue) {
  const observe::Histogram constant = observe::make_histogram({2.0, 2.0, NAN, INFINITY}, 30);
  EXPECT_EQ(constant.count, 2.0);
  ASSERT_EQ(constant.bucket_counts.size(), 1u);
  EXPECT_EQ(constant.bucket_counts[0], 2.0);
  EXPECT_EQ(constant.bucket_limits[0], 2.0);
  const observe::Histogram empty = observe::make_histogram({NAN}, 30);
  EXPECT_EQ(empty.count, 0.0);
  EXPECT_TRUE(empty.bucket_counts.empty());
}

// The width and height stored big-endian in a PNG's IHDR chunk, read without libpng.
std::pair<std::uint32_t, std::uint32_t> png_size(const std::string& png) {
  const auto be32 = [&](std::size_t offset) {
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i)
      value = (value << 8) | static_cast<unsigned char>(png.at(offset + i));
    return value;
  };
  return {be32(16), be32(20)};
}

TEST(SummaryWriter, ImagesArePngsWithTheirSize) {
  ScratchDir dir;
  {
    SummaryWriter writer(dir.path().string());
    std::vector<float> pixels(3 * 4 * 5 * 1);
    for (std::size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = static_cast<float>(i) / static_cast<float>(pixels.size());
    writer.add_image("inputs", Tensor::from_vector(pixels, {3, 4, 5, 1}), 2, /*max_images=*/2);
    writer.add_image("one", Tensor::zeros({6, 7, 3}, DType::u8), 0);
  }
  const auto values = read_summaries(dir.path());
  ASSERT_EQ(with_tag(values, "inputs/image/0").size(), 1u);
  ASSERT_EQ(with_tag(values, "inputs/image/1").size(), 1u);
  EXPECT_TRUE(with_tag(values, "inputs/image/2").empty());  // max_images
  const SummaryValue first = with_tag(values, "inputs/image/0")[0];
  EXPECT_EQ(first.step, 2);
  const Message image = first.value.message(tb::kImage);
  EXPECT_EQ(image.varint_value(tb::kHeight), 4u);
  EXPECT_EQ(image.varint_value(tb::kWidth), 5u);
  EXPECT_EQ(image.varint_value(tb::kColorspace), 1u);
  const std::string png = image.string(tb::kEncodedImage);
  EXPECT_EQ(png.substr(0, 8), bytes_from({0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'}));
  EXPECT_EQ(png_size(png), std::make_pair(5u, 4u));
  const Message rgb = with_tag(values, "one").at(0).value.message(tb::kImage);
  EXPECT_EQ(rgb.varint_value(tb::kColorspace), 3u);
  EXPECT_EQ(png_size(rgb.string(tb::kEncodedImage)), std::make_pair(7u, 6u));
}

TEST(SummaryWriter, TextIsAStringTensorForTheTextPlugin) {
  ScratchDir dir;
  {
    SummaryWriter writer(dir.path().string());
    writer.add_text("config", "| a | b |\n|---|---|\n| 1 | 2 |", 0);
  }
  const auto values = with_tag(read_summaries(dir.path()), "config");
  ASSERT_EQ(values.size(), 1u);
  const Message metadata = values[0].value.message(tb::kMetadata);
  EXPECT_EQ(metadata.message(tb::kPluginData).string(tb::kPluginName), "text");
  const Message tensor = values[0].value.message(tb::kTensor);
  EXPECT_EQ(tensor.varint_value(tb::kDtype), static_cast<std::uint64_t>(tb::kDtString));
  EXPECT_EQ(tensor.string(tb::kStringVal), "| a | b |\n|---|---|\n| 1 | 2 |");
}

TEST(SummaryWriter, HParamsSessionRecordsForThePlugin) {
  ScratchDir dir;
  {
    SummaryWriter writer(dir.path().string());
    writer.add_hparams_session_start(
        {{"learning_rate", 0.001}, {"optimizer", std::string("adam")}, {"augment", true}},
        "group-a");
    writer.add_hparams_session_end(observe::SessionStatus::success);
  }
  const auto values = read_summaries(dir.path());
  const auto starts = with_tag(values, "_hparams_/session_start_info");
  ASSERT_EQ(starts.size(), 1u);
  const Message metadata = starts[0].value.message(tb::kMetadata).message(tb::kPluginData);
  EXPECT_EQ(metadata.string(tb::kPluginName), "hparams");
  const Message plugin(metadata.string(tb::kPluginContent));
  EXPECT_FALSE(plugin.has(1) && plugin.varint_value(1) != 0);  // version 0
  const Message start = plugin.message(tb::kSessionStartInfo);
  std::map<std::string, Message> hparams;
  for (std::size_t i = 0; i < start.count(tb::kHParams); ++i) {
    const Message entry = start.message(tb::kHParams, i);
    hparams[entry.string(1)] = entry.message(2);
  }
  ASSERT_EQ(hparams.size(), 3u);
  EXPECT_EQ(hparams["learning_rate"].double_value(tb::kNumberValue), 0.001);
  EXPECT_EQ(hparams["optimizer"].string(tb::kStringValue), "adam");
  EXPECT_EQ(hparams["augment"].varint_value(tb::kBoolValue), 1u);
  EXPECT_EQ(start.string(tb::kGroupName), "group-a");
  EXPECT_GT(start.double_value(tb::kStartTime), 1.6e9);
  // The plugin's records carry an empty float tensor, as TensorBoard's own.
  const Message tensor = starts[0].value.message(tb::kTensor);
  EXPECT_EQ(tensor.varint_value(tb::kDtype), static_cast<std::uint64_t>(tb::kDtFloat));

  const auto ends = with_tag(values, "_hparams_/session_end_info");
  ASSERT_EQ(ends.size(), 1u);
  const Message end_plugin(
      ends[0].value.message(tb::kMetadata).message(tb::kPluginData).string(tb::kPluginContent));
  const Message end = end_plugin.message(tb::kSessionEndInfo);
  EXPECT_EQ(end.varint_value(tb::kStatus), static_cast<std::uint64_t>(tb::kStatusSuccess));
  EXPECT_GE(end.double_value(tb::kEndTime), start.double_value(tb::kStartTime));
}

std::uintmax_t file_size(const std::string& path) {
  return std::filesystem::file_size(path);
}

TEST(SummaryWriter, BuffersUntilTheTimerFlushes) {
  ScratchDir dir;
  SummaryWriter writer(dir.path().string(), {.flush_seconds = 0.5});
  // The header reaches the file on the first tick.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (file_size(writer.path()) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::uintmax_t header = file_size(writer.path());
  ASSERT_GT(header, 0u);
  writer.add_scalar("loss", 1.0, 0);
  EXPECT_EQ(file_size(writer.path()), header);  // buffered, not yet written
  while (file_size(writer.path()) == header && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(file_size(writer.path()), header);
}

TEST(SummaryWriter, FlushWritesAtOnceAndALargeBacklogDoesNotWaitForTheTimer) {
  ScratchDir dir;
  SummaryWriter writer(dir.path().string(), {.flush_seconds = 3600, .max_pending_bytes = 4096});
  writer.add_scalar("loss", 1.0, 0);
  writer.flush();
  EXPECT_EQ(with_tag(read_summaries(dir.path()), "loss").size(), 1u);
  for (int step = 1; step <= 400; ++step)
    writer.add_scalar("loss", 1.0, step);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (with_tag(read_summaries(dir.path()), "loss").size() < 300 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(with_tag(read_summaries(dir.path()), "loss").size(), 300u);
}

// A child process writes, lets the timer run, and is killed: what the timer wrote survives.
TEST(SummaryWriter, AKilledProcessLosesAtMostTheLastFlushInterval) {
  ScratchDir dir;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SummaryWriter writer(dir.path().string(), {.flush_seconds = 0.05});
    writer.add_scalar("before_crash", 1.0, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    writer.add_scalar("lost", 2.0, 1);  // the kill comes before the next tick
    raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  const auto values = read_summaries(dir.path());
  EXPECT_EQ(with_tag(values, "before_crash").size(), 1u);
}

// std::exit skips the destructors of local objects; the exit handler still flushes.
TEST(SummaryWriter, ExitFlushesPendingEvents) {
  ScratchDir dir;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SummaryWriter writer(dir.path().string(), {.flush_seconds = 3600});
    writer.add_scalar("at_exit", 3.0, 0);
    std::exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(with_tag(read_summaries(dir.path()), "at_exit").size(), 1u);
}

TEST(SummaryWriter, BadArgumentsAreClearErrors) {
  ScratchDir dir;
  EXPECT_NE(error_of([] { SummaryWriter writer(""); }).find("log_dir is empty"), std::string::npos);
  EXPECT_NE(error_of([&] {
              SummaryWriter writer(dir.path().string(), {.flush_seconds = 0});
            }).find("flush_seconds must be a positive"),
            std::string::npos);
  SummaryWriter writer(dir.path().string());
  EXPECT_NE(error_of([&] {
              writer.add_image("x", Tensor::zeros({4, 4, 2}), 0);
            }).find("2 channels; give 1 (grey), 3 (RGB) or 4 (RGBA)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              writer.add_image("x", Tensor::zeros({4, 4}), 0);
            }).find("expects an image (H, W, C) or a batch (N, H, W, C), got (4, 4)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              writer.add_histogram("x", Tensor::zeros({3}), 0, 0);
            }).find("buckets must be positive"),
            std::string::npos);
  writer.close();
  EXPECT_THROW(writer.add_scalar("x", 1.0, 0), Error);
}

TEST(SummaryWriter, AFileWhereTheFolderShouldBeIsAnIoError) {
  ScratchDir dir;
  std::ofstream(dir.file("taken")) << "x";
  try {
    SummaryWriter writer(dir.file("taken"));
    FAIL() << "no error";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find(dir.file("taken")), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("choose another --logdir"), std::string::npos);
  }
}

}  // namespace
}  // namespace tandem::testing
