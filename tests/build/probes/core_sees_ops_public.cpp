// Probe (tests/build): the core layer must not see the ops layer's public header.
#include "tandem/ops.h"
