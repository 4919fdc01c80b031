#pragma once
// `tandem train`'s pruning options: --prune S trains the model to sparsity S by magnitude pruning
// (tandem/pruning.h, TF-MOT's schedules), --prune-schedule, --prune-pattern and --prune-layers
// choose how; the zeros stay in the saved model.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "tandem/pruning.h"

namespace tandem::cli {

struct PruneOptions {
  double sparsity = 0.0;  // 0: no pruning
  std::string schedule = "polynomial";
  std::string pattern = "unstructured";
  std::vector<std::string> layers;
};

const OptionTable<PruneOptions>& prune_options();

// The pruning callback for a run of `total_steps` steps: polynomial decay from 0 to the target
// over the first three quarters of the run (then training goes on at the target, to recover), or
// the target from the first step (constant); masks updated every min(100, total / 20) steps.
// Null without --prune.
std::shared_ptr<pruning::Pruning> make_pruning(const PruneOptions& options, nn::Model& model,
                                               std::int64_t total_steps);

}  // namespace tandem::cli
