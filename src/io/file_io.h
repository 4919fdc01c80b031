#pragma once
// Durable folders for checkpoints and saved models: read bounds, atomic replacement of a whole
// folder, folder locks. The file-level pieces (durable and atomic writes, the fault-injection
// seam) are core's (core/files.h), shared with the logs and the CLI's outputs. Every failure is
// an IoError naming the folder, what the system said and what to do.
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

// Moves the finished folder `staged` to `target` in one step: a rename when `target` does not
// exist, else an atomic exchange of the two (renameat2 RENAME_EXCHANGE) after which the old
// folder, now at `staged`, is removed. Where the file system cannot exchange, the old folder is
// renamed aside first. Either way no reader ever sees a half-written `target`. Fsyncs the parent.
void replace_directory(const std::string& staged, const std::string& target);
// A folder's file for write_directory: its name inside the folder ("variables/" with the trailing
// slash: an empty subfolder) and its bytes.
struct FolderFile {
  std::string name;
  std::span<const std::uint8_t> bytes;
};
// Writes a whole folder atomically: the files go durably into a hidden sibling of `target`
// (parents created), which replace_directory then moves into place. On failure the staged folder
// is removed and the IoError passed on; `target` is as it was.
void write_directory(const std::string& target, const std::vector<FolderFile>& files);
// Throws IoError unless `directory` is absent, empty, or a folder of the kind that may be
// replaced: one holding `names.front()` and nothing outside `names`. `what` names the caller
// ("Model::save") and `kind` the folder ("saved Tandem model") in the message.
void require_replaceable(const std::string& directory, const std::vector<std::string>& names,
                         const std::string& what, const std::string& kind);
// The bytes of a string, for the writers.
std::span<const std::uint8_t> as_bytes(const std::string& text);
// Removes a folder tree, renaming it to a hidden name beside it first so that an interrupted
// removal never leaves a half-deleted folder under its real name.
void remove_directory(const std::string& path);
// An exclusive lock on `directory` (flock on directory/<name>, ".lock" for checkpoint and sweep
// folders, ".logdir.lock" for a run's logs, so that a folder may be both) held while the object
// lives, so two processes never write one folder; the kernel drops it when the process dies, even
// by SIGKILL. Throws IoError naming the folder (and the holder's pid) when another process has it.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& directory, const std::string& name = ".lock");
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int descriptor_ = -1;
};

}  // namespace tandem::io::detail
