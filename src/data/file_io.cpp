#include "data/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tandem::data {
namespace {

std::string with_context(const std::string& context) {
  return context.empty() ? "" : " (" + context + ")";
}

// A file descriptor closed at scope exit.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

void require_regular_file(const std::string& path, const std::string& context) {
  std::error_code status_error;
  const auto status = std::filesystem::status(path, status_error);
  if (!std::filesystem::exists(status)) {
    throw IoError(path + ": no such file" + with_context(context) + "; check the path");
  }
  if (std::filesystem::is_directory(status)) {
    throw IoError(path + ": is a directory, not a data file; pass the path of the file itself");
  }
}

InputFile::InputFile(std::string path) : path_(std::move(path)) {
  require_regular_file(path_);
  file_ = gzopen(path_.c_str(), "rb");
  if (file_ == nullptr) {
    throw IoError(path_ + ": cannot open (" + std::strerror(errno) +
                  "); check the file's permissions");
  }
  gzbuffer(file_, 1 << 20);
}

InputFile::~InputFile() {
  gzclose(file_);
}

std::size_t InputFile::read(void* destination, std::size_t count) {
  constexpr std::size_t kChunk = std::size_t{1} << 30;  // gzread takes an unsigned int
  auto* bytes = static_cast<unsigned char*>(destination);
  std::size_t total = 0;
  while (total < count) {
    const auto request = static_cast<unsigned>(std::min(count - total, kChunk));
    const int got = gzread(file_, bytes + total, request);
    if (got < 0) {
      int code = Z_OK;
      std::string message = gzerror(file_, &code);
      // zlib prefixes the message with the path, which ours already starts with.
      if (message.starts_with(path_ + ": ")) message.erase(0, path_.size() + 2);
      throw IoError(path_ + ": cannot decompress after " + std::to_string(offset_ + total) +
                    " bytes (zlib: " + message +
                    "); the file is corrupt or cut short: write or download it again");
    }
    if (got == 0) break;
    total += static_cast<std::size_t>(got);
  }
  offset_ += total;
  return total;
}

std::vector<std::uint8_t> InputFile::read_up_to(std::uint64_t count) {
  constexpr std::uint64_t kStep = std::uint64_t{16} << 20;
  std::vector<std::uint8_t> bytes;
  bytes.reserve(static_cast<std::size_t>(std::min(count, kStep)));
  while (bytes.size() < count) {
    const std::size_t before = bytes.size();
    const auto step = static_cast<std::size_t>(std::min(count - before, kStep));
    bytes.resize(before + step);
    const std::size_t got = read(bytes.data() + before, step);
    bytes.resize(before + got);
    if (got < step) break;
  }
  return bytes;
}

std::uint64_t InputFile::count_remaining() {
  std::vector<unsigned char> scratch(1 << 20);
  std::uint64_t remaining = 0;
  while (const std::size_t got = read(scratch.data(), scratch.size()))
    remaining += got;
  return remaining;
}

OutputFile::OutputFile(std::string path, bool gzip) : path_(std::move(path)) {
  if (gzip) {
    gzip_ = gzopen(path_.c_str(), "wb");
    if (gzip_ != nullptr) gzbuffer(gzip_, 1 << 20);
  } else {
    plain_ = std::fopen(path_.c_str(), "wb");
  }
  if (gzip_ == nullptr && plain_ == nullptr) {
    throw IoError(path_ + ": cannot create (" + std::strerror(errno) +
                  "); check that the directory exists and is writable");
  }
}

OutputFile::~OutputFile() {
  if (plain_ != nullptr) std::fclose(plain_);
  if (gzip_ != nullptr) gzclose(gzip_);
}

void OutputFile::fail(const std::string& what) {
  throw IoError(path_ + ": " + what + " (" + std::strerror(errno) +
                "); check that the disk has space and the file is writable");
}

void OutputFile::write(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return;
  if (plain_ != nullptr) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), plain_) != bytes.size()) fail("cannot write");
    return;
  }
  TANDEM_ASSERT(gzip_ != nullptr, "write after close");
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  for (std::size_t done = 0; done < bytes.size();) {
    const auto count = static_cast<unsigned>(std::min(bytes.size() - done, kChunk));
    if (gzwrite(gzip_, bytes.data() + done, count) != static_cast<int>(count)) {
      fail("cannot write");
    }
    done += count;
  }
}

void OutputFile::close() {
  if (plain_ != nullptr) {
    const bool failed = std::fflush(plain_) != 0 || std::ferror(plain_) != 0;
    const bool close_failed = std::fclose(plain_) != 0;
    plain_ = nullptr;
    if (failed || close_failed) fail("cannot finish writing");
  }
  if (gzip_ != nullptr) {
    const int status = gzclose(gzip_);
    gzip_ = nullptr;
    if (status != Z_OK) fail("cannot finish writing");
  }
}

Tensor read_whole_file(const std::string& path, const std::string& context) {
  const Descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      throw IoError(path + ": no such file" + with_context(context) + "; check the path");
    }
    throw IoError(path + ": cannot open (" + std::strerror(errno) +
                  "); check the file's permissions");
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw IoError(path + ": not a regular file; pass the path of a data file");
  }
  Tensor bytes = Tensor::empty({static_cast<std::int64_t>(info.st_size)}, DType::u8);  // (n,)
  auto* out = bytes.data<std::uint8_t>();
  std::size_t done = 0;
  const auto size = static_cast<std::size_t>(info.st_size);
  while (done < size) {
    const ssize_t got = ::read(fd.get(), out + done, size - done);
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
  return bytes;
}

}  // namespace tandem::data
