#pragma once
// Checkpoints, resume and the saved model of one run, around its fit.
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tandem/io.h"
#include "tandem/run.h"

namespace tandem::run {

// Throws ConfigError naming the first setting that defines the run and differs from the
// checkpoint's record (src/run/identity.cpp).
void check_resumable(const RunConfig& config, const io::CheckpointInfo& checkpoint,
                     const SettingName& name);
// Throws ConfigError when the checkpoint's run trained on another number of replicas.
void check_replicas(const io::CheckpointInfo& checkpoint, int replicas, const SettingName& name);
// "the run read its training data from --data-dir X, this one from --data Y" when the data
// source a resumed run names differs from the one its checkpoint records; "" when the same.
std::string data_source_difference(const RunConfig& config, const io::CheckpointInfo& checkpoint,
                                   const SettingName& name);
// Whether the checkpoints in a folder are of the run `config` defines.
bool same_run(const RunConfig& config, const io::CheckpointInfo& checkpoint);

class RunCheckpoints {
 public:
  RunCheckpoints(const RunConfig& config, io::RunConfig record,
                 std::optional<io::CheckpointInfo> resume, SettingName name);

  // Before fit: on resume restores the checkpoint into the compiled model and points fit at its
  // position; checks the dataset has the batches per epoch the run had; refuses a checkpoint
  // folder that holds another run's checkpoints, and a model that cannot be saved. Prints what
  // it did to `log` (if any).
  void prepare(nn::Model& model, const data::Dataset& training, train::FitOptions& fit_options,
               std::ostream* log);
  // The run's per-epoch logs: a resumed run's earlier epochs (from its checkpoint), then those
  // of `fit`, so that the report of a resumed run has the whole run's history.
  io::EpochHistory run_history(const train::History& fit) const;
  // The ModelCheckpoint callback, when checkpointing.
  std::vector<std::shared_ptr<train::Callback>> callbacks() const;
  // After fit: saves the model where asked and prints where the checkpoints and the model are.
  // When the model cannot be saved there (the disk filled during the run, say), it is saved
  // into the system's temporary folder instead, `warnings` says where, and the result is false:
  // trained weights are never thrown away.
  bool finish(const nn::Model& model, const std::vector<std::string>& class_names,
              std::ostream* out, std::ostream* warnings);
  // After a failure that follows training (evaluating the test set, the observers' end): saves
  // the trained model where asked (or, failing that, into the temporary folder), saying why on
  // `warnings`, so that no failure after the last step loses it. Nothing when no model was asked
  // for.
  void rescue(const nn::Model& model, const std::vector<std::string>& class_names,
              std::ostream* warnings, const std::string& failure);

 private:
  // Saves the model where asked, or into the temporary folder when it cannot be saved there.
  bool save(const nn::Model& model, const std::vector<std::string>& class_names, std::ostream* out,
            std::ostream* warnings);

  CheckpointConfig options_;
  RunConfig config_;
  io::RunConfig record_;
  std::optional<io::CheckpointInfo> resume_;
  SettingName name_;
  std::shared_ptr<io::ModelCheckpoint> callback_;
};

}  // namespace tandem::run
