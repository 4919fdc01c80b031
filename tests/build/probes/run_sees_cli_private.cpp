// Probe (tests/build): the run layer must not see the CLI above it: the CLI maps its options onto
// the run's settings, never the other way round.
#include "cli/args.h"
