#pragma once
// A crash in the middle of a run, as far as the run can tell: a callback that throws from the end
// of a chosen step. The run's checkpoint writer finishes what it began as the run unwinds, as the
// background writer of a killed process's last complete checkpoint had.
#include <cstdint>
#include <string>

#include "tandem/error.h"
#include "tandem/train.h"

namespace tandem::testing {

class CrashAt : public train::Callback {
 public:
  explicit CrashAt(std::int64_t step) : step_(step) {}
  void on_train_batch_end(std::int64_t, const train::Logs&) override {
    if (++seen_ == step_) throw IoError("simulated crash at step " + std::to_string(step_));
  }

 private:
  std::int64_t step_;
  std::int64_t seen_ = 0;
};

}  // namespace tandem::testing
