#pragma once
// `tandem train`'s options for runs that survive interruption and leave a model behind:
// checkpoints (--checkpoint-dir, --checkpoint-every, --keep-checkpoints, --keep-best), resuming
// (--resume), deterministic mode (--deterministic) and the saved model (--save-model), and what
// they do around fit.
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "tandem/data.h"
#include "tandem/io.h"

namespace tandem::cli {

struct CheckpointingOptions {
  std::string directory;         // --checkpoint-dir; empty: no checkpoints
  std::int64_t every_steps = 0;  // --checkpoint-every; 0: at the end of every epoch only
  int keep = 3;                  // --keep-checkpoints
  std::string keep_best;         // --keep-best: a log key; empty: none
  std::string resume;            // --resume; empty: a fresh run
  bool deterministic = false;    // --deterministic
  std::string save_model;        // --save-model; empty: none
};

// The options: their help lines, parsing and checks.
const OptionTable<CheckpointingOptions>& checkpointing_options();

// The options that decide a run's course: a resumed run must keep them. The checkpoint stores
// them (with the carried ones below) as its RunConfig, keyed by option name.
const std::vector<std::string>& run_defining_options();
// Stored too, and taken from the checkpoint on --resume unless given again.
const std::vector<std::string>& carried_options();

// With --resume: the checkpoint's run options merged into `args` (parsed again against `spec`).
// `canonical` turns arguments into the run configuration as the checkpoint stores it, so "1e-3"
// and "0.001" compare equal. Throws UsageError naming an option given with another value than
// the run had.
ParsedArgs resumed_arguments(const CommandSpec& spec, const ParsedArgs& args,
                             const io::CheckpointInfo& checkpoint,
                             const std::function<io::RunConfig(const ParsedArgs&)>& canonical);

// The key of a RunConfig that records how many replicas trained (not an option).
inline constexpr const char* kReplicasKey = "replicas";

// Checkpoints, resume and the saved model of one `tandem train` run.
class Checkpointing {
 public:
  Checkpointing(CheckpointingOptions options, io::RunConfig config,
                std::optional<io::CheckpointInfo> resume);

  // Before fit: on --resume restores the checkpoint into the compiled model and points fit at
  // its position; checks the dataset has the batches per epoch the run had; refuses a
  // --checkpoint-dir that holds another run's checkpoints. Prints what it did to `log` (if any).
  void prepare(nn::Model& model, const data::Dataset& training, train::FitOptions& fit_options,
               std::ostream* log);
  // The run's per-epoch logs: a resumed run's earlier epochs (from its checkpoint), then those of
  // `fit`, so that the report of a resumed run has the whole run's history.
  io::EpochHistory run_history(const train::History& fit) const;
  // The ModelCheckpoint callback, when checkpointing.
  std::vector<std::shared_ptr<train::Callback>> callbacks() const;
  // After fit: writes --save-model and prints where the checkpoints and the model are. When the
  // model cannot be saved there (the disk filled during the run, say), it is saved into the
  // system's temporary folder instead, the error says where, and the result is false: trained
  // weights are never thrown away.
  bool finish(const nn::Model& model, const std::vector<std::string>& class_names,
              std::ostream& out);

 private:
  CheckpointingOptions options_;
  io::RunConfig config_;
  std::optional<io::CheckpointInfo> resume_;
  std::shared_ptr<io::ModelCheckpoint> callback_;
};

}  // namespace tandem::cli
