// Probe (tests/build): the run layer must not see the bench layer beside it.
#include "tandem/bench.h"
