#include "io/file_io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "core/files.h"
#include "tandem/error.h"

namespace tandem::io::detail {

void replace_directory(const std::string& staged, const std::string& target) {
  require_replaceable(target, Destination::folder);
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
  sync_directory(parent_folder(target));
}

void write_directory(const std::string& target, const std::vector<FolderFile>& files) {
  namespace fs = std::filesystem;
  require_replaceable(target, Destination::folder);
  const fs::path absolute = fs::absolute(target);
  std::error_code error;
  fs::create_directories(absolute.parent_path(), error);
  remove_stale_siblings(absolute.string(), "tmp");
  const std::string staged = hidden_sibling(absolute.string(), "tmp");
  if (!fs::create_directory(staged, error)) {
    throw IoError("cannot create the folder " + staged + ": " + error.message());
  }
  try {
    for (const FolderFile& file : files) {
      const fs::path path = fs::path(staged) / file.name;
      if (file.name.ends_with('/')) {
        if (!fs::create_directories(path, error)) {
          throw IoError("cannot create the folder " + path.string() + ": " + error.message());
        }
      } else {
        write_file_durably(path.string(), file.bytes);
      }
    }
    sync_directory(staged);
    replace_directory(staged, absolute.string());
  } catch (const IoError&) {
    fs::remove_all(staged, error);
    throw;
  }
}

void require_replaceable(const std::string& directory, const std::vector<std::string>& names,
                         const std::string& what, const std::string& kind) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::exists(directory, error)) return;
  if (!fs::is_directory(directory, error)) {
    throw IoError(what + ": " + directory + " is a file; give a folder to write into");
  }
  bool empty = true;
  bool foreign = false;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    empty = false;
    const std::string name = entry.path().filename().string();
    foreign |= std::find(names.begin(), names.end(), name) == names.end();
  }
  if (!empty && (foreign || !fs::exists(fs::path(directory) / names.front(), error))) {
    throw IoError(what + ": " + directory + " holds files that are not a " + kind +
                  "; write into a new or empty folder (an existing " + kind + " is replaced)");
  }
}

std::span<const std::uint8_t> as_bytes(const std::string& text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
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

DirectoryLock::DirectoryLock(const std::string& directory, const std::string& name) {
  const std::string path = (std::filesystem::path(directory) / name).string();
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

}  // namespace tandem::io::detail
