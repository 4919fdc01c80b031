#include "observe/event_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>

#include "core/crc32c.h"
#include "core/files.h"
#include "tandem/error.h"

namespace tandem::observe {
namespace {

void put_u32(char* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<char>((value >> (8 * i)) & 0xFFu);
}

std::span<const std::uint8_t> bytes_of(const char* data, std::size_t size) {
  return {reinterpret_cast<const std::uint8_t*>(data), size};
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Open event files, flushed by an exit handler so that a program that calls std::exit (which
// skips the destructors of local objects) still keeps its last events.
struct OpenFiles {
  std::mutex mutex;
  std::set<EventFile*> files;
};

OpenFiles& open_files() {
  static OpenFiles registry;
  return registry;
}

void flush_open_files_at_exit() {
  OpenFiles& registry = open_files();
  std::lock_guard lock(registry.mutex);
  for (EventFile* file : registry.files) {
    try {
      file->flush();
    } catch (const Error& error) {
      std::cerr << "tandem: warning: " << error.what() << "\n";
    }
  }
}

void register_open_file(EventFile* file) {
  OpenFiles& registry = open_files();
  static const bool handler_installed = [] {
    std::atexit(flush_open_files_at_exit);
    return true;
  }();
  (void)handler_installed;
  std::lock_guard lock(registry.mutex);
  registry.files.insert(file);
}

void unregister_open_file(EventFile* file) {
  OpenFiles& registry = open_files();
  std::lock_guard lock(registry.mutex);
  registry.files.erase(file);
}

}  // namespace

void append_tfrecord(std::string& out, std::string_view data) {
  char header[12];
  const std::uint64_t length = data.size();
  for (int i = 0; i < 8; ++i)
    header[i] = static_cast<char>((length >> (8 * i)) & 0xFFu);
  put_u32(header + 8, mask_crc(crc32c(bytes_of(header, 8))));
  char footer[4];
  put_u32(footer, mask_crc(crc32c(bytes_of(data.data(), data.size()))));
  out.append(header, sizeof header);
  out.append(data);
  out.append(footer, sizeof footer);
}

std::string event_file_name(double wall_time, const std::string& suffix) {
  static std::atomic<int> files_opened{0};
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(std::floor(wall_time)));
  return std::string("events.out.tfevents.") + seconds + "." + host_name() + "." +
         std::to_string(getpid()) + "." + std::to_string(files_opened++) + suffix;
}

EventFile::EventFile(const std::string& directory, const std::string& suffix, double flush_seconds,
                     std::size_t max_pending_bytes)
    : flush_seconds_(flush_seconds), max_pending_bytes_(max_pending_bytes) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  path_ = directory + "/" + event_file_name(now, suffix);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw IoError("cannot create the event file " + path_ + ": " + describe_errno(errno));
  }
  flusher_ = std::thread([this] { run_flusher(); });
  register_open_file(this);
}

EventFile::~EventFile() {
  try {
    close();
  } catch (const Error& error) {
    std::cerr << "tandem: warning: " << error.what() << "\n";
  }
}

void EventFile::append(std::string_view serialized_event) {
  std::string framed;
  framed.reserve(serialized_event.size() + 16);
  append_tfrecord(framed, serialized_event);
  std::lock_guard lock(mutex_);
  // A call after close() is a mistake of the caller, not of the disk.
  if (closing_ || closed_) throw Error("the event file " + path_ + " is closed");
  throw_if_failed();
  pending_ += framed;
  if (pending_.size() >= max_pending_bytes_) wake_.notify_one();
}

void EventFile::flush() {
  std::unique_lock lock(mutex_);
  written_.wait(lock, [&] { return !writing_; });
  if (!closed_) write_pending(lock);
  throw_if_failed();
}

void EventFile::close() {
  shut(/*keep_pending=*/true);
  std::lock_guard lock(mutex_);
  throw_if_failed();
}

void EventFile::abandon() {
  shut(/*keep_pending=*/false);
  std::lock_guard lock(mutex_);
  error_.clear();
}

void EventFile::shut(bool keep_pending) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    if (!keep_pending) pending_.clear();
    closing_ = true;
  }
  wake_.notify_one();
  if (flusher_.joinable()) flusher_.join();
  unregister_open_file(this);
  std::lock_guard lock(mutex_);
  if (::close(fd_) != 0 && error_.empty()) {
    error_ = "cannot close the event file " + path_ + ": " + describe_errno(errno);
  }
  fd_ = -1;
  closed_ = true;
}

void EventFile::run_flusher() {
  const auto interval = std::chrono::duration<double>(flush_seconds_);
  std::unique_lock lock(mutex_);
  while (!closing_) {
    wake_.wait_for(lock, interval,
                   [&] { return closing_ || pending_.size() >= max_pending_bytes_; });
    written_.wait(lock, [&] { return !writing_; });
    write_pending(lock);
  }
  // Closing: what was queued last.
  written_.wait(lock, [&] { return !writing_; });
  write_pending(lock);
}

void EventFile::write_pending(std::unique_lock<std::mutex>& lock) {
  if (pending_.empty() || !error_.empty()) return;
  std::string batch;
  batch.swap(pending_);
  writing_ = true;
  lock.unlock();
  // A crash after this write keeps the events: they are in the kernel's page cache.
  std::string failure;
  try {
    write_all(fd_, bytes_of(batch.data(), batch.size()), path_);
  } catch (const IoError& error) {
    failure = error.what();
  }
  lock.lock();
  writing_ = false;
  if (!failure.empty() && error_.empty()) error_ = failure;
  written_.notify_all();
}

void EventFile::throw_if_failed() const {
  if (!error_.empty()) throw IoError(error_);
}

}  // namespace tandem::observe
