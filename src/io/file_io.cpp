#include "io/file_io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/files.h"
#include "tandem/error.h"

namespace tandem::io::detail {
namespace {

struct FaultState {
  std::mutex mutex;
  std::optional<WriteFault> fault;
  std::uint64_t written = 0;  // bytes written since the fault was set
};

FaultState& fault_state() {
  static FaultState state;
  return state;
}

std::atomic<bool> fault_armed{false};

// How many of `wanted` bytes the injected fault lets through, or nothing when none is set.
std::optional<std::size_t> bytes_allowed(std::size_t wanted, int& error) {
  if (!fault_armed.load(std::memory_order_relaxed)) return std::nullopt;
  FaultState& state = fault_state();
  std::lock_guard lock(state.mutex);
  if (!state.fault) return std::nullopt;
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

std::string parent_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

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

void write_all(int descriptor, std::span<const std::uint8_t> bytes, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    std::size_t chunk = bytes.size() - done;
    int injected = 0;
    if (const std::optional<std::size_t> allowed = bytes_allowed(chunk, injected)) {
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
  const std::string temporary = hidden_sibling(path, "tmp");
  write_file_durably(temporary, bytes);
  try {
    rename_path(temporary, path, "the new file into place");
  } catch (const IoError&) {
    std::remove(temporary.c_str());
    throw;
  }
  sync_directory(parent_of(path));
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

void replace_directory(const std::string& staged, const std::string& target) {
  std::error_code error;
  if (!std::filesystem::exists(target, error)) {
    rename_path(staged, target, "the finished folder into place");
  } else if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) ==
             0) {
    remove_directory(staged);  // the old contents, swapped out
  } else if (errno == EINVAL || errno == ENOSYS) {
    const std::string doomed = hidden_sibling(target, "trash");
    rename_path(target, doomed, "the previous folder aside");
    rename_path(staged, target, "the finished folder into place");
    remove_directory(doomed);
  } else {
    throw IoError("cannot move " + staged + " over " + target + ": " + describe_errno(errno));
  }
  sync_directory(parent_of(target));
}

void remove_directory(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  // Already hidden (a staging or trash folder): remove it where it is.
  const std::string doomed = name.starts_with(".") ? path : hidden_sibling(path, "trash");
  if (doomed != path) rename_path(path, doomed, "a folder aside for removal");
  std::error_code error;
  std::filesystem::remove_all(doomed, error);
  if (error) {
    throw IoError("cannot remove " + doomed + ": " + error.message() +
                  "; remove it by hand (nothing reads hidden folders)");
  }
}

DirectoryLock::DirectoryLock(const std::string& directory) {
  const std::string path = (std::filesystem::path(directory) / ".lock").string();
  descriptor_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (descriptor_ < 0) {
    throw IoError("cannot lock the folder " + directory + " (" + path +
                  "): " + describe_errno(errno));
  }
  if (::flock(descriptor_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[32] = {};
    const ssize_t got = ::pread(descriptor_, holder, sizeof holder - 1, 0);
    ::close(descriptor_);
    descriptor_ = -1;
    if (error == EWOULDBLOCK) {
      throw IoError("the folder " + directory + " is in use by another Tandem process" +
                    (got > 0 ? " (pid " + std::string(holder, static_cast<std::size_t>(got)) + ")"
                             : std::string()) +
                    "; wait for it to finish or use another folder");
    }
    throw IoError("cannot lock the folder " + directory + ": " + describe_errno(error));
  }
  // The holder's pid, for the message another process gets; failing to write it is harmless.
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(descriptor_, 0) == 0) {
    [[maybe_unused]] const ssize_t wrote = ::pwrite(descriptor_, pid.data(), pid.size(), 0);
  }
}

DirectoryLock::~DirectoryLock() {
  if (descriptor_ >= 0) ::close(descriptor_);  // closing releases the flock
}

void set_write_fault(std::optional<WriteFault> fault) {
  FaultState& state = fault_state();
  std::lock_guard lock(state.mutex);
  state.fault = fault;
  state.written = 0;
  fault_armed.store(fault.has_value(), std::memory_order_relaxed);
}

}  // namespace tandem::io::detail
