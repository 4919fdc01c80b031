#pragma once
// The message of the error of type `E` (InvalidArgument unless said) that `fn` throws, for tests
// that check what a user is told.
#include <string>

#include "tandem/error.h"

namespace tandem::testing {

template <typename E = InvalidArgument, typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& error) {
    return error.what();
  }
  return "(no such error thrown)";
}

}  // namespace tandem::testing
