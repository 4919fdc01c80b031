// Probe (tests/build): the ops layer must not see the autodiff layer above it.
#include "tandem/autodiff.h"
