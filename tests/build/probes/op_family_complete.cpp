// Probe (tests/build), the positive control: a family with all its ops in order compiles, and a
// kernel reads its own op's typed attributes.
#include "ops/op_attrs.h"
#include "ops/op_table.h"

namespace tandem {
std::vector<OpDef> define_gather_ops_again() {
  return op_family<k_gather_ops>(OpRules<OpKind::gather>{2, 2, nullptr, nullptr, nullptr},
                                 OpRules<OpKind::scatter_add>{2, 2, nullptr, nullptr, nullptr});
}
double layer_norm_epsilon(const Attrs& attrs) {
  return op_attrs<OpKind::layer_norm>(attrs).epsilon;
}
}  // namespace tandem
