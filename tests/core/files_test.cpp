// The one whole-file reader and writer (core/files.h): regular files only, refused before they
// are opened (a FIFO would block open for ever, a device never ends), bounded reads, atomic
// writes that a full disk cannot leave half done, destinations checked before a run, with
// messages that name the path, what is there and what was expected.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <thread>

#include "core/files.h"
#include "support/write_fault.h"
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

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> names_in(const std::string& folder) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder))
    names.push_back(entry.path().filename().string());
  return names;
}

TEST(WriteFileAtomically, AFullDiskKeepsTheOldFileAndLeavesNothingElse) {
  Scratch scratch;
  const std::string path = scratch.file("report.json", "the old report");
  {
    testing::ScopedWriteFault full({.after_bytes = 3, .error = ENOSPC});
    const std::string message = io_error_within_seconds(
        [&] { write_file_atomically(path, std::string_view("a new, longer report")); });
    expect_contains(message, {"cannot write", "report.json", "ENOSPC", "the disk is full"});
  }
  EXPECT_EQ(slurp(path), "the old report");
  EXPECT_EQ(names_in(scratch.path()), std::vector<std::string>{"report.json"})
      << "a temporary file was left behind";
  write_file_atomically(path, std::string_view("the new report"));
  EXPECT_EQ(slurp(path), "the new report");
}

TEST(WriteFault, FailsOnlyTheWritesUnderItsPathPrefix) {
  Scratch scratch;
  fs::create_directories(scratch.path("logs"));
  testing::ScopedWriteFault full(
      {.after_bytes = 0, .error = ENOSPC, .path_prefix = scratch.path("logs")});
  write_file_atomically(scratch.path("model.json"), std::string_view("{}"));
  EXPECT_EQ(slurp(scratch.path("model.json")), "{}");
  expect_contains(io_error_within_seconds([&] {
                    write_file_atomically(scratch.path("logs/events"), std::string_view("x"));
                  }),
                  {"logs", "ENOSPC"});
}

TEST(RequireWritableDestination, RefusesWhatCannotBecomeTheFileOrFolder) {
  Scratch scratch;
  const std::string fifo = scratch.path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_contains(io_error_within_seconds(
                      [&] { require_writable_destination(fifo, "--report", Destination::file); }),
                  {"--report", "pipe", "a FIFO (named pipe)", "pass the path of a file"});
  expect_contains(io_error_within_seconds([&] {
                    require_writable_destination(scratch.path(), "--report", Destination::file);
                  }),
                  {"--report", "a directory"});
  const std::string file = scratch.file("taken", "x");
  expect_contains(io_error_within_seconds([&] {
                    require_writable_destination(file, "--save-model", Destination::folder);
                  }),
                  {"--save-model", "taken", "is a file, not a folder"});
  expect_contains(io_error_within_seconds([&] {
                    require_writable_destination(scratch.path("none/report.json"), "--report",
                                                 Destination::file);
                  }),
                  {"--report", "none/report.json", "does not exist", "create it"});
  // Good destinations pass and leave no probe behind.
  require_writable_destination(scratch.path("report.json"), "--report", Destination::file);
  require_writable_destination(scratch.path("model"), "--save-model", Destination::folder);
  EXPECT_EQ(names_in(scratch.path()).size(), 2u);  // the FIFO and "taken"
}

// The writers' own check (require_replaceable, made by write_file_atomically): what is at the
// destination must be a file to replace. A FIFO and a character device stay what they were, and
// nothing is left beside them; a device node made in the test's folder stands for /dev/full.
TEST(WriteFileAtomically, NeverReplacesAFifoOrADeviceNode) {
  Scratch scratch;
  std::vector<std::pair<std::string, std::string>> nodes;
  const std::string fifo = scratch.path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  nodes.emplace_back(fifo, "a FIFO (named pipe)");
  const std::string device = scratch.path("null");
  if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    nodes.emplace_back(device, "a character device");
  } else {
    std::cout << "[test] no character device: mknod is not permitted here\n";
  }
  for (const auto& [path, kind] : nodes) {
    SCOPED_TRACE(path);
    const mode_t before = [&] {
      struct stat info {};
      EXPECT_EQ(::stat(path.c_str(), &info), 0);
      return info.st_mode & S_IFMT;
    }();
    const std::string message =
        io_error_within_seconds([&] { write_file_atomically(path, "results"); });
    expect_contains(message, {"not a file to replace"});
    EXPECT_NE(message.find(path + ": is " + kind), std::string::npos) << message;
    struct stat after {};
    ASSERT_EQ(::stat(path.c_str(), &after), 0);
    EXPECT_EQ(after.st_mode & S_IFMT, before) << "replaced";
    EXPECT_THROW(require_replaceable(path, Destination::folder), IoError);
  }
  // Nothing was left beside them, and a regular file or an absent one is replaceable.
  EXPECT_EQ(names_in(scratch.path()).size(), nodes.size());
  EXPECT_NO_THROW(require_replaceable(scratch.file("taken", "x"), Destination::file));
  EXPECT_NO_THROW(require_replaceable(scratch.path("absent"), Destination::folder));
}

// The temporary copy a killed save or export left (".tmp-<name>-<pid>-<n>", the pid no longer
// running) goes with the next write there; one of a process still running stays.
TEST(WriteFileAtomically, RemovesTheTemporaryCopiesOfWritersThatDied) {
  Scratch scratch;
  const std::string dead = scratch.file(".tmp-report.json-999999999-0", "half");  // past pid_max
  const std::string alive =
      scratch.file(".tmp-report.json-" + std::to_string(::getppid()) + "-3", "in progress");
  const std::string other = scratch.file(".tmp-other.json-999999999-0", "another file's");
  write_file_atomically(scratch.path("report.json"), "results");
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(alive));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_EQ(names_in(scratch.path()).size(), 3u);
}

TEST(IsGzipFile, LooksOnlyAtRegularFiles) {
  Scratch scratch;
  EXPECT_TRUE(is_gzip_file(scratch.file("a.gz", std::string("\x1f\x8b\x08", 3))));
  EXPECT_FALSE(is_gzip_file(scratch.file("plain", "IDX")));
  EXPECT_FALSE(is_gzip_file(scratch.path("missing")));
  const std::string fifo = scratch.path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::packaged_task<bool()> task([&] { return is_gzip_file(fifo); });
  std::future<bool> answer = task.get_future();
  std::thread thread(std::move(task));
  if (answer.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    thread.detach();
    FAIL() << "is_gzip_file blocked on a FIFO";
  }
  thread.join();
  EXPECT_FALSE(answer.get());
}

}  // namespace
}  // namespace tandem
