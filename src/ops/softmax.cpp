#include "ops/op_table.h"

namespace tandem {

// Filled in by the softmax op family.
void define_softmax_ops(OpTable&) {}

}  // namespace tandem
