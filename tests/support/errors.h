#pragma once
// The message of the InvalidArgument that `fn` throws, for tests that check what a user is told.
#include <string>

#include "tandem/error.h"

namespace tandem::testing {

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& error) {
    return error.what();
  }
  return "(no InvalidArgument thrown)";
}

}  // namespace tandem::testing
