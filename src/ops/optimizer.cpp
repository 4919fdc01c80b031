#include "ops/op_table.h"

namespace tandem {

// Filled in by the optimizer op family.
void define_optimizer_ops(OpTable&) {}

}  // namespace tandem
