#pragma once
// Another process holding a POSIX write lock (fcntl F_SETLK on the whole file) for as long as the
// object lives, as libtpu holds /tmp/libtpu_lockfile while a process has the TPU open. A child
// process, because a process never sees its own fcntl locks as held by someone else.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace tandem::testing {

class FileLockHolder {
 public:
  explicit FileLockHolder(const std::string& path) {
    int locked[2];   // the child says it holds the lock (or failed to take it)
    int release[2];  // closed by the parent to let the child go
    if (::pipe(locked) != 0 || ::pipe(release) != 0) {
      ADD_FAILURE() << "pipe() failed";
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(locked[0]);
      ::close(release[1]);
      const int file = ::open(path.c_str(), O_RDWR | O_CREAT, 0666);
      struct flock lock {};
      lock.l_type = F_WRLCK;
      lock.l_whence = SEEK_SET;
      const char taken = file >= 0 && ::fcntl(file, F_SETLK, &lock) == 0 ? 'y' : 'n';
      (void)!::write(locked[1], &taken, 1);
      char ignored = 0;
      (void)!::read(release[0], &ignored, 1);  // returns when the parent closes its end
      ::_exit(0);
    }
    ::close(locked[1]);
    ::close(release[0]);
    release_ = release[1];
    char taken = 'n';
    if (pid_ < 0 || ::read(locked[0], &taken, 1) != 1 || taken != 'y') {
      ADD_FAILURE() << "the helper process could not lock " << path;
    }
    ::close(locked[0]);
  }
  ~FileLockHolder() {
    if (release_ >= 0) ::close(release_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  FileLockHolder(const FileLockHolder&) = delete;
  FileLockHolder& operator=(const FileLockHolder&) = delete;

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
};

}  // namespace tandem::testing
