// Probe (tests/build): the data layer depends only on core: no ops.
#include "ops/backend.h"
