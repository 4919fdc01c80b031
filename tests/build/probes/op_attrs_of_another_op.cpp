// Probe (tests/build): a kernel that reads an attribute its op does not have does not compile
// (relu takes none; epsilon belongs to the normalisations).
// expected error: no member named
#include "ops/op_attrs.h"

namespace tandem {
double relu_epsilon(const Attrs& attrs) {
  return op_attrs<OpKind::relu>(attrs).epsilon;
}
}  // namespace tandem
