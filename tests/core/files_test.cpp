// The one whole-file reader (core/files.h): regular files only, refused before they are opened
// (a FIFO would block open for ever, a device never ends), bounded, with messages that name the
// path, what is there and what was expected.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "core/files.h"
#include "tandem/error.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// A folder of its own under the temporary directory, removed with everything in it.
class Scratch {
 public:
  Scratch() {
    path_ = fs::temp_directory_path() /
            ("tandem-files-test-" + std::to_string(::getpid()) + "-" + std::to_string(count_++));
    fs::create_directories(path_);
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name, const std::string& contents) const {
    const std::string path = (path_ / name).string();
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
  std::string path(const std::string& name = "") const { return (path_ / name).string(); }

 private:
  static inline int count_ = 0;
  fs::path path_;
};

// The IoError message of `read` (which must throw one), run on a thread of its own so that a read
// that blocks fails the test after a few seconds instead of hanging it.
template <typename Fn>
std::string io_error_within_seconds(Fn read) {
  std::packaged_task<std::string()> task([read] {
    try {
      read();
    } catch (const IoError& error) {
      return std::string(error.what());
    } catch (const std::exception& error) {
      return std::string("(not an IoError: ") + error.what() + ")";
    }
    return std::string("(no IoError thrown)");
  });
  std::future<std::string> message = task.get_future();
  std::thread thread(std::move(task));
  if (message.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    thread.detach();  // blocked in the kernel; the process ends with the test binary
    ADD_FAILURE() << "the read blocked";
    return "(blocked)";
  }
  thread.join();
  return message.get();
}

void expect_contains(const std::string& text, std::initializer_list<const char*> parts) {
  for (const char* part : parts)
    EXPECT_NE(text.find(part), std::string::npos) << text;
}

TEST(ReadWholeFile, ReadsARegularFile) {
  Scratch scratch;
  const std::string path = scratch.file("bytes", std::string("ab\0cd", 5));
  const std::vector<std::uint8_t> bytes = read_whole_file(path);
  EXPECT_EQ(bytes, (std::vector<std::uint8_t>{'a', 'b', 0, 'c', 'd'}));
  const Tensor tensor = read_whole_file_tensor(path);
  ASSERT_EQ(tensor.shape(), (Shape{5}));
  EXPECT_EQ(tensor.dtype(), DType::u8);
  EXPECT_EQ(tensor.data<std::uint8_t>()[3], 'c');
  EXPECT_TRUE(read_whole_file(scratch.file("empty", "")).empty());
}

TEST(ReadWholeFile, AFifoIsRefusedWithoutWaitingForAWriter) {
  Scratch scratch;
  const std::string fifo = scratch.path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string message = io_error_within_seconds([&] { read_whole_file(fifo); });
  expect_contains(
      message, {"pipe", "is a FIFO (named pipe)", "not a regular file", "pass the path of a file"});
  expect_contains(io_error_within_seconds([&] { require_regular_file(fifo); }), {"FIFO"});
}

TEST(ReadWholeFile, AFolderIsRefused) {
  Scratch scratch;
  const std::string message = io_error_within_seconds([&] { read_whole_file(scratch.path()); });
  expect_contains(message, {"is a directory", "not a regular file", "pass the path of a file"});
  EXPECT_EQ(message.find(scratch.path()), 0u) << message;
}

TEST(ReadWholeFile, ADeviceIsRefusedEvenWithASmallBound) {
  if (!fs::exists("/dev/zero")) GTEST_SKIP() << "SKIPPED: no /dev/zero";
  const std::string message =
      io_error_within_seconds([] { read_whole_file_tensor("/dev/zero", {.max_bytes = 1024}); });
  expect_contains(message, {"/dev/zero", "is a character device", "not a regular file"});
}

TEST(ReadWholeFile, AFileAboveTheBoundIsRefusedWithBothSizes) {
  Scratch scratch;
  const std::string path = scratch.file("big.json", std::string(2000, 'x'));
  const std::string message =
      io_error_within_seconds([&] { read_whole_file(path, {.max_bytes = 1000}); });
  expect_contains(message, {"big.json", "2000 bytes", "1000 bytes"});
  EXPECT_EQ(read_whole_file(path, {.max_bytes = 2000}).size(), 2000u);
}

TEST(ReadWholeFile, AMissingFileNamesThePathAndTheContext) {
  Scratch scratch;
  const std::string missing = scratch.path("none");
  const std::string message = io_error_within_seconds(
      [&] { read_whole_file(missing, {.context = "it was listed when the pipeline was built"}); });
  expect_contains(message,
                  {"none", "no such file", "listed when the pipeline was built", "check the path"});
}

}  // namespace
}  // namespace tandem
