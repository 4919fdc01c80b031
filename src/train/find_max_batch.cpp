// train::find_max_batch (tandem/train.h): the largest batch that fits a device, by trial.
#include <algorithm>
#include <ostream>

#include "tandem/error.h"
#include "tandem/train.h"

namespace tandem::train {

std::int64_t find_max_batch(std::int64_t first, std::int64_t most,
                            const std::function<bool(std::int64_t)>& fits, std::ostream* log) {
  auto trial = [&](std::int64_t batch) {
    const bool ok = fits(batch);
    if (log) *log << "  batch size " << batch << ": " << (ok ? "fits" : "out of memory") << "\n";
    return ok;
  };
  std::int64_t fitted = 0;         // the largest size known to fit
  std::int64_t failed = most + 1;  // the smallest size known not to
  std::int64_t batch = std::clamp<std::int64_t>(first, 1, most);
  if (trial(batch)) {
    fitted = batch;
    while (fitted < most) {
      batch = std::min(2 * fitted, most);
      if (!trial(batch)) {
        failed = batch;
        break;
      }
      fitted = batch;
    }
  } else {
    failed = batch;
    while (failed > 1) {
      batch = failed / 2;
      if (trial(batch)) {
        fitted = batch;
        break;
      }
      failed = batch;
    }
    if (fitted == 0) {
      throw Error(
          "find_max_batch: not even a batch of one example fits the device's memory; use a "
          "smaller model, a 16-bit precision (tandem train --precision bf16), or a larger "
          "memory limit");
    }
  }
  while (failed - fitted > 1) {
    batch = fitted + (failed - fitted) / 2;
    if (trial(batch)) {
      fitted = batch;
    } else {
      failed = batch;
    }
  }
  return fitted;
}

}  // namespace tandem::train
