#pragma once
// Whole-file reads for every layer (data sets, image files, checkpoints, saved models, the CLI's
// inputs). The path must name a regular file: anything else (a folder, a FIFO, a device, a
// socket) is refused before it is opened, since opening a FIFO for reading blocks until a writer
// comes and a device such as /dev/zero never ends. Reads are bounded, so a wrong path cannot make
// the process allocate without limit. Every failure is an IoError that names the path, what is
// there and what was expected.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/tensor.h"

namespace tandem {

// The default bound of read_whole_file: data files (image files, IDX and CIFAR-10 archives,
// weights) are well below it. Callers reading small files (JSON, configs) pass their own.
inline constexpr std::uint64_t kDefaultMaxFileBytes = std::uint64_t{4} << 30;  // 4 GiB

struct ReadFileOptions {
  std::uint64_t max_bytes = kDefaultMaxFileBytes;
  // Said in the message for a missing file, e.g. "it was listed when the pipeline was built".
  std::string_view context;
};

// An open file descriptor, closed when the object goes unless released first.
class FileDescriptor {
 public:
  explicit FileDescriptor(int descriptor) : descriptor_(descriptor) {}
  ~FileDescriptor();
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return descriptor_; }
  // Hands the descriptor over (to a checked close, say); -1 from then on.
  int release() {
    const int descriptor = descriptor_;
    descriptor_ = -1;
    return descriptor;
  }

 private:
  int descriptor_;
};

// Throws IoError naming `path` unless it is an existing regular file (symbolic links followed):
// "<path>: is a FIFO (named pipe), not a regular file; pass the path of a file".
void require_regular_file(const std::string& path, std::string_view context = {});

// The whole of the regular file at `path`, at most options.max_bytes of it (a larger file is an
// IoError saying both sizes). A file that shrinks while it is read is an IoError too.
std::vector<std::uint8_t> read_whole_file(const std::string& path, ReadFileOptions options = {});
// The same bytes as a rank-1 u8 tensor (n,), read straight into its storage.
Tensor read_whole_file_tensor(const std::string& path, ReadFileOptions options = {});

}  // namespace tandem
