// Probe (tests/build): the autodiff layer must not see the compile layer above it.
#include "compile/graph.h"
