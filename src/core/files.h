#pragma once
// Whole-file reads and durable writes for every layer (data sets, image files, checkpoints, saved
// models, logs, the CLI's inputs and outputs). The path must name a regular file: anything else (a
// folder, a FIFO, a device, a socket) is refused before it is opened, since opening a FIFO for
// reading blocks until a writer comes and a device such as /dev/zero never ends. Reads are bounded,
// so a wrong path cannot make the process allocate without limit. Writes are checked at every step
// (write, fsync, close) and can be made atomic (a temporary file renamed into place), so a full
// disk or a crash never leaves a half-written file under the real name; a fault-injection seam lets
// tests make writes fail as a full disk does. Every failure is an IoError that names the path, what
// is there or what the system said, and what to do.
#include <cstdint>
#include <optional>
#include <span>
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
  std::string_view context = {};
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

// Whether `path` is a regular file that starts with gzip's magic bytes (1F 8B). Anything else,
// a FIFO or a missing file included, is false, and nothing but a regular file is opened.
bool is_gzip_file(const std::string& path);

// The whole of the regular file at `path`, at most options.max_bytes of it (a larger file is an
// IoError saying both sizes). A file that shrinks while it is read is an IoError too.
std::vector<std::uint8_t> read_whole_file(const std::string& path, ReadFileOptions options = {});
// The same bytes as a rank-1 u8 tensor (n,), read straight into its storage.
Tensor read_whole_file_tensor(const std::string& path, ReadFileOptions options = {});

// "No space left on device (ENOSPC)"-style text for errno `error`, with a hint for the common
// cases (full disk, no permission, read-only file system).
std::string describe_errno(int error);
// The folder `path` is in: "." for a bare file name.
std::string parent_folder(const std::string& path);

// Writes all of `bytes` to an open descriptor, retrying short writes and EINTR; `path` names it
// in the error (ENOSPC: the disk is full).
void write_all(int descriptor, std::span<const std::uint8_t> bytes, const std::string& path);
// Writes `bytes` to a new or truncated file and fsyncs it. On failure the partial file is
// removed and IoError says why.
void write_file_durably(const std::string& path, std::span<const std::uint8_t> bytes);
// Replaces `path` so that a crash or a full disk at any moment leaves either the old file (or
// none) or the complete new one: writes a temporary file beside it, fsyncs it, renames it over
// `path` and fsyncs the folder. What is at `path` already must be a regular file
// (require_replaceable): a device node, a FIFO or a folder is refused before anything is written,
// never renamed over.
void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes);
void write_file_atomically(const std::string& path, std::string_view text);
// fsync of a folder, so the names created or renamed in it survive a power cut.
void sync_directory(const std::string& path);
// rename(2), checked; `what` says what was being moved for the error.
void rename_path(const std::string& from, const std::string& to, const std::string& what);
// A hidden name beside `path` for a temporary or doomed copy of it: ".<kind>-<name>-<pid>-<n>".
std::string hidden_sibling(const std::string& path, const std::string& kind);
// Removes the hidden siblings of `kind` (files or folders) that a process no longer running left
// beside `path`: the temporary copies of a save or an export killed mid-way. The next write there
// calls it; copies of a process still running are left alone.
void remove_stale_siblings(const std::string& path, const std::string& kind);
// What a destination is to become: a file (a report) or a folder (a saved model).
enum class Destination { file, folder };
// Throws IoError unless what is at `path` (if anything; symbolic links followed) is of `kind`: the
// one check every writer that replaces a destination makes first, so that a device node such as
// /dev/null or /dev/full, a FIFO, or a file where a folder belongs is never replaced.
// "<what> <path>: is a character device, not a file to replace; pass the path of a file".
void require_replaceable(const std::string& path, Destination kind, std::string_view what = {});
// Throws IoError naming `option`, `path` and the reason unless `path` can be written as `kind`:
// what is there already is of that kind (a FIFO or a folder is no file), and its folder exists
// and accepts a new file. Checked before a long run, so that a result is never lost to a
// destination found bad only at the end; nothing is left behind.
void require_writable_destination(const std::string& path, std::string_view option,
                                  Destination kind);

// Test seam: after `after_bytes` more bytes have been written through write_all to paths that
// start with `path_prefix` (every path when empty), those writes fail with `error` (e.g. ENOSPC)
// until the fault is cleared, as a full disk mounted there would. Process-wide.
struct WriteFault {
  std::uint64_t after_bytes = 0;
  int error = 0;
  std::string path_prefix;
};
void set_write_fault(std::optional<WriteFault> fault);

}  // namespace tandem
