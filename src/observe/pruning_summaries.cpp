// PruningSummaries (tandem/observe.h): the sparsity of every pruned layer for TensorBoard.
#include "tandem/observe.h"

namespace tandem::observe {

PruningSummaries::PruningSummaries(std::shared_ptr<const pruning::Pruning> pruning,
                                   const std::string& log_dir)
    : pruning_(std::move(pruning)), writer_(std::make_shared<SummaryWriter>(log_dir + "/train")) {}

void PruningSummaries::on_epoch_end(int, const train::Logs&) {
  const std::int64_t step = pruning_->step();
  for (const pruning::PrunedWeight& pruned : pruning_->weights())
    writer_->add_scalar("pruning/" + pruned.layer + "/sparsity", pruning_->sparsity(pruned.layer),
                        step);
  writer_->add_scalar("pruning/target_sparsity", pruning_->target_sparsity(), step);
  writer_->flush();
}

}  // namespace tandem::observe
