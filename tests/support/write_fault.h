#pragma once
// Makes writes fail as a full (or read-only) disk would, through core's fault-injection seam, for
// as long as the object lives: the fault is cleared however the test ends.
#include "core/files.h"

namespace tandem::testing {

class ScopedWriteFault {
 public:
  explicit ScopedWriteFault(WriteFault fault) { set_write_fault(std::move(fault)); }
  ~ScopedWriteFault() { set_write_fault(std::nullopt); }
  ScopedWriteFault(const ScopedWriteFault&) = delete;
  ScopedWriteFault& operator=(const ScopedWriteFault&) = delete;
};

}  // namespace tandem::testing
