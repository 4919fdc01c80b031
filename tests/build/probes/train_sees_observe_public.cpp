// Probe (tests/build): the train layer must not see the observe layer above it.
#include "tandem/observe.h"
