// Probe (tests/build): a family file that leaves one of its ops out does not compile.
// expected error: a family file defines more or fewer ops than its list in tandem/ops.h
#include "ops/op_table.h"

namespace tandem {
std::vector<OpDef> define_gather_ops_with_a_gap() {
  return op_family<k_gather_ops>(OpRules<OpKind::gather>{2, 2, nullptr, nullptr, nullptr});
}
}  // namespace tandem
