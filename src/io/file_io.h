#pragma once
// Durable files for checkpoints and saved models: read bounds, writes that reach the disk
// (write, fsync, close, each checked), atomic replacement (temporary file, fsync, rename, fsync
// of the folder), folder locks, and a fault-injection seam so tests can make a write fail the
// way a full disk does without needing one. Every failure is an IoError naming the file, what
// the system said and what to do.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tandem::io::detail {

using Bytes = std::vector<std::uint8_t>;

// Bounds for whole-file reads (read_whole_file of core/files.h): JSON (architectures, checkpoint
// states) is small, weights may be large.
inline constexpr std::uint64_t kMaxJsonFileBytes = std::uint64_t{256} << 20;    // 256 MiB
inline constexpr std::uint64_t kMaxWeightsFileBytes = std::uint64_t{64} << 30;  // 64 GiB

// Writes `bytes` to a new or truncated file and fsyncs it. On failure the partial file is
// removed and IoError says why (ENOSPC: the disk is full).
void write_file_durably(const std::string& path, std::span<const std::uint8_t> bytes);
// Writes all of `bytes` to an open descriptor, retrying short writes and EINTR; `path` names it
// in the error. Used by write_file_durably and, in tests, on /dev/full.
void write_all(int descriptor, std::span<const std::uint8_t> bytes, const std::string& path);

// Replaces `path` so that a crash at any moment leaves either the old file or the complete new
// one: writes a temporary file beside it, fsyncs it, renames it over `path` and fsyncs the
// folder.
void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes);

// fsync of a folder, so the names created or renamed in it survive a power cut.
void sync_directory(const std::string& path);
// rename(2), checked; `what` says what was being moved for the error.
void rename_path(const std::string& from, const std::string& to, const std::string& what);

// Moves the finished folder `staged` to `target` in one step: a rename when `target` does not
// exist, else an atomic exchange of the two (renameat2 RENAME_EXCHANGE) after which the old
// folder, now at `staged`, is removed. Where the file system cannot exchange, the old folder is
// renamed aside first. Either way no reader ever sees a half-written `target`. Fsyncs the parent.
void replace_directory(const std::string& staged, const std::string& target);
// Removes a folder tree, renaming it to a hidden name beside it first so that an interrupted
// removal never leaves a half-deleted folder under its real name.
void remove_directory(const std::string& path);
// A hidden name beside `path` for a temporary or doomed copy of it: ".<kind>-<name>-<pid>-<n>".
std::string hidden_sibling(const std::string& path, const std::string& kind);

// An exclusive lock on `directory` (flock on directory/.lock) held while the object lives, so two
// processes never write one checkpoint folder; the kernel drops it when the process dies, even
// by SIGKILL. Throws IoError naming the folder (and the holder's pid) when another process has it.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& directory);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int descriptor_ = -1;
};

// Test seam: after `after_bytes` more bytes have been written through write_all, writes fail
// with `error` (e.g. ENOSPC) until the fault is cleared. Process-wide.
struct WriteFault {
  std::uint64_t after_bytes = 0;
  int error = 0;
};
void set_write_fault(std::optional<WriteFault> fault);

// "No space left on device (ENOSPC)"-style text for errno `error`, with a hint for the common
// cases (full disk, no permission, read-only file system).
std::string describe_errno(int error);

}  // namespace tandem::io::detail
