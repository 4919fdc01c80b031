// train::find_max_batch (tandem/train.h): the largest batch that fits a device, by trial.
#include <algorithm>
#include <ostream>

#include "tandem/error.h"
#include "tandem/nn.h"
#include "tandem/pipeline.h"
#include "tandem/runtime.h"
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

std::int64_t search_max_batch(const MaxBatchSearch& search, std::ostream* log) {
  auto fits = [&](std::int64_t batch) {
    const std::int64_t global_batch = batch * search.replicas;
    try {
      const data::Pipeline batches = search.input(global_batch, 0);
      // Compiled or eager as the run will be: a compiled step holds its planned block between
      // steps, an eager one frees its activations.
      nn::Model model = search.model(batches.num_batches() * search.epochs);
      model.fit(batches.take(2), {.verbose = 0});
      // The epoch's last, partial batch (a compiled step holds a plan per batch shape), while a
      // pass over the run's pipeline holds its buffers as it will in training.
      if (const std::int64_t remainder = search.examples % global_batch; remainder > 0) {
        data::ElementIterator held = batches.start();
        held.next();
        model.fit(search.input(global_batch, remainder), {.verbose = 0});
      }
      return true;
    } catch (const OutOfMemory&) {
      return false;
    }
  };
  const std::size_t limit = search.memory_limit;
  if (limit > 0) {
    for (const Device& device : search.devices)
      set_memory_limit(device, limit / 50 * 49);
  }
  const std::int64_t found = find_max_batch(
      search.first, std::max<std::int64_t>(1, search.examples / search.replicas), fits, log);
  if (limit > 0) {
    for (const Device& device : search.devices)
      set_memory_limit(device, limit);
  }
  return found;
}

}  // namespace tandem::train
