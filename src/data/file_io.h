#pragma once
// Files for the readers and writers: gzip-or-plain input (zlib tells them apart by content) and
// plain or gzip output; whole-file reads are core's (core/files.h). Every failure is an IoError
// that names the file.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "tandem/tensor.h"

namespace tandem::data {

// An open gzip-or-plain file that reads until it has what was asked for or the data ends.
class InputFile {
 public:
  // Throws IoError for a missing file, a directory or one that cannot be opened.
  explicit InputFile(std::string path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Reads up to `count` bytes into `destination`; fewer only when the data ends.
  std::size_t read(void* destination, std::size_t count);
  // Reads `count` bytes, growing the buffer only as data actually arrives, so a header that
  // claims a huge size cannot make us allocate more than the file holds.
  std::vector<std::uint8_t> read_up_to(std::uint64_t count);
  // Reads whatever is left and returns how many bytes that was.
  std::uint64_t count_remaining();
  // Bytes read so far (of the decompressed stream).
  std::uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }
  // Whether the file is gzip-compressed (known once something was read).
  bool compressed() const { return gzdirect(file_) == 0; }

 private:
  std::string path_;
  gzFile file_ = nullptr;
  std::uint64_t offset_ = 0;
};

// A file being written, plain or gzip-compressed; close() reports a failed write (a full disk).
class OutputFile {
 public:
  OutputFile(std::string path, bool gzip);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::span<const std::uint8_t> bytes);
  void close();
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what);

  std::string path_;
  std::FILE* plain_ = nullptr;
  gzFile gzip_ = nullptr;
};

}  // namespace tandem::data
