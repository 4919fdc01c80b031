#include "core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "tandem/error.h"

namespace tandem {
namespace {

std::string with_context(std::string_view context) {
  return context.empty() ? "" : " (" + std::string(context) + ")";
}

// What is at a path that is not a regular file, as the message names it.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory (a folder)";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void refuse(const std::string& path, mode_t mode, std::string_view context) {
  std::string message = path + ": is " + kind_of(mode) + ", not a regular file" +
                        with_context(context) + "; pass the path of a file";
  if (S_ISDIR(mode)) message += " in it";
  throw IoError(message);
}

// The error of a failed stat(2) or open(2) of `path`, from errno, as a person can act on it.
[[noreturn]] void throw_open_error(const std::string& path, std::string_view context) {
  if (errno == ENOENT || errno == ENOTDIR) {
    throw IoError(path + ": no such file" + with_context(context) + "; check the path");
  }
  throw IoError(path + ": cannot open (" + std::strerror(errno) +
                "); check the file's permissions");
}

// stat(2) of `path`, which must be a regular file.
struct stat regular_file_status(const std::string& path, std::string_view context) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw_open_error(path, context);
  if (!S_ISREG(info.st_mode)) refuse(path, info.st_mode, context);
  return info;
}

// Reads the file into the buffer `allocate(size)` returns.
void read_into(const std::string& path, const ReadFileOptions& options,
               const std::function<std::uint8_t*(std::size_t)>& allocate) {
  regular_file_status(path, options.context);
  // O_NONBLOCK: should the path have become a FIFO since the stat, open returns at once instead
  // of waiting for a writer, and the fstat below refuses it. Regular files ignore the flag.
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw_open_error(path, options.context);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    throw IoError(path + ": cannot read (" + std::string(std::strerror(errno)) + ")");
  }
  if (!S_ISREG(info.st_mode)) refuse(path, info.st_mode, options.context);
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size > options.max_bytes) {
    throw IoError(path + ": is " + std::to_string(size) + " bytes, more than the " +
                  std::to_string(options.max_bytes) +
                  " bytes expected of this file; check that the path names the right file");
  }
  std::uint8_t* out = allocate(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd.get(), out + done, static_cast<std::size_t>(size) - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw IoError(path + ": cannot read after " + std::to_string(done) + " bytes (" +
                    std::strerror(errno) + ")");
    }
    if (got == 0) {
      throw IoError(path + ": the file shrank to " + std::to_string(done) + " bytes while " +
                    std::to_string(size) + " were being read; is another program writing it?");
    }
    done += static_cast<std::size_t>(got);
  }
}

}  // namespace

FileDescriptor::~FileDescriptor() {
  if (descriptor_ >= 0) ::close(descriptor_);
}

void require_regular_file(const std::string& path, std::string_view context) {
  regular_file_status(path, context);
}

std::vector<std::uint8_t> read_whole_file(const std::string& path, ReadFileOptions options) {
  std::vector<std::uint8_t> bytes;
  read_into(path, options, [&](std::size_t size) {
    bytes.resize(size);
    return bytes.data();
  });
  return bytes;
}

Tensor read_whole_file_tensor(const std::string& path, ReadFileOptions options) {
  Tensor bytes;
  read_into(path, options, [&](std::size_t size) {
    bytes = Tensor::empty({static_cast<std::int64_t>(size)}, DType::u8);  // (n,)
    return bytes.data<std::uint8_t>();
  });
  return bytes;
}

}  // namespace tandem
