#include "data/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/files.h"

namespace tandem::data {

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

}  // namespace tandem::data
