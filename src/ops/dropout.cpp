#include "ops/op_table.h"

namespace tandem {

// Filled in by the dropout op family.
void define_dropout_ops(OpTable&) {}

}  // namespace tandem
