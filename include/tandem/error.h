#pragma once
// User-facing errors: bad shapes, bad files, bad arguments, missing devices. The message says
// what went wrong, with which op/file/argument and shapes, and what to do about it.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace tandem {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Thrown when a file or argument given by the user cannot be used; the CLI prints it on one line.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

class IoError : public Error {
 public:
  using Error::Error;
};

// A device (or the host) could not give the memory asked for, or Tandem's memory limit for it
// (set_memory_limit) would be passed. Carries the figures so callers can add context: fit adds
// the batch size and the fixes to try.
class OutOfMemory : public Error {
 public:
  OutOfMemory(const std::string& message, std::string device, std::size_t requested,
              std::size_t held, std::size_t available)
      : Error(message),
        device_(std::move(device)),
        requested_(requested),
        held_(held),
        available_(available) {}
  const std::string& device() const { return device_; }
  std::size_t requested_bytes() const { return requested_; }  // the allocation that failed
  std::size_t held_bytes() const { return held_; }            // what Tandem held on the device
  std::size_t available_bytes() const { return available_; }  // the limit or the device's size

 private:
  std::string device_;
  std::size_t requested_;
  std::size_t held_;
  std::size_t available_;
};

}  // namespace tandem

// Internal invariants: a failure is a bug in Tandem, not a user error.
#define TANDEM_ASSERT(condition, message)                                                     \
  do {                                                                                        \
    if (!(condition))                                                                         \
      throw ::tandem::Error(std::string("internal error: ") + (message) +                     \
                            " (" #condition ") at " __FILE__ ":" + std::to_string(__LINE__)); \
  } while (0)
