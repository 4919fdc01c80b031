#pragma once
// User-facing errors: bad shapes, bad files, bad arguments, missing devices. The message says
// what went wrong, with which op/file/argument and shapes, and what to do about it.
#include <stdexcept>
#include <string>

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

}  // namespace tandem

// Internal invariants: a failure is a bug in Tandem, not a user error.
#define TANDEM_ASSERT(condition, message)                                                   \
  do {                                                                                      \
    if (!(condition))                                                                       \
      throw ::tandem::Error(std::string("internal error: ") + (message) + " (" #condition \
                            ") at " __FILE__ ":" + std::to_string(__LINE__));               \
  } while (0)
