#pragma once
// User-facing errors: bad shapes, bad files, bad arguments, missing devices. The message says
// what went wrong, with which op/file/argument and shapes, and what to do about it.
#include <cstddef>
#include <functional>
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

// A setting the caller chose cannot be used: a field of a run's configuration, a command-line
// option, a data spec, a key of a run file. The message names the setting as the caller spells
// it (SettingName) and says what to pass instead. The CLI exits with status 2 for it, as for its
// own parse errors.
class ConfigError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// How the caller spells one of its settings in a message, given the setting's key (a run file's
// key: "batch-size", "data", "image-size"): the CLI shows "--batch-size", the C++ library the
// field of its configuration struct ("batch_size"). Layers below the run layer take one where
// their messages name a setting, so the same check speaks each caller's language.
using SettingName = std::function<std::string(const std::string& key)>;

// The default SettingName: the key as an identifier ("batch-size" -> "batch_size").
std::string setting_identifier(const std::string& key);

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
