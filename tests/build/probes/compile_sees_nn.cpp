// Probe (tests/build): the compile layer must not see the nn layer above it (a compiled step is
// a graph of op-table nodes; it knows no layers or models).
#include "tandem/nn.h"
