#include "ops/op_table.h"

namespace tandem {

// Filled in by the linalg op family.
void define_linalg_ops(OpTable&) {}

}  // namespace tandem
