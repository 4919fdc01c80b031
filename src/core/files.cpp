#include "core/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>

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

struct FaultState {
  std::mutex mutex;
  std::optional<WriteFault> fault;
  std::uint64_t written = 0;  // bytes written through the fault since it was set
};

FaultState& fault_state() {
  static FaultState state;
  return state;
}

std::atomic<bool> fault_armed{false};

// How many of `wanted` bytes to `path` the injected fault lets through, or nothing when none
// applies to it.
std::optional<std::size_t> bytes_allowed(const std::string& path, std::size_t wanted, int& error) {
  if (!fault_armed.load(std::memory_order_relaxed)) return std::nullopt;
  FaultState& state = fault_state();
  std::lock_guard lock(state.mutex);
  if (!state.fault || !path.starts_with(state.fault->path_prefix)) return std::nullopt;
  error = state.fault->error;
  const std::uint64_t left =
      state.written < state.fault->after_bytes ? state.fault->after_bytes - state.written : 0;
  const std::size_t allowed = static_cast<std::size_t>(std::min<std::uint64_t>(left, wanted));
  state.written += allowed;
  return allowed;
}

// close(2), checked: NFS and some file systems report write errors only here.
void close_checked(FileDescriptor& descriptor, const std::string& path) {
  if (::close(descriptor.release()) != 0) {
    throw IoError("cannot finish writing " + path + ": " + describe_errno(errno));
  }
}

}  // namespace

FileDescriptor::~FileDescriptor() {
  if (descriptor_ >= 0) ::close(descriptor_);
}

void require_regular_file(const std::string& path, std::string_view context) {
  regular_file_status(path, context);
}

bool is_gzip_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return false;
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return false;
  unsigned char magic[2] = {0, 0};
  return ::read(fd.get(), magic, 2) == 2 && magic[0] == 0x1F && magic[1] == 0x8B;
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

std::string describe_errno(int error) {
  std::string text = std::strerror(error);
  switch (error) {
    case ENOSPC:
      return text + " (ENOSPC): the disk is full; free some space or write elsewhere";
    case EDQUOT:
      return text + " (EDQUOT): the disk quota is used up; free some space or write elsewhere";
    case EACCES:
    case EPERM:
      return text + ": check the permissions of the file and its folder";
    case EROFS:
      return text + ": the file system is read-only; write elsewhere";
    case ENOENT:
      return text + ": check the path";
    default:
      return text;
  }
}

std::string parent_folder(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

void write_all(int descriptor, std::span<const std::uint8_t> bytes, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    std::size_t chunk = bytes.size() - done;
    int injected = 0;
    if (const std::optional<std::size_t> allowed = bytes_allowed(path, chunk, injected)) {
      if (*allowed == 0) {
        throw IoError("cannot write " + path + ": " + describe_errno(injected));
      }
      chunk = *allowed;
    }
    const ssize_t wrote = ::write(descriptor, bytes.data() + done, chunk);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) throw IoError("cannot write " + path + ": " + describe_errno(errno));
    done += static_cast<std::size_t>(wrote);
  }
}

void write_file_durably(const std::string& path, std::span<const std::uint8_t> bytes) {
  FileDescriptor file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (file.get() < 0) throw IoError("cannot create " + path + ": " + describe_errno(errno));
  try {
    write_all(file.get(), bytes, path);
    if (::fsync(file.get()) != 0) {
      throw IoError("cannot flush " + path + " to the disk: " + describe_errno(errno));
    }
    close_checked(file, path);
  } catch (const IoError&) {
    std::remove(path.c_str());
    throw;
  }
}

void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes) {
  require_replaceable(path, Destination::file);
  remove_stale_siblings(path, "tmp");
  const std::string temporary = hidden_sibling(path, "tmp");
  write_file_durably(temporary, bytes);
  try {
    rename_path(temporary, path, "the new file into place");
  } catch (const IoError&) {
    std::remove(temporary.c_str());
    throw;
  }
  sync_directory(parent_folder(path));
}

void write_file_atomically(const std::string& path, std::string_view text) {
  write_file_atomically(path,
                        std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

void sync_directory(const std::string& path) {
  FileDescriptor directory(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (directory.get() < 0) {
    throw IoError("cannot open the folder " + path + ": " + describe_errno(errno));
  }
  if (::fsync(directory.get()) != 0) {
    throw IoError("cannot flush the folder " + path + " to the disk: " + describe_errno(errno));
  }
  close_checked(directory, path);
}

void rename_path(const std::string& from, const std::string& to, const std::string& what) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw IoError("cannot move " + what + " (" + from + " to " + to +
                  "): " + describe_errno(errno));
  }
}

std::string hidden_sibling(const std::string& path, const std::string& kind) {
  static std::atomic<std::uint64_t> counter{0};
  const std::filesystem::path target(path);
  return (target.parent_path() / ("." + kind + "-" + target.filename().string() + "-" +
                                  std::to_string(::getpid()) + "-" + std::to_string(counter++)))
      .string();
}

void remove_stale_siblings(const std::string& path, const std::string& kind) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const std::string prefix = "." + kind + "-" + target.filename().string() + "-";
  std::error_code error;
  const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  for (fs::directory_iterator entry(folder, error), end; !error && entry != end;
       entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    // ".<kind>-<name>-<pid>-<n>": the writer's pid, and whether it still runs.
    const std::string rest = name.substr(prefix.size());
    const std::size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 || dash > 9 ||
        rest.find_first_not_of("0123456789") != dash) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    fs::remove_all(entry->path(), ignored);
  }
}

void require_replaceable(const std::string& path, Destination kind, std::string_view what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return;  // nothing there yet
  const std::string named = (what.empty() ? "" : std::string(what) + " ") + path;
  if (kind == Destination::file && !S_ISREG(info.st_mode)) {
    throw IoError(named + ": is " + kind_of(info.st_mode) +
                  ", not a file to replace; pass the path of a file to write");
  }
  if (kind == Destination::folder && !S_ISDIR(info.st_mode)) {
    throw IoError(named + ": is " +
                  (S_ISREG(info.st_mode) ? std::string("a file") : kind_of(info.st_mode)) +
                  ", not a folder; pass the path of a folder to write");
  }
}

void require_writable_destination(const std::string& path, std::string_view option,
                                  Destination kind) {
  const std::string what = std::string(option) + " " + path;
  require_replaceable(path, kind, option);
  struct stat info {};
  const std::string folder = parent_folder(path);
  if (::stat(folder.c_str(), &info) != 0) {
    throw IoError(what + ": the folder " + folder + " does not exist; create it or pass a path " +
                  "in an existing folder");
  }
  if (!S_ISDIR(info.st_mode)) {
    throw IoError(what + ": " + folder + " is not a folder; pass a path in a folder");
  }
  // A probe file, created and removed: access(2) alone misses read-only mounts and full disks
  // of the kind that refuse new files.
  const std::string probe = hidden_sibling(path, "probe");
  FileDescriptor file(::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (file.get() < 0) {
    throw IoError(what + ": cannot create a file in " + folder + ": " + describe_errno(errno));
  }
  ::close(file.release());
  std::remove(probe.c_str());
}

void set_write_fault(std::optional<WriteFault> fault) {
  FaultState& state = fault_state();
  std::lock_guard lock(state.mutex);
  state.fault = std::move(fault);
  state.written = 0;
  fault_armed.store(state.fault.has_value(), std::memory_order_relaxed);
}

}  // namespace tandem
