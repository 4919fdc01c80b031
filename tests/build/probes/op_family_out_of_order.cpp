// Probe (tests/build): a family file whose ops are out of their list's order does not compile.
// expected error: a family file's ops differ from its list in tandem/ops.h, or are out of order
#include "ops/op_table.h"

namespace tandem {
std::vector<OpDef> define_gather_ops_swapped() {
  return op_family<k_gather_ops>(OpRules<OpKind::scatter_add>{2, 2, nullptr, nullptr, nullptr},
                                 OpRules<OpKind::gather>{2, 2, nullptr, nullptr, nullptr});
}
}  // namespace tandem
