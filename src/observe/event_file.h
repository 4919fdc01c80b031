#pragma once
// An events.out.tfevents.* file: serialised Event records in TFRecord framing, buffered in memory
// and written by a background thread on a timer, when enough is pending, on flush() and at
// process exit.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>

namespace tandem::observe {

// One TFRecord: u64 length (little-endian), u32 masked CRC-32C of those 8 bytes, the data, u32
// masked CRC-32C of the data. Appended to `out`.
void append_tfrecord(std::string& out, std::string_view data);

// TensorFlow's event file name: events.out.tfevents.<10-digit seconds>.<host>.<pid>.<n><suffix>,
// n counting the files this process has opened.
std::string event_file_name(double wall_time, const std::string& suffix);

class EventFile {
 public:
  // Creates a new file in `directory` (which must exist). Throws IoError naming the file.
  EventFile(const std::string& directory, const std::string& suffix, double flush_seconds,
            std::size_t max_pending_bytes);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  // Frames one serialised Event and queues it. Throws IoError when an earlier write failed or
  // the file is closed.
  void append(std::string_view serialized_event);
  // Writes everything queued now; throws IoError when a write failed.
  void flush();
  // Flushes, stops the writer thread and closes the file; throws IoError when a write failed.
  void close();
  // Stops writing for good: drops what is queued, stops the writer thread and closes the file,
  // reporting nothing (for a caller that has reported the failure that made it give up).
  void abandon();
  const std::string& path() const { return path_; }

 private:
  void run_flusher();
  // Writes `pending_` to the file; called with `lock` held, releases it while writing.
  void write_pending(std::unique_lock<std::mutex>& lock);
  void throw_if_failed() const;
  // close() and abandon(): the writer thread stopped, the descriptor closed.
  void shut(bool keep_pending);

  std::string path_;
  int fd_ = -1;
  double flush_seconds_;
  std::size_t max_pending_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable written_;
  std::string pending_;
  bool writing_ = false;  // the flusher holds a batch outside the lock
  bool closing_ = false;
  bool closed_ = false;
  std::string error_;  // the first failed write, reported by the next call
  std::thread flusher_;
};

}  // namespace tandem::observe
