#include "ops/op_table.h"

namespace tandem {

// Filled in by the loss op family.
void define_loss_ops(OpTable&) {}

}  // namespace tandem
