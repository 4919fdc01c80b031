// Probe (tests/build): the sweep layer must not see the run layer above it (a sweep runs whatever
// training function it is given; the CLI makes that a `tandem train`).
#include "tandem/run.h"
