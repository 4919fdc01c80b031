// Durable and atomic file writing: a full disk (the kernel's /dev/full, and the fault-injection
// seam) is reported with the file and the fix and leaves the previous file intact; folder locks
// keep a second writer out; folders are swapped in whole.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>

#include "core/files.h"
#include "io/file_io.h"
#include "io/io_support.h"
#include "support/write_fault.h"

namespace tandem {
namespace {

using testing::io_error_of;
using testing::ScratchDir;

std::vector<std::uint8_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}

TEST(FileIo, WritingToAFullDeviceSaysTheDiskIsFull) {
  // /dev/full answers every write with ENOSPC, as a full file system does.
  const int descriptor = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (descriptor < 0) GTEST_SKIP() << "SKIPPED: no /dev/full on this system";
  const std::vector<std::uint8_t> bytes(4096, 7);
  const std::string message = io_error_of([&] { write_all(descriptor, bytes, "/dev/full"); });
  ::close(descriptor);
  EXPECT_NE(message.find("cannot write /dev/full"), std::string::npos) << message;
  EXPECT_NE(message.find("ENOSPC"), std::string::npos) << message;
  EXPECT_NE(message.find("free some space"), std::string::npos) << message;
}

TEST(FileIo, AFullDiskDuringAnAtomicWriteLeavesThePreviousFile) {
  ScratchDir scratch;
  const std::string path = scratch.file("state.json");
  write_file_atomically(path, bytes_of("old contents"));
  {
    testing::ScopedWriteFault full({.after_bytes = 5, .error = ENOSPC});
    const std::string message =
        io_error_of([&] { write_file_atomically(path, bytes_of("new contents, longer")); });
    EXPECT_NE(message.find("ENOSPC"), std::string::npos) << message;
    EXPECT_NE(message.find("state.json"), std::string::npos) << message;
  }
  const std::vector<std::uint8_t> kept = read_whole_file(path);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "old contents");
  EXPECT_TRUE(testing::hidden_entries(scratch.path()).empty()) << "a temporary file was left";
}

TEST(FileIo, AtomicWritesReplaceTheWholeFile) {
  ScratchDir scratch;
  const std::string path = scratch.file("f");
  write_file_atomically(path, bytes_of("a much longer first version"));
  write_file_atomically(path, bytes_of("short"));
  const std::vector<std::uint8_t> read = read_whole_file(path);
  EXPECT_EQ(std::string(read.begin(), read.end()), "short");
}

TEST(FileIo, ReplaceDirectorySwapsAWholeFolder) {
  ScratchDir scratch;
  const auto target = scratch.path() / "model";
  std::filesystem::create_directory(target);
  write_file_durably((target / "old").string(), bytes_of("1"));
  const auto staged = scratch.path() / ".tmp-model";
  std::filesystem::create_directory(staged);
  write_file_durably((staged / "new").string(), bytes_of("2"));
  io::detail::replace_directory(staged.string(), target.string());
  EXPECT_TRUE(std::filesystem::exists(target / "new"));
  EXPECT_FALSE(std::filesystem::exists(target / "old"));
  EXPECT_TRUE(testing::hidden_entries(scratch.path()).empty());
}

TEST(FileIo, ASecondLockOnAFolderIsRefusedNamingTheHolder) {
  ScratchDir scratch;
  io::detail::DirectoryLock first(scratch.path().string());
  const std::string message =
      io_error_of([&] { io::detail::DirectoryLock second(scratch.path().string()); });
  EXPECT_NE(message.find("in use by another Tandem process"), std::string::npos) << message;
  EXPECT_NE(message.find("pid " + std::to_string(::getpid())), std::string::npos) << message;
}

}  // namespace
}  // namespace tandem
