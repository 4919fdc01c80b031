#include "ops/op_table.h"

namespace tandem {

// Filled in by the conv op family.
void define_conv_ops(OpTable&) {}

}  // namespace tandem
