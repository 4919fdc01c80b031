#include "ops/op_table.h"

namespace tandem {

// Filled in by the pool op family.
void define_pool_ops(OpTable&) {}

}  // namespace tandem
