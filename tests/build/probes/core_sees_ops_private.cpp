// Probe (tests/build): the core layer must not see the ops layer's folder.
#include "ops/op_table.h"
