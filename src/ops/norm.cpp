#include "ops/op_table.h"

namespace tandem {

// Filled in by the norm op family.
void define_norm_ops(OpTable&) {}

}  // namespace tandem
